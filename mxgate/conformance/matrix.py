"""The conformance matrix: result rows folded into (backend, op) cells, rendered as text,
JSON and Markdown.

One cell per (backend, op) that the backend implements and ran (ops it does not implement are
not rows); one line per backend that cannot run here, with the reason; each profile a backend
was judged under is named once per backend with its differences from the hardware profile
gfx950; failures are listed again together at the end; the last line counts the cells and
gives the exit status.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mxgate.conformance import outcome
from mxgate.conformance.judge import ACCEPTABLE, EXACT, FAIL, UNSUPPORTED

SCHEMA = "mxgate-conformance-matrix"
VERSION = 2
LABELS = {EXACT: "exact", ACCEPTABLE: "acceptable", FAIL: "fail", UNSUPPORTED: "not supported here"}
_JUDGED_RANK = {EXACT: 0, ACCEPTABLE: 1, FAIL: 2}
MAX_LISTED = 20


def _differences(profile: str) -> dict[str, list[Any]] | None:
    from mxgate.oracle import profiles

    try:
        p = profiles.get(profile)
    except ValueError:
        return None
    return {k: [_plain(a), _plain(b)] for k, (a, b) in sorted(p.differences(profiles.hardware()).items())}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _cell_verdict(counts: Counter) -> str:
    judged = [v for v in counts if v in _JUDGED_RANK]
    return max(judged, key=_JUDGED_RANK.__getitem__) if judged else UNSUPPORTED


def build(rows: list[dict[str, Any]], missing: dict[str, str], *, tier: str, hypothesis_profile: str,
          device: str = "cpu", exit_status: int | None = None, interrupted: str | None = None) -> dict[str, Any]:
    """The matrix of one run: cells per (backend, op), the backends not available here, the rows."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    backend_profiles: dict[str, set[str]] = {}
    information = [r for r in rows if r.get("information")]
    for r in rows:
        if r.get("information"):  # a relation to another profile, not a verdict: listed apart
            continue
        cell = cells.setdefault((r["backend"], r["op"]), {
            "backend": r["backend"], "op": r["op"], "counts": Counter(), "reasons": Counter(),
            "profiles": set(), "failures": [], "unsupported": Counter(), "known": set(),
        })
        cell["counts"][r["verdict"]] += 1
        if r["verdict"] == ACCEPTABLE:
            cell["reasons"][r["reason"]] += 1
        if r["verdict"] == UNSUPPORTED:
            cell["unsupported"][r["reason"]] += 1
        if r["verdict"] == FAIL:
            cell["failures"].append({"config": r["config"], "reason": r["reason"], "first_mismatch": r["first_mismatch"],
                                     "seed": r["seed"], "profile": r.get("profile"),
                                     "expected_failure": bool(r.get("expected_failure"))})
            if r.get("known"):
                cell["known"].add(r["known"])
        if r.get("profile"):
            cell["profiles"].add(r["profile"])
            backend_profiles.setdefault(r["backend"], set()).add(r["profile"])
    out_cells = []
    for (_, _), c in sorted(cells.items()):
        failures = c["failures"]
        out_cells.append({
            "backend": c["backend"], "op": c["op"], "verdict": _cell_verdict(c["counts"]),
            "counts": {v: c["counts"].get(v, 0) for v in (EXACT, ACCEPTABLE, FAIL, UNSUPPORTED)},
            "acceptable_reasons": dict(sorted(c["reasons"].items())),
            "unsupported_reasons": dict(sorted(c["unsupported"].items())),
            "failures": failures[:MAX_LISTED], "failures_total": len(failures),
            "known_findings": sorted(c["known"]),
            "expected_failure": bool(failures) and all(f["expected_failure"] for f in failures),
            "profiles": sorted(c["profiles"]),
        })
    summary = Counter(c["verdict"] for c in out_cells)
    expected = sum(1 for c in out_cells if c["verdict"] == FAIL and c["expected_failure"])
    return {
        "schema": SCHEMA, "version": VERSION, "tier": tier, "device": device, "hypothesis_profile": hypothesis_profile,
        "exit_status": exit_status, "exit_meaning": outcome.MEANING.get(exit_status) if exit_status is not None else None,
        "interrupted": interrupted,
        "summary": {v: summary.get(v, 0) for v in (EXACT, ACCEPTABLE, FAIL, UNSUPPORTED)},
        "expected_failures": expected,  # fail cells that are all known findings this run expects
        "cells": out_cells,
        "information": [{"backend": r["backend"], "op": r["op"], "config": r["config"],
                         "relation": r["reason"] or "identical bytes"} for r in information],
        "backend_profiles": {b: {p: _differences(p) for p in sorted(ps)} for b, ps in sorted(backend_profiles.items())},
        "not_supported_here": dict(sorted(missing.items())),
        "results": [dict(r) for r in rows],
    }


