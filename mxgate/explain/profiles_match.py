"""With the input given: re-derive the codes under every profile and count, per profile, how
many nibbles (and e8m0 bytes) differ from the actual and from the expected buffer."""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.explain.context import Context
from mxgate.explain.frame import FP4, GROUP, Frame

_ROWS_PER_CHUNK = 4096


def _nibble_mismatches(a: np.ndarray, b: np.ndarray) -> int:
    x = a ^ b
    return int(np.count_nonzero(x & 0x0F) + np.count_nonzero(x & 0xF0))


def match_profiles(frame: Frame, ctx: Context, profiles: list[str] | None = None) -> dict[str, object]:
    """{'profiles': {name: {'actual': {...}, 'expected': {...}}}, 'matching': [...],
    'expected_matching': [...], 'compared': {...}}. A profile matches a side when its codes
    and (where that side's scales are known) its e8m0 bytes equal that side's everywhere the
    input covers."""
    names = list(profiles) if profiles is not None else oracle.profiles.names()
    f = frame.fields[ctx.ref_index]
    covered = np.flatnonzero(ctx.row_to_input >= 0)
    tally = {n: {"actual": {"codes": 0, "scales": 0}, "expected": {"codes": 0, "scales": 0}}
             for n in names}
    sides = (("actual", frame.actual, ctx.act_scales), ("expected", frame.expected, ctx.exp_scales))
    compared = 0
    for start in range(0, covered.size, _ROWS_PER_CHUNK):
        rows = covered[start:start + _ROWS_PER_CHUNK]
        x = ctx.x[ctx.row_to_input[rows]]
        if f.kind == FP4:
            cols = np.arange(0, f.extents[-1], 2)[None, :]
            off = frame.offsets(ctx.ref_index, rows[:, None], cols)
            compared += x.size
            for name in names:
                packed, scales = oracle.quantize_mx(x, name, GROUP)
                for side, buf, side_scales in sides:
                    tally[name][side]["codes"] += _nibble_mismatches(packed, buf[off])
                    if side_scales is not None:
                        tally[name][side]["scales"] += int(np.count_nonzero(scales != side_scales[rows]))
        else:  # a scale layout: compare the e8m0 bytes
            groups = np.arange(ctx.groups)[None, :]
            off = frame.offsets(ctx.ref_index, rows[:, None], groups)
            compared += off.size
            for name in names:
                _, scales = oracle.quantize_mx(x, name, GROUP)
                for side, buf, _ in sides:
                    tally[name][side]["codes"] += int(np.count_nonzero(scales != buf[off]))
    unit = "nibbles" if f.kind == FP4 else "scale bytes"
    for name in names:
        for side, _, side_scales in sides:
            entry = tally[name][side]
            if f.kind != FP4 or side_scales is None:
                entry["scales"] = None
    matching = {side: [n for n in names if tally[n][side]["codes"] == 0
                       and not tally[n][side]["scales"]] for side, _, _ in sides}
    return {"profiles": tally, "matching": matching["actual"],
            "expected_matching": matching["expected"],
            "compared": {unit: compared, "rows": int(covered.size)}}
