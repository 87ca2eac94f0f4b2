"""Per-unit rows of a report: columns kept as arrays, one dict built per row on demand
(a 64 MB buffer can have millions of rows; building them all as dicts would dominate)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np

from mxgate import oracle
from mxgate.explain import codes
from mxgate.explain.classes import COUNT_KEYS
from mxgate.explain.table import Table
from mxgate.explain.context import Context
from mxgate.explain.detail import detail
from mxgate.explain.frame import E8M0, E8M0_WORD, F32_SCALE, FP4, FP8, GROUP, Frame
from mxgate.oracle import layouts


def _profile_list(bits: int, names: list[str]) -> list[str]:
    return [n for i, n in enumerate(names) if bits >> i & 1]


def decode_side(kind: str, code: int, scale: int | None,
                profile: oracle.profiles.Profile) -> dict[str, object]:
    """One side of a row: the code and its fields decoded under the field's format."""
    out: dict[str, object] = {"code": int(code)}
    if kind == FP4:
        s, e, m, v = codes.e2m1_fields(np.array([code]))
        out |= {"hex": f"0x{code:X}", "format": "e2m1", "sign": int(s[0]), "exponent": int(e[0]),
                "mantissa": int(m[0]), "value": float(v[0])}
        if scale is not None and scale >= 0:
            factor = float(oracle.decode_e8m0(np.array([scale], np.uint8), profile)[0])
            out |= {"scale": int(scale), "scaled": float(v[0]) * factor}
    elif kind == FP8:
        s, e, m, v = codes.e4m3_fields(np.array([code]), profile.fp8_variant)
        out |= {"hex": f"0x{code:02X}", "format": f"e4m3{profile.fp8_variant}", "sign": int(s[0]),
                "exponent": int(e[0]), "mantissa": int(m[0]), "value": float(v[0])}
    elif kind in (E8M0, E8M0_WORD):
        _, e, _, v = codes.e8m0_fields(np.array([code]), profile)
        out |= {"hex": f"0x{code:02X}", "format": "e8m0", "sign": None, "exponent": int(e[0]),
                "mantissa": None, "value": float(v[0])}
    else:
        out |= {"hex": f"0x{code:02X}", "format": "byte", "sign": None, "exponent": None,
                "mantissa": None, "value": int(code)}
    return out


class Rows(Sequence):
    """Sequence of row dicts, one per differing unit, in buffer order (offset, low nibble first)."""

    def __init__(self, table: Table, frame: Frame, ctx: Context) -> None:
        self._t = table
        self._frame = frame
        self._ctx = ctx
        self._names = oracle.profiles.names()
        self._kinds = [f.kind for f in frame.fields]

    def __len__(self) -> int:
        return len(self._t)

    @overload
    def __getitem__(self, i: int) -> dict[str, object]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, object]]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row index {i} out of range for {n} rows")
        return self._row(i % n)

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The raw columns: offset, nibble, field, row, col, expected, actual, class (index
        into COUNT_KEYS), verified, expected_scale, actual_scale, input, x_over_scale."""
        t = self._t
        return {"offset": t.offset, "nibble": t.nibble, "field": t.field, "row": t.row,
                "col": t.col, "expected": t.exp, "actual": t.act, "class": t.cls,
                "verified": t.verified, "expected_scale": t.se, "actual_scale": t.sa,
                "input": t.x, "x_over_scale": t.xs}

    def of_class(self, name: str) -> np.ndarray:
        """Indices of the rows of class ``name``."""
        if name not in COUNT_KEYS:
            raise ValueError(f"class must be one of {', '.join(COUNT_KEYS)}; got {name!r}")
        return np.flatnonzero(self._t.cls == COUNT_KEYS.index(name))

    def coords(self, i: int) -> dict[str, int]:
        t, fr = self._t, self._frame
        fid = int(t.field[i])
        if fid < 0:
            return {}
        f = fr.fields[fid]
        out = {a: t.coord(i, j) for j, a in enumerate(f.axes)}
        if f.kind == FP4:
            out[f.axes[-1]] = int(t.col[i])
            out["group"] = int(t.col[i]) // GROUP
        elif f.kind == FP8:
            out["group"] = int(t.col[i]) // GROUP
        elif f.kind == E8M0_WORD:
            out["group"] = int(t.col[i])
        return out

    def _row(self, i: int) -> dict[str, object]:
        t, fr, prof = self._t, self._frame, self._ctx.profile
        fid = int(t.field[i])
        kind = self._kinds[fid] if fid >= 0 else ""
        se = int(t.se[i]) if t.se[i] >= 0 else None
        sa = int(t.sa[i]) if t.sa[i] >= 0 else None
        nib = int(t.nibble[i])
        row: dict[str, object] = {
            "offset": int(t.offset[i]),
            "index": [int(v) for v in np.unravel_index(int(t.offset[i]), fr.shape)],
            "nibble": None if nib < 0 else ("low" if nib == 0 else "high"),
            "field": fr.fields[fid].name if fid >= 0 else None,
            "region": layouts.REGION_NAMES.get(int(t.region[i]), "unwritten"),
            "coords": self.coords(i),
            "expected": decode_side(kind, int(t.exp[i]), se, prof),
            "actual": decode_side(kind, int(t.act[i]), sa, prof),
            "class": COUNT_KEYS[int(t.cls[i])],
            "verified": bool(t.verified[i]),
        }
        if t.has_x[i]:
            row["input"] = float(t.x[i])
            row["x_over_scale"] = float(t.xs[i])
        if t.has_x[i] or t.exp_profiles[i] or t.act_profiles[i]:
            row["expected_profiles"] = _profile_list(int(t.exp_profiles[i]), self._names)
            row["actual_profiles"] = _profile_list(int(t.act_profiles[i]), self._names)
        if kind == F32_SCALE:  # a byte of a float32 word: show the words too
            start = int(t.offsets[t.byte[i]]) - int(t.col[i])
            for side, buf in (("expected", fr.expected), ("actual", fr.actual)):
                word = buf[start:start + 4].copy().view("<f4")[0]
                row[side] |= {"format": "f32le byte", "word_byte": int(t.col[i]),
                              "word": float(word)}
        row["detail"] = detail(t, i, kind, fr, prof)
        return row
