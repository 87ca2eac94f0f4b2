"""Mismatch classifier: name the root cause of every differing nibble between an expected
and an actual buffer (sign of zero, tie direction, scale off by one, saturation, NaN/Inf
rule, nibble swap, layout permutation, untouched bytes, index overflow, unexplained).

    from mxgate.explain import explain
    report = explain(expected, actual, layout="aiter-fp4-kv", profile="gfx950", input=k)
    report.counts        # {class name: differing units}
    report.rows[0]       # coordinates, both codes decoded, class, detail
    print(report.summary())
    report.to_json(); report.plot("mismatch.png")

The modules, in the order the work flows: ``inputs`` (the arguments read and checked against
the layout), ``rules`` (the classes and the rule for each), ``classify`` (every differing unit
gets one class; profiles re-derived from the input), ``report`` (counts, rows, JSON and text),
``plot`` (the heat map), ``io`` (arrays from files, for the command line).
"""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.explain.classify import Classifier, classify_scale_argument, match_profiles
from mxgate.explain.inputs import build_context, build_frame
from mxgate.explain.report import Report
from mxgate.explain.rules import COUNT_KEYS, DEFINITIONS, PRECEDENCE

CLASSES = COUNT_KEYS

__all__ = ["CLASSES", "COUNT_KEYS", "DEFINITIONS", "PRECEDENCE", "Report", "explain"]


def explain(
    expected: np.ndarray,
    actual: np.ndarray,
    layout: str,
    profile: str = "gfx950",
    input: np.ndarray | None = None,  # noqa: A002 - the documented keyword (docs/explain.md)
    scales: object = None,
    *,
    slots: np.ndarray | None = None,
    dims: dict[str, int] | None = None,
    profiles: list[str] | None = None,
) -> Report:
    """Classify every differing unit of ``actual`` against ``expected``.

    expected, actual: uint8 buffers of one layout (``layouts.get(layout).buffer_shape``), or
        for layout "packed-row" also the plain form [rows, N/2] of packed E2M1 codes.
    profile: the profile the expected bytes follow (scale decoding, re-quantization, ties).
    input: the float32/bf16 values the quantizer saw, in the layout's logical shape
        ([rows, N] plain, [T, H, D] q, [slots, D] caches; [n, D] with ``slots``, one row
        per slot entry). Any other shape, or one covering no row, is a ValueError.
    scales: e8m0 bytes of the FP4 data ([rows, N/32] logical, or the layout's companion scale
        buffer, or int32 words for packed rows): one array for both sides, or a pair
        (expected_scales, actual_scales). Layouts that carry scales in the buffer take none.
        A pair is compared too: every differing e8m0 byte is a unit of the report (field
        "scales"), classified like the e8m0 bytes of a buffer.
    slots: the slot mapping the kernel ran with; bytes of other slots must be untouched.
    dims: layout dims the buffer shape does not fix (e.g. num_heads of aiter-fp4-q-scale).
    profiles: profiles to re-derive from the input (default: all registered); unknown names,
        an empty list or profiles without input are a ValueError.
    """
    names = _profile_names(profiles, input)
    frame = build_frame(expected, actual, layout, dims)
    ctx = build_context(frame, profile, scales, input, slots)
    table = Classifier(frame, ctx).run()
    scale_part = classify_scale_argument(frame, ctx)
    matches = match_profiles(frame, ctx, names) if ctx.has_input else None
    return Report(frame, ctx, table, matches, scale_part)


def _profile_names(profiles: object, x: object) -> list[str] | None:
    """The profiles to re-derive, validated: each a registered name, at least one, and only
    with an input to re-derive from (silently ignored names would read as a verdict)."""
    if profiles is None:
        return None
    if isinstance(profiles, (str, bytes)) or not isinstance(profiles, (list, tuple)):
        raise TypeError(f"profiles must be a list of profile names, got {type(profiles).__name__}")
    known = oracle.profiles.names()
    bad = [p for p in profiles if not isinstance(p, str) or p not in known]
    if bad:
        raise ValueError(f"profiles: unknown profile {bad[0]!r}; valid names: {', '.join(known)}")
    if not profiles:
        raise ValueError(f"profiles: give at least one profile name ({', '.join(known)})")
    if x is None:
        raise ValueError("profiles: re-deriving profiles needs the input (input=...)")
    return list(dict.fromkeys(profiles))  # each once, in the order given
