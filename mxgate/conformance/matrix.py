"""The conformance matrix: result rows folded into (backend, op) cells, rendered as text,
JSON and Markdown. Each cell names the profile its backend was judged under and how that
profile differs from the hardware profile gfx950."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mxgate.conformance.verdicts import ACCEPTABLE, EXACT, FAIL, UNSUPPORTED

SCHEMA = "mxgate-conformance-matrix"
VERSION = 1
LABELS = {EXACT: "exact", ACCEPTABLE: "acceptable", FAIL: "fail", UNSUPPORTED: "not supported here"}
_RANK = {EXACT: 0, ACCEPTABLE: 1, FAIL: 3, UNSUPPORTED: 2}
MAX_LISTED = 20


def _differences(profile: str | None) -> dict[str, list[Any]] | None:
    if profile is None:
        return None
    from mxgate.oracle import profiles

    try:
        p = profiles.get(profile)
    except ValueError:
        return None
    return {k: [_plain(a), _plain(b)] for k, (a, b) in sorted(p.differences(profiles.hardware()).items())}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def build(rows: list[dict[str, Any]], missing: dict[str, str], *, tier: str, hypothesis_profile: str) -> dict[str, Any]:
    """The matrix of one run: cells per (backend, op), the backends not available here, the rows."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cell = cells.setdefault((r["backend"], r["op"]), {
            "backend": r["backend"], "op": r["op"], "counts": Counter(), "reasons": Counter(),
            "profiles": set(), "failures": [], "unsupported": Counter(),
        })
        cell["counts"][r["verdict"]] += 1
        if r["verdict"] == ACCEPTABLE:
            cell["reasons"][r["reason"]] += 1
        if r["verdict"] == UNSUPPORTED:
            cell["unsupported"][r["reason"]] += 1
        if r["verdict"] == FAIL:
            cell["failures"].append({"config": r["config"], "reason": r["reason"], "first_mismatch": r["first_mismatch"],
                                     "seed": r["seed"]})
        if r.get("profile"):
            cell["profiles"].add(r["profile"])
    out_cells = []
    for (_, _), c in sorted(cells.items()):
        worst = max(c["counts"], key=lambda v: _RANK[v])
        out_cells.append({
            "backend": c["backend"], "op": c["op"], "verdict": worst,
            "counts": {v: c["counts"].get(v, 0) for v in (EXACT, ACCEPTABLE, FAIL, UNSUPPORTED)},
            "acceptable_reasons": dict(sorted(c["reasons"].items())),
            "unsupported_reasons": dict(sorted(c["unsupported"].items())),
            "failures": c["failures"][:MAX_LISTED], "failures_total": len(c["failures"]),
            "profiles": {p: _differences(p) for p in sorted(c["profiles"])},
        })
    return {
        "schema": SCHEMA, "version": VERSION, "tier": tier, "hypothesis_profile": hypothesis_profile,
        "cells": out_cells, "not_supported_here": dict(sorted(missing.items())),
        "results": [{k: v for k, v in r.items()} for r in rows],
    }


def _profile_note(cell: dict[str, Any]) -> str:
    notes = []
    for name, diffs in cell["profiles"].items():
        if diffs is None:
            notes.append(name)
        elif not diffs:
            notes.append(f"{name} (= gfx950)")
        else:
            notes.append(f"{name} (vs gfx950: " + ", ".join(f"{k} {a!r} not {b!r}" for k, (a, b) in diffs.items()) + ")")
    return "; ".join(notes)


def _counts(cell: dict[str, Any]) -> str:
    if cell["verdict"] == UNSUPPORTED and not any(n for v, n in cell["counts"].items() if v != UNSUPPORTED):
        return f"{cell['counts'][UNSUPPORTED]} test(s)"
    return ", ".join(f"{LABELS[v]} {n}" for v, n in cell["counts"].items() if n)


def text_lines(m: dict[str, Any]) -> list[str]:
    lines = [f"tier {m['tier']}, hypothesis profile {m['hypothesis_profile']}"]
    for c in m["cells"]:
        lines.append(f"{c['backend']:<18} {c['op']:<34} {LABELS[c['verdict']]:<18} {_counts(c)}")
        if c["profiles"]:
            lines.append(f"{'':<18} profile: {_profile_note(c)}")
        for reason, n in c["acceptable_reasons"].items():
            lines.append(f"{'':<18} acceptable x{n}: {reason}")
        for reason, n in c["unsupported_reasons"].items():
            lines.append(f"{'':<18} not supported here x{n}: {reason}")
        for f in c["failures"]:
            at = f" first mismatch {tuple(f['first_mismatch'])}" if f["first_mismatch"] is not None else ""
            lines.append(f"{'':<18} FAIL {f['config']}:{at} {f['reason']}")
    for backend, reason in m["not_supported_here"].items():
        lines.append(f"{backend:<18} {'*':<34} {'not supported here':<18} {reason}")
    return lines


def to_json(m: dict[str, Any]) -> str:
    return json.dumps(m, sort_keys=True, indent=1) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(m: dict[str, Any]) -> str:
    out = [f"# mxgate conformance matrix", "", f"Tier `{m['tier']}`, Hypothesis profile `{m['hypothesis_profile']}`.", "",
           "| backend | op | verdict | counts | profile (differences from gfx950) |", "|---|---|---|---|---|"]
    for c in m["cells"]:
        out.append(f"| {_md(c['backend'])} | {_md(c['op'])} | {LABELS[c['verdict']]} | {_md(_counts(c))} | "
                   f"{_md(_profile_note(c))} |")
    for backend, reason in m["not_supported_here"].items():
        out.append(f"| {_md(backend)} | * | not supported here | | {_md(reason)} |")
    details = [c for c in m["cells"] if c["acceptable_reasons"] or c["failures"]]
    if details:
        out += ["", "## Details", ""]
        for c in details:
            for reason, n in c["acceptable_reasons"].items():
                out.append(f"- {_md(c['backend'])} `{_md(c['op'])}` acceptable x{n}: {_md(reason)}")
            for f in c["failures"]:
                out.append(f"- {_md(c['backend'])} `{_md(c['op'])}` **fail** `{_md(f['config'])}`: {_md(f['reason'])}")
    return "\n".join(out) + "\n"
