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


class _Part:
    """The units of one compared array (the buffer, or the scales argument)."""

    def __init__(self, table: Table, frame: Frame, ctx: Context, source: str) -> None:
        self.t, self.frame, self.ctx, self.source = table, frame, ctx, source
        self.kinds = [f.kind for f in frame.fields]


class Rows(Sequence):
    """Sequence of row dicts, one per differing unit: the buffer's in buffer order (offset, low
    nibble first), then those of the scales argument (``source`` "scales") in its order."""

    def __init__(self, parts: list[tuple[Table, Frame, Context]]) -> None:
        self._parts = [_Part(t, fr, ctx, "buffer" if i == 0 else "scales")
                       for i, (t, fr, ctx) in enumerate(parts)]
        self._starts = np.cumsum([0] + [len(p.t) for p in self._parts])
        self._names = oracle.profiles.names()

    def __len__(self) -> int:
        return int(self._starts[-1])

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

    def _locate(self, i: int) -> tuple[_Part, int]:
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return self._parts[k], i - int(self._starts[k])

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The raw columns: offset, nibble, field, row, col, expected, actual, class (index
        into COUNT_KEYS), verified, expected_scale, actual_scale, input, x_over_scale, and
        in_scales (the unit is a byte of the scales argument: offset, field, row and col are
        then in that array's terms)."""
        def cat(get) -> np.ndarray:
            return np.concatenate([np.asarray(get(p.t)) for p in self._parts])

        out = {"offset": cat(lambda t: t.offset), "nibble": cat(lambda t: t.nibble),
               "field": cat(lambda t: t.field), "row": cat(lambda t: t.row),
               "col": cat(lambda t: t.col), "expected": cat(lambda t: t.exp),
               "actual": cat(lambda t: t.act), "class": cat(lambda t: t.cls),
               "verified": cat(lambda t: t.verified), "expected_scale": cat(lambda t: t.se),
               "actual_scale": cat(lambda t: t.sa), "input": cat(lambda t: t.x),
               "x_over_scale": cat(lambda t: t.xs)}
        out["in_scales"] = np.concatenate([np.full(len(p.t), k > 0) for k, p in enumerate(self._parts)])
        return out

    def of_class(self, name: str) -> np.ndarray:
        """Indices of the rows of class ``name``."""
        if name not in COUNT_KEYS:
            raise ValueError(f"class must be one of {', '.join(COUNT_KEYS)}; got {name!r}")
        code = COUNT_KEYS.index(name)
        return np.concatenate([np.flatnonzero(p.t.cls == code) + int(start)
                               for p, start in zip(self._parts, self._starts)])

    def coords(self, i: int) -> dict[str, int]:
        part, j = self._locate(i)
        return self._coords(part, j)

    @staticmethod
    def _coords(part: _Part, i: int) -> dict[str, int]:
        t, fr = part.t, part.frame
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

    def _row(self, k: int) -> dict[str, object]:
        part, i = self._locate(k)
        t, fr, prof = part.t, part.frame, part.ctx.profile
        fid = int(t.field[i])
        kind = part.kinds[fid] if fid >= 0 else ""
        se = int(t.se[i]) if t.se[i] >= 0 else None
        sa = int(t.sa[i]) if t.sa[i] >= 0 else None
        nib = int(t.nibble[i])
        row: dict[str, object] = {
            "source": part.source,
            "offset": int(t.offset[i]),
            "index": [int(v) for v in np.unravel_index(int(t.offset[i]), fr.shape)],
            "nibble": None if nib < 0 else ("low" if nib == 0 else "high"),
            "field": fr.fields[fid].name if fid >= 0 else None,
            "region": layouts.REGION_NAMES.get(int(t.region[i]), "unwritten"),
            "coords": self._coords(part, i),
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
