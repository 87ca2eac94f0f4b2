"""Per-case difference summary between two vector folders (shown before anything is replaced)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np


MAX_LINES_PER_FAMILY = 40


def _load(directory: Path, family: str) -> tuple[dict[str, Any] | None, dict[str, np.ndarray] | None, str | None]:
    """(document, arrays, None), (None, None, None) when the family's files are absent, or
    (None, None, why) naming the damaged file. Every array is read here: a zip member whose CRC
    or header is damaged shows now, not halfway through the case comparison."""
    name = f"{family}.json"
    try:
        doc = json.loads((directory / name).read_bytes())
        name = f"{family}.npz"
        with np.load(io.BytesIO((directory / name).read_bytes()), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
        return doc, arrays, None
    except FileNotFoundError:
        return None, None, None
    except Exception as error:  # a damaged previous file: say which, do not crash the summary
        return None, None, f"{name} unreadable ({type(error).__name__}: {' '.join(str(error).split())})"


def _families(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    return {p.stem for p in directory.glob("*.json") if p.name != "manifest.json"}


def _digest(npz, key: str) -> str:
    a = npz[key]
    return hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()


def _cases(doc: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    return {c["id"]: (g, c) for g in doc["groups"] for c in g["cases"]}


def _array_note(old_npz, new_npz, old_key: str, new_key: str) -> str:
    a, b = old_npz[old_key], new_npz[new_key]
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{list(a.shape)} -> {b.dtype}{list(b.shape)}"
    ea = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (-1,))
    eb = np.ascontiguousarray(b).view(np.uint8).reshape(b.shape + (-1,))
    diff = np.any(ea != eb, axis=-1)
    first = tuple(int(i) for i in np.argwhere(diff)[0]) if diff.any() else ()
    return f"{int(diff.sum())} of {diff.size} elements differ, first at {first}"


def _case_changes(old: tuple, new: tuple, old_npz, new_npz) -> list[str]:
    (og, oc), (ng, nc) = old, new
    notes = []
    for field in ("comment", "flags", "tier", "params"):
        if oc[field] != nc[field]:
            notes.append(f"{field} changed")
    if og["op"] != ng["op"]:
        notes.append(f"op {og['op']} -> {ng['op']}")
    for name in sorted(set(oc["inputs"]) | set(nc["inputs"])):
        if name not in oc["inputs"] or name not in nc["inputs"]:
            notes.append(f"input {name} added/removed")
        elif _digest(old_npz, oc["inputs"][name]) != _digest(new_npz, nc["inputs"][name]):
            notes.append(f"input {name}: {_array_note(old_npz, new_npz, oc['inputs'][name], nc['inputs'][name])}")
    for prof in sorted(set(oc["results"]) | set(nc["results"])):
        ro, rn = oc["results"].get(prof), nc["results"].get(prof)
        if ro is None or rn is None:
            notes.append(f"{prof}: result {'added' if ro is None else 'removed'}")
            continue
        if ro["result"] != rn["result"]:
            notes.append(f"{prof}: {ro['result']} -> {rn['result']}")
        elif ro.get("reason") != rn.get("reason"):
            notes.append(f"{prof}: reason changed")
        for name in sorted(set(ro["outputs"]) & set(rn["outputs"])):
            if _digest(old_npz, ro["outputs"][name]) != _digest(new_npz, rn["outputs"][name]):
                notes.append(f"{prof} {name}: {_array_note(old_npz, new_npz, ro['outputs'][name], rn['outputs'][name])}")
        alt_o = [sorted((n, _digest(old_npz, k)) for n, k in a["outputs"].items()) for a in ro.get("alternatives", [])]
        alt_n = [sorted((n, _digest(new_npz, k)) for n, k in a["outputs"].items()) for a in rn.get("alternatives", [])]
        if alt_o != alt_n:
            notes.append(f"{prof}: alternatives changed")
    return notes


def summarize(old_dir: Path, new_dir: Path) -> list[str]:
    """Lines naming every added, removed and changed case, family by family."""
    old_dir, new_dir = Path(old_dir), Path(new_dir)
    lines: list[str] = []
    for family in sorted(_families(old_dir) | _families(new_dir)):
        old_doc, old_npz, old_err = _load(old_dir, family)
        new_doc, new_npz, _ = _load(new_dir, family)
        if new_doc is None:
            lines.append(f"{family}: family removed")
            continue
        new_cases = _cases(new_doc)
        if old_err:
            lines.append(f"{family}: {old_err}")
            continue
        if old_doc is None:
            lines.append(f"{family}: new family, {len(new_cases)} cases")
            continue
        try:
            old_cases = _cases(old_doc)
            added = sorted(set(new_cases) - set(old_cases))
            removed = sorted(set(old_cases) - set(new_cases))
            changed: list[tuple[str, list[str]]] = []
            for cid in sorted(set(old_cases) & set(new_cases)):
                notes = _case_changes(old_cases[cid], new_cases[cid], old_npz, new_npz)
                if notes:
                    changed.append((cid, notes))
            header_notes = [k for k in ("generator_version", "seed", "description", "profiles")
                            if old_doc["header"].get(k) != new_doc["header"].get(k)]
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            # well-formed files whose content does not follow the schema (a damaged document)
            lines.append(f"{family}: {family}.json/.npz do not follow the schema "
                         f"({type(error).__name__}: {' '.join(str(error).split())})")
            continue
        if not (added or removed or changed or header_notes):
            continue
        lines.append(f"{family}: {len(changed)} changed, {len(added)} added, {len(removed)} removed "
                     f"(of {len(new_cases)} cases)" + (f"; header: {', '.join(header_notes)} changed" if header_notes else ""))
        detail = [f"  ~ {cid}: {'; '.join(notes)}" for cid, notes in changed]
        detail += [f"  + {cid}" for cid in added] + [f"  - {cid}" for cid in removed]
        lines += detail[:MAX_LINES_PER_FAMILY]
        if len(detail) > MAX_LINES_PER_FAMILY:
            lines.append(f"  ... and {len(detail) - MAX_LINES_PER_FAMILY} more")
    return lines
