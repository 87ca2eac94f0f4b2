"""What identify found, as text, as a JSON evidence document, and as a ready-to-paste
``profiles.register(dataclasses.replace(...))`` call."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from mxgate.identify.drivers import Driver, case_bits, show_unit
from mxgate.identify.run import DIFFERS, FAULT, INCONSISTENT, MATCH, UNEXPLAINED, IdentifyResult, OpIdentity
from mxgate.identify.search import VARIANT, Evidence, Inference, SideFinding
from mxgate.identify.shrink import Shrunk
from mxgate.identify.probes import SEED
from mxgate.identify.scorers import TOPK
from mxgate.oracle import unverified

SHOWN_MATCHES = 6


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "kernel"


def profile_name(result: IdentifyResult, op: OpIdentity) -> str:
    """The name the register call gives the inferred profile: the backend's, with the op's when
    several of its ops need a profile of their own."""
    own = [o for o in result.ops if o.inference is not None and o.status in (DIFFERS, UNEXPLAINED)]
    base = slug(result.backend)
    return base if len(own) <= 1 else f"{base}-{slug(op.op)}"


def register_call(name: str, inference: Inference) -> str:
    changes = "".join(f", {f}={value!r}" for f, (value, _) in inference.differs.items())
    return f"profiles.register(dataclasses.replace(profiles.get({inference.nearest!r}), name={name!r}{changes}))"


def _value(x: np.ndarray) -> str:
    """One element of a case: its bit pattern and value."""
    if x.dtype == np.uint16:
        v = float((x.astype(np.uint32) << np.uint32(16)).view(np.float32))
        return f"0x{int(x):04x} ({v:.9g})"
    if x.dtype == np.float32:
        return f"0x{int(x.view(np.uint32)):08x} ({float(x):.9g})"
    return f"0x{int(x):02x}"


def describe_input(cases: np.ndarray, case: int, unit: int) -> str:
    """The input behind one unit: the element, or the block and the element the unit encodes."""
    row = np.asarray(cases[case])
    if row.ndim == 0:
        return f"x = {_value(row)}"
    flat = row.reshape(-1)
    if flat.dtype == np.uint8:  # bytes of a layout's slot
        return f"byte {unit} = {_value(flat[unit])} of a slot's {flat.size} bytes" if unit < flat.size \
            else f"a slot's {flat.size} bytes"
    magnitudes = flat.view(np.uint32) & 0x7FFFFFFF if flat.dtype == np.float32 else flat & np.uint16(0x7FFF)
    amax = int(np.argmax(magnitudes))
    where = f"element {unit} = {_value(flat[unit])} in a block of {flat.size}" if unit < flat.size \
        else f"a block of {flat.size}"
    return f"{where} whose largest magnitude is {_value(flat[amax])}"


def _evidence_text(driver: Driver, cases: np.ndarray, e: Evidence) -> str:
    if e.side:
        return (f"{e.where} -> {e.unit_label} {show_unit(e.kind, e.backend)}; "
                f"with {e.field}={e.rejected!r} it would be {show_unit(e.kind, e.under_rejected)}")
    kind = driver.unit_kind(e.unit)
    return (f"{describe_input(cases, e.case, e.unit)} -> {driver.unit_name(e.unit)} {show_unit(kind, e.backend)}; "
            f"with {e.field}={e.rejected!r} it would be {show_unit(kind, e.under_rejected)}")


def op_lines(result: IdentifyResult, op: OpIdentity, index: int, total: int) -> list[str]:
    d = op.driver
    head = f"[{index}/{total}] {op.op} (declared {op.declared})"
    if op.status == INCONSISTENT:
        return [f"{head}: INCONSISTENT, matched to no profile: {op.cause}"]
    if op.status == FAULT:
        return [f"{head}: fault: {op.cause}"]
    inf = op.inference
    assert inf is not None and op.cases is not None
    n = op.cases.shape[0]
    refused = f", {op.refused} outside its contract" if op.refused else ""
    if op.scorer is not None:
        lines = [f"{head}: {len(op.scorer.calls)} probe call(s) ({'; '.join(op.scorer.calls)}), {n:,} "
                 f"{op.scorer.units}, every call made twice on fresh copies; {op.seconds:.1f} s"] + scorer_lines(op)
    else:
        lines = [f"{head}: {n:,} probe cases, every call made twice on fresh copies{refused}; {op.seconds:.1f} s"]
    if op.status == MATCH:
        shown = ", ".join(inf.matches[:SHOWN_MATCHES]) + (f" and {len(inf.matches) - SHOWN_MATCHES} more"
                                                          if len(inf.matches) > SHOWN_MATCHES else "")
        said = "declared profile among them" if op.declared in inf.matches else \
            f"not the declared {op.declared}"
        lines.append(f"  matches: {shown} ({said})")
        if not any(v.read for v in inf.fields.values()):
            what = ("bytes match the oracle" if op.scorer is None else "top-k sets are admissible"
                    if op.scorer.units == "rows" else "logits lie within the oracle's bound")
            lines.append(f"  reads no profile field; the backend's {what}: consistent")
    if inf.open_units:
        lines.append(f"  {open_text(inf)}")
    if op.status == UNEXPLAINED and inf.unexplained:
        lines.append(f"  unexplained: {inf.unexplained} unit(s) that no combination of field values explains "
                     f"(the closest profile leaves them)")
        if op.shrunk is not None:
            lines.append("  " + _shrunk_text(d, op.shrunk))
    if op.status in (DIFFERS, UNEXPLAINED):
        if inf.differs:
            lines.append(f"  nearest registered profile: {inf.nearest}; differs in:")
            for f, (value, theirs) in inf.differs.items():
                lines.append(f"    {f} = {value!r} ({inf.nearest}: {theirs!r})")
                proof = next((e for e in inf.fields[f].evidence if e.rejected == theirs), None)
                if proof is not None:
                    lines.append(f"      evidence: {_evidence_text(d, op.cases, proof)}")
        else:
            lines.append(f"  nearest registered profile: {inf.nearest}, equal in every field identify decides")
        left = inf.unexplained + inf.side_unexplained
        comment = f"  # explains all but {left} unit(s)" if op.status == UNEXPLAINED else ""
        lines.append(f"  register: {register_call(profile_name(result, op), inf)}{comment}")
    for finding in inf.sides:
        lines += side_lines(finding)
    decided = [f"{f}={v.value!r}" for f, v in inf.fields.items() if v.decided]
    if decided:
        lines.append(f"  decided: {', '.join(decided)}")
    open_fields = [v for v in inf.fields.values() if v.read and not v.decided]
    for v in open_fields:
        why = ("only element codes of 0xFF-scale blocks separate them, and SPEC 3 leaves those open"
               if v.opened else "no probe separates them on this op")
        lines.append(f"  undecided: {v.field}: {' or '.join(repr(c) for c in v.consistent)} ({why})")
    refused = {a for f in inf.sides if f.cause for a in f.probe.axes + f.probe.derived}  # said in their line
    unread = [v.field for v in inf.fields.values() if v.declared and not v.read and v.field not in refused]
    if unread:
        lines.append(f"  no probe can decide: {', '.join(unread)} (the op's output does not depend on them "
                     f"here, given the other fields)")
    extra = [v.field for v in inf.fields.values() if v.read and not v.declared]
    if extra:
        lines.append(f"  also read, though the op table does not list them for {op.op}: {', '.join(extra)}")
    return lines


def open_text(inf: Inference) -> str:
    return (f"{inf.open_units} element unit(s) of 0xFF-scale blocks differ: SPEC 3 leaves them open "
            f"(the gate rates this acceptable)")


def scorer_lines(op: OpIdentity) -> list[str]:
    """A scorer op: which fields its oracle reads, how exact the backend is, its first cell
    outside the bound of every candidate."""
    f, fields = op.scorer, tuple(op.inference.fields) if op.inference else ()
    assert f is not None
    reads = (f"  the oracle's scorer reads {', '.join(fields)} of the profile (the op table's other fields shape "
             f"its inputs, not its logits)") if fields else "  the oracle's scorer reads no profile field"
    if f.units == "rows":
        found = (f"  under the profile found: {f.exact:,} of {f.cells:,} rows the oracle's own top-{TOPK} set, "
                 f"{f.within:,} others near-tie swaps within the bound" + (" (exact)" if f.exact == f.cells else ""))
    else:
        found = (f"  under the profile found: {f.exact:,} of {f.cells:,} window cells bit-equal to the emulated "
                 f"order, {f.within:,} others within the bound" + (" (exact)" if f.exact == f.cells else ""))
    lines = [reads, found]
    if f.first_text:
        what = "row no candidate explains" if f.units == "rows" else "cell outside the bound under every candidate"
        lines.append(f"  first {what}: {f.first_text}")
    return lines


def side_lines(f: SideFinding) -> list[str]:
    """A side probe: what it ran, what explains its bytes, what it could not decide."""
    axes = ", ".join(f.probe.axes + f.probe.derived)
    if f.cause:
        return [f"  {f.probe.title}: not run ({f.cause}); not decided by these probes: {axes}"]
    head = f"  {f.probe.title}: {f.rows:,} rows in {f.calls} call(s)"
    lines = []
    if f.unexplained:
        call, row, unit = f.first_unexplained  # type: ignore[misc]
        where, label, kind, _ = f.probe.label(call, row, unit)
        lines.append(f"{head}; unexplained: {f.unexplained} unit(s) that no value of {axes} explains under "
                     f"the profile above; first: {where} -> {label} {show_unit(kind, f.first_backend)}, the "
                     f"closest gives {show_unit(kind, f.first_expected)}")
    elif VARIANT in f.probe.axes:
        if f.default_member in f.explaining:
            default = "the default member, rsqrtf correctly rounded" if len(f.explaining) == 1 else \
                f"the default member {f.default_member} among them"
        else:
            default = (f"not the default member {f.default_member}: rsqrtf is not correctly rounded; the gate "
                       f"judges such rows acceptable, not exact")
        lines.append(f"{head}; explained by envelope member(s) {', '.join(f.explaining)} ({default})")
    else:
        lines.append(f"{head}; every unit explained")
    open_axes = [a for a, d in f.axes.items() if not d.decided]
    if VARIANT in f.axes and not f.axes[VARIANT].decided:
        members = " or ".join(map(str, f.axes[VARIANT].consistent))
        lines.append(f"    envelope members these probes cannot tell apart: {members}")
    open_axes += [a for a, d in f.fields.items() if a in f.probe.derived and not d.decided]
    if open_axes:
        lines.append(f"    not decided by these probes: {', '.join(dict.fromkeys(open_axes))}")
    return lines


def _shrunk_text(d: Driver, s: Shrunk) -> str:
    kind = d.unit_kind(s.unit)
    if s.cases.ndim == 1 and s.cases.shape[0] <= 8:
        size = f"{s.cases.shape[0]} element(s) [{', '.join(case_bits(s.cases, i)[0] for i in range(s.cases.shape[0]))}]"
    else:
        size = f"{s.cases.shape[0]} {'element(s)' if s.cases.ndim == 1 else 'block(s)'}"
    return (f"first case, shrunk to an input of {size} ({s.calls} backend calls): at "
            f"{describe_input(s.cases, s.case, s.unit)} -> {d.unit_name(s.unit)} {show_unit(kind, s.backend)}, "
            f"the closest profile gives {show_unit(kind, s.expected)}")


def text(result: IdentifyResult) -> list[str]:
    lines = []
    for i, op in enumerate(result.ops, start=1):
        lines += op_lines(result, op, i, len(result.ops))
    if result.not_probed:
        lines.append(f"not probed by identify (no probes for these ops yet): {', '.join(result.not_probed)}")
    for op, why in result.not_run:
        lines.append(f"not run here: {op}: {why}" if op != "*" else f"not available here: {why}")
    return lines


# ---- JSON evidence ----------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def _evidence_json(driver: Driver, cases: np.ndarray, e: Evidence) -> dict[str, Any]:
    if e.side:
        return {"rejects": _jsonable(e.rejected), "probe": e.side, "call": e.call, "row": e.case,
                "input": list(e.bits), "input_described": e.where, "unit": e.unit_label,
                "output": show_unit(e.kind, e.backend).split()[0],
                "output_if_rejected": show_unit(e.kind, e.under_rejected).split()[0]}
    kind = driver.unit_kind(e.unit)
    return {"rejects": _jsonable(e.rejected), "input": case_bits(cases, e.case), "unit": driver.unit_name(e.unit),
            "output": show_unit(kind, e.backend).split()[0],
            "output_if_rejected": show_unit(kind, e.under_rejected).split()[0]}


def op_json(result: IdentifyResult, op: OpIdentity) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op.op, "declared_profile": op.declared, "status": op.status,
                           "seconds": round(op.seconds, 3)}
    if op.cause:
        out["cause"] = op.cause
    inf = op.inference
    if inf is None or op.cases is None:
        return out
    d = op.driver
    if op.scorer is not None:
        out["scorer"] = {"calls": op.scorer.calls, "window_cells": op.scorer.cells, "bit_equal": op.scorer.exact,
                         "within_bound": op.scorer.within, "first_unexplained": op.scorer.first_text or None}
    out.update({
        "probe_cases": int(op.cases.shape[0]), "calls_per_probe_set": 2, "outside_contract": op.refused,
        "matches": inf.matches, "nearest": inf.nearest,
        "differs": {f: {"inferred": _jsonable(a), "nearest": _jsonable(b)} for f, (a, b) in inf.differs.items()},
        "fields": {
            f: {"value": _jsonable(v.value), "decided": v.decided, "read": v.read, "declared": v.declared,
                "consistent": [_jsonable(c) for c in v.consistent],
                "left_open": [_jsonable(c) for c in v.opened],
                "evidence": [_evidence_json(d, op.cases, e) for e in v.evidence]}
            for f, v in inf.fields.items() if v.read or v.declared},
    })
    if inf.open_units:
        out["open"] = {"units": inf.open_units, "said": open_text(inf), "why": unverified.SCALE_255_REASON}
    if inf.sides:
        out["side_probes"] = [_side_json(d, op.cases, f) for f in inf.sides]
    if op.status in (DIFFERS, UNEXPLAINED):
        out["register"] = register_call(profile_name(result, op), inf)
    if op.status == UNEXPLAINED:
        out["unexplained"] = {"units": inf.unexplained}
        if op.shrunk is not None:
            s, kind = op.shrunk, d.unit_kind(op.shrunk.unit)
            out["unexplained"]["shrunk"] = {
                "input": [case_bits(s.cases, i) for i in range(s.cases.shape[0])], "case": s.case,
                "unit": d.unit_name(s.unit), "output": show_unit(kind, s.backend).split()[0],
                "expected_closest": show_unit(kind, s.expected).split()[0], "backend_calls": s.calls}
    return out


def _side_json(d: Driver, cases: np.ndarray, f: SideFinding) -> dict[str, Any]:
    out: dict[str, Any] = {"probe": f.probe.name, "title": f.probe.title, "axes": list(f.probe.axes)}
    if f.cause:
        out.update({"status": "not run", "cause": f.cause,
                    "not_decided": list(f.probe.axes + f.probe.derived)})
        return out
    out.update({"status": "unexplained" if f.unexplained else "explained", "rows": f.rows, "units": f.units,
                "unexplained_units": f.unexplained, "best": {a: _jsonable(v) for a, v in f.best.items()},
                "decisions": {a: {"value": _jsonable(v.value), "decided": v.decided, "read": v.read,
                                  "consistent": [_jsonable(c) for c in v.consistent],
                                  "evidence": [_evidence_json(d, cases, e) for e in v.evidence]}
                              for a, v in f.axes.items()},
                "not_decided": [a for a, v in {**f.axes, **f.fields}.items() if not v.decided]})
    if VARIANT in f.probe.axes:
        out.update({"explaining_members": list(f.explaining), "default_member": f.default_member})
    if f.first_unexplained is not None:
        call, row, unit = f.first_unexplained
        where, label, kind, bits = f.probe.label(call, row, unit)
        out["first_unexplained"] = {"call": call, "row": row, "input": bits, "input_described": where,
                                    "unit": label, "output": show_unit(kind, f.first_backend).split()[0],
                                    "expected_closest": show_unit(kind, f.first_expected).split()[0]}
    return out


def evidence(result: IdentifyResult) -> dict[str, Any]:
    return {"backend": result.backend, "description": result.description, "revision": result.revision,
            "device": result.device, "seed": SEED, "status": result.status, "load_fault": result.load_fault or None,
            "ops": [op_json(result, op) for op in result.ops],
            "not_run": [{"op": op, "why": why} for op, why in result.not_run], "not_probed": result.not_probed}


def evidence_text(result: IdentifyResult) -> str:
    return json.dumps(evidence(result), indent=1) + "\n"