def cell_label(cell: dict[str, Any]) -> str:
    """'exact', 'fail (known finding)', 'exact (3 of 4 configs judged)' ... as the matrix shows a
    cell: a cell some of whose configs were not run never reads as a bare verdict."""
    label = LABELS[cell["verdict"]]
    if cell["verdict"] == FAIL and cell["known_findings"]:
        expected = ", expected failure" if cell["expected_failure"] else ""
        label += f" (known finding{expected})"
    counts = cell["counts"]
    judged = counts[EXACT] + counts[ACCEPTABLE] + counts[FAIL]
    if judged and counts[UNSUPPORTED]:
        label += f" ({judged} of {judged + counts[UNSUPPORTED]} configs judged)"
    return label


def profile_note(name: str, diffs: dict[str, list[Any]] | None) -> str:
    if diffs is None:
        return f"{name} (not a profile of mxgate.oracle.profiles)"
    if not diffs:
        return f"{name} (= gfx950)"
    return f"{name} (vs gfx950: " + ", ".join(f"{k} {a!r} not {b!r}" for k, (a, b) in diffs.items()) + ")"


def _counts(cell: dict[str, Any]) -> str:
    return ", ".join(f"{LABELS[v]} {n}" for v, n in cell["counts"].items() if n)


def _failure_line(f: dict[str, Any]) -> str:
    at = f" first mismatch {tuple(f['first_mismatch'])}" if f["first_mismatch"] is not None else ""
    seed = f" seed {f['seed']}" if f["seed"] is not None else ""
    return f"{f['config']}:{seed}{at} {f['reason']}"


def summary_line(m: dict[str, Any]) -> str:
    s = m["summary"]
    total = sum(s.values())
    expected = m.get("expected_failures", 0)
    fails = f"fail {s[FAIL] - expected}" + (f", expected failure (known finding) {expected}" if expected else "")
    text = (f"mxgate: {total} cells: exact {s[EXACT]}, acceptable {s[ACCEPTABLE]}, {fails}, "
            f"not supported here {s[UNSUPPORTED]}; {len(m['not_supported_here'])} backend(s) not supported here")
    if m.get("interrupted"):
        text += f"; INTERRUPTED by {m['interrupted']}: partial"
    if m["exit_status"] is not None:
        text += f"; exit status {m['exit_status']} ({m['exit_meaning']})"
    return text


