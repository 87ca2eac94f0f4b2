"""Deterministic regeneration of the golden vectors, with an atomic swap into place.

``regen`` builds every family into a temporary sibling folder, compares it with the current
set, and only then renames it into place: the old folder is renamed aside, the new one renamed
in, the old one removed. A run killed before the swap leaves the old set untouched (the stale
temporary folder is removed by the next run); one killed between the two renames is repaired
by ``recover`` (called by regen, verify and the loader), which renames the old set back.
``regen --check`` writes nothing near the data: it builds in the system's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mxgate.vectors import diff as _diff
from mxgate.vectors import manifest, schema
from mxgate.vectors.families import FAMILIES
from mxgate.vectors.families import FamilyBuilder

GENERATOR_VERSION = "1.0.0"
Echo = Callable[[str], None]


def package_data_dir() -> Path:
    """The vector folder shipped inside the package."""
    return Path(__file__).resolve().parent / "data"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _previous(out: Path) -> Path:
    return out.parent / f".{out.name}.previous"


def _temp(out: Path) -> Path:
    return out.parent / f".{out.name}.tmp-{os.getpid()}"


def recover(out: Path) -> str | None:
    """Repair a swap interrupted between its two renames; says what it did (or None)."""
    out, prev = Path(out), _previous(Path(out))
    if prev.is_dir() and not out.exists():
        prev.rename(out)
        return f"restored the previous vector set into {out} (a regeneration was interrupted mid-swap)"
    if prev.is_dir() and out.is_dir():
        shutil.rmtree(prev)
        return f"removed {prev.name} left by a regeneration interrupted after its swap"
    return None


def build_family(module, echo: Echo = _stderr) -> tuple[dict[str, Any], bytes, bytes]:
    """(document, json bytes, npz bytes) of one family; the document is validated first."""
    fb = FamilyBuilder(module.NAME, module.DESCRIPTION, module.SEED, GENERATOR_VERSION,
                       profiles=getattr(module, "PROFILES", None))
    with np.errstate(all="ignore"):  # boundary inputs (NaN, Inf, overflow) are the point, not a warning
        module.build(fb)
    doc = fb.document()
    schema.validate(doc, set(fb.store.arrays))
    return doc, manifest.canonical_json(doc), fb.store.to_bytes()


def generate_into(directory: Path, progress: Echo = _stderr) -> dict[str, bytes]:
    """Build every available family into ``directory`` (which must exist); returns name -> bytes."""
    files: dict[str, bytes] = {}
    families: dict[str, dict[str, Any]] = {}
    total = len(FAMILIES)
    for i, module in enumerate(FAMILIES, start=1):
        reason = module.available()
        if reason is not None:
            progress(f"[{i}/{total}] {module.NAME}: skipped ({reason})")
            continue
        progress(f"[{i}/{total}] {module.NAME}: building ...")
        start = time.perf_counter()
        doc, doc_bytes, npz = build_family(module)
        cases = sum(len(g["cases"]) for g in doc["groups"])
        for name, data in ((f"{module.NAME}.json", doc_bytes), (f"{module.NAME}.npz", npz)):
            (Path(directory) / name).write_bytes(data)
            files[name] = data
        families[module.NAME] = {"cases": cases, "groups": len(doc["groups"]),
                                 "ops": sorted({g["op"] for g in doc["groups"]})}
        progress(f"[{i}/{total}] {module.NAME}: {cases} cases in {len(doc['groups'])} groups, "
                 f"{(len(doc_bytes) + len(npz)) / 1e6:.2f} MB, {time.perf_counter() - start:.1f} s")
    data = manifest.build(files, GENERATOR_VERSION, families)
    (Path(directory) / manifest.MANIFEST).write_bytes(data)
    files[manifest.MANIFEST] = data
    return files


def _listing(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _foreign(directory: Path) -> list[str]:
    """Entries of an existing output folder that a vector set never holds."""
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir()
                  if not (p.is_file() and (p.suffix in (".json", ".npz"))))


def regen(out: Path | None = None, *, check: bool = False, force: bool = False,
          echo: Echo = print, progress: Echo = _stderr) -> int:
    """Regenerate (or, with ``check``, compare against) the vector set in ``out``. Exit status:
    0 written or up to date, 1 out of date (check) or refused (changed files without force).

    ``check`` only reads ``out``: it builds in a temporary folder of the system's (never beside
    the data, which may be read-only or inside an installed package) and repairs nothing."""
    out = Path(out) if out is not None else package_data_dir()
    if check:
        with tempfile.TemporaryDirectory(prefix="mxgate-vectors-check-") as scratch:
            return _compare(out, Path(scratch), echo, progress)
    note = recover(out)
    if note:
        echo(note)
    for stale in out.parent.glob(f".{out.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    foreign = _foreign(out)
    if foreign:
        echo(f"refusing to write into {out}: it holds entries that are not vector files: {', '.join(foreign)}")
        return 1
    tmp = _temp(out)  # a sibling: the swap into place is a rename on one file system
    tmp.mkdir(parents=True)
    try:
        generate_into(tmp, progress)
        old, new = _listing(out), _listing(tmp)
        if old == new:
            echo(f"vectors up to date: {len(new)} files in {out} match the oracle byte for byte")
            return 0
        lines = _diff.summarize(out, tmp)
        changed = sorted(n for n in old if old.get(n) != new.get(n))
        if changed and not force:
            for line in lines:
                echo(line)
            echo(f"refusing to overwrite {len(changed)} changed file(s) in {out} ({', '.join(changed)}); "
                 "rerun with --force to replace them")
            return 1
        for line in lines:
            echo(line)
        _swap(out, tmp)
        echo(f"wrote {len(new)} files to {out}")
        return 0
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _compare(out: Path, scratch: Path, echo: Echo, progress: Echo) -> int:
    """``regen --check``: what the oracle produces today, built in ``scratch``, against ``out``."""
    foreign = _foreign(out)
    if foreign:
        echo(f"vectors out of date: {out} holds entries that are not vector files: {', '.join(foreign)}")
        return 1
    generate_into(scratch, progress)
    old, new = _listing(out), _listing(scratch)
    if old == new:
        echo(f"vectors up to date: {len(new)} files in {out} match the oracle byte for byte")
        return 0
    for line in _diff.summarize(out, scratch):
        echo(line)
    differ = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    echo(f"vectors out of date: {len(differ)} file(s) differ from what the oracle produces today "
         f"({', '.join(differ)}); run 'mxgate vectors regen' and review the diff")
    return 1


def _swap(out: Path, tmp: Path) -> None:
    prev = _previous(out)
    if out.exists():
        out.rename(prev)
    tmp.rename(out)
    if prev.exists():
        shutil.rmtree(prev)