def text_lines(m: dict[str, Any]) -> list[str]:
    lines = [f"tier {m['tier']}, device {m['device']}, hypothesis profile {m['hypothesis_profile']}"]
    if m.get("interrupted"):
        lines.append(f"INTERRUPTED by {m['interrupted']}: the run was cut short, this matrix is partial")
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for c in m["cells"]:
        by_backend.setdefault(c["backend"], []).append(c)
    width = max([34] + [len(c["op"]) + 1 for c in m["cells"]])
    if by_backend:
        lines += ["", f"  {'op':<{width}} {'verdict':<30} {'configs by verdict':<28} profile"]
    for backend, cells in by_backend.items():
        lines.append("")
        lines.append(backend)
        for c in cells:
            profiles = ", ".join(c["profiles"])
            lines.append(f"  {c['op']:<{width}} {cell_label(c):<30} {_counts(c):<28} {profiles}".rstrip())
            for reason, n in c["acceptable_reasons"].items():
                lines.append(f"      acceptable x{n}: {reason}")
            for reason, n in c["unsupported_reasons"].items():
                lines.append(f"      not supported here x{n}: {reason}")
        notes = m["backend_profiles"].get(backend, {})
        if notes:
            lines.append("  profiles judged under (information, not verdicts):")
            lines += [f"    {profile_note(name, diffs)}" for name, diffs in notes.items()]
        related = [i for i in m.get("information", []) if i["backend"] == backend]
        if related:
            lines.append("  relations to other profiles (information, not verdicts):")
            lines += [f"    {i['op']} {i['config']}: {i['relation']}" for i in related]
    if m["not_supported_here"]:
        lines += ["", "not supported here (nothing of these backends ran):"]
        for backend, reason in m["not_supported_here"].items():
            lines.append(f"  {backend}: {reason}")
    failing = [c for c in m["cells"] if c["verdict"] == FAIL]
    for title, group in (("FAILURES", [c for c in failing if not c["expected_failure"]]),
                         ("EXPECTED FAILURES (known findings this run was asked to expect)",
                          [c for c in failing if c["expected_failure"]])):
        if not group:
            continue
        total = sum(c["failures_total"] for c in group)
        lines += ["", f"{title}: {total} failing config(s) in {len(group)} cell(s)"]
        for c in group:
            lines.append(f"  FAIL {c['backend']} {c['op']}" + (f" [{', '.join(c['profiles'])}]" if c["profiles"] else ""))
            for finding in c["known_findings"]:
                lines.append(f"    known finding: {finding}")
            for f in c["failures"]:
                lines.append(f"    {_failure_line(f)}")
            if c["failures_total"] > len(c["failures"]):
                lines.append(f"    ... and {c['failures_total'] - len(c['failures'])} more (all in the JSON report)")
    lines += ["", summary_line(m)]
    return lines


def to_json(m: dict[str, Any]) -> str:
    return json.dumps(m, sort_keys=True, indent=1) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(m: dict[str, Any]) -> str:
    out = ["# mxgate conformance matrix", "",
           f"Tier `{m['tier']}`, device `{m['device']}`, Hypothesis profile `{m['hypothesis_profile']}`.", ""]
    if m.get("interrupted"):
        out += [f"**Interrupted by {m['interrupted']}: the run was cut short, this matrix is partial.**", ""]
    out += [
           "| backend | op | verdict | counts | profile |", "|---|---|---|---|---|"]
    for c in m["cells"]:
        out.append(f"| {_md(c['backend'])} | {_md(c['op'])} | {_md(cell_label(c))} | {_md(_counts(c))} | "
                   f"{_md(', '.join(c['profiles']))} |")
    if m.get("information"):
        out += ["", "## Relations to other profiles (information, not verdicts)", ""]
        out += [f"- {_md(i['backend'])} `{_md(i['op'])}` {_md(i['config'])}: {_md(i['relation'])}" for i in m["information"]]
    if m["backend_profiles"]:
        out += ["", "## Profiles (differences from gfx950)", ""]
        for backend, notes in m["backend_profiles"].items():
            for name, diffs in notes.items():
                out.append(f"- {_md(backend)}: {_md(profile_note(name, diffs))}")
    if m["not_supported_here"]:
        out += ["", "## Not supported here", ""]
        for backend, reason in m["not_supported_here"].items():
            out.append(f"- {_md(backend)}: {_md(reason)}")
    details = [c for c in m["cells"] if c["acceptable_reasons"] or c["failures"]]
    if details:
        out += ["", "## Details", ""]
        for c in details:
            for reason, n in c["acceptable_reasons"].items():
                out.append(f"- {_md(c['backend'])} `{_md(c['op'])}` acceptable x{n}: {_md(reason)}")
            for finding in c["known_findings"]:
                out.append(f"- {_md(c['backend'])} `{_md(c['op'])}` known finding: {_md(finding)}")
            for f in c["failures"]:
                out.append(f"- {_md(c['backend'])} `{_md(c['op'])}` **fail** {_md(_failure_line(f))}")
    out += ["", _md(summary_line(m))]
    return "\n".join(out) + "\n"
