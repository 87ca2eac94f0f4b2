"""The structured answer of ``explain``: counts per class, rows, profile matches, and its
renderings: JSON (``to_json``), text (``summary``: counts, the first rows, a checkasm-style hex
grid) and the heat map (``plot``, in mxgate.explain.plot).

Rows are kept as column arrays, one dict built per row on demand (a 64 MB buffer can have
millions of rows; building them all as dicts would dominate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import overload

import numpy as np

from mxgate import oracle
from mxgate.explain.classify import ScalePart, Table, f32_words
from mxgate.explain.inputs import E8M0, E8M0_WORD, F32_SCALE, FP4, FP8, KINDS, Context, Frame, Located
from mxgate.explain.rules import (
    CODE,
    COUNT_KEYS,
    DEFINITIONS,
    PRECEDENCE,
    SCALE_BYTE,
    SCALE_INFERRED,
    UNTOUCHED_PAD,
    UNTOUCHED_SLOT,
    UNTOUCHED_UNOWNED,
    tie_rules,
)
from mxgate.oracle import layouts
from mxgate.oracle.formats.e2m1 import MAGNITUDES, VALUES
from mxgate.oracle.geometry import GROUP

_INPUT_CLASSES = ("nan_inf", "scale_off_by_one", "sign_of_zero", "saturation", "tie_direction")


class Report:
    """Mismatch report. ``counts`` has every class name (zeros included); ``rows`` one entry
    per differing unit; ``matching_profiles`` is None without input."""

    def __init__(self, frame: Frame, ctx: Context, table: Table,
                 matches: dict[str, object] | None, scale_part: ScalePart | None = None) -> None:
        self._frame, self._table = frame, table
        self._scale_part = scale_part
        hist = np.bincount(table.cls, minlength=len(COUNT_KEYS))
        if scale_part is not None:  # differing bytes of the scales argument are units too
            hist = hist + np.bincount(scale_part.table.cls, minlength=len(COUNT_KEYS))
        self.counts: dict[str, int] = {name: int(hist[CODE[name]]) for name in COUNT_KEYS}
        parts = [(table, frame, ctx)]
        if scale_part is not None:
            parts.append((scale_part.table, scale_part.frame, scale_part.ctx))
        self.rows = Rows(parts)
        # e8m0 bytes of the scales argument: compared (both sides given) and differing
        self.scale_bytes: int | None = None if scale_part is None else scale_part.frame.nbytes
        self.differing_scale_bytes = (0 if scale_part is None
                                      else scale_part.table.differing_bytes)
        self.layout = frame.name
        self.dims = dict(frame.dims)
        self.shape = tuple(frame.shape)
        self.nbytes = frame.nbytes
        self.profile = ctx.profile.name
        self.scale_source = ctx.scale_source
        self.has_input = ctx.has_input
        self.differing_bytes = table.differing_bytes
        self.compared_nibbles = sum(int(np.prod(f.extents)) for f in frame.fields if f.kind == FP4)
        self.differing_nibbles = int(np.count_nonzero(table.nibble >= 0))
        self.permutation_layout = table.permutation_layout
        # only 4-bit codes can be checked against an input: count those decided without one
        checked = np.isin(table.cls, [CODE[c] for c in _INPUT_CLASSES])
        checked &= table.kind == KINDS.index(FP4)
        self.unverified = int(np.count_nonzero(checked & ~table.verified))
        self.matching_profiles: list[str] | None = None
        self.expected_matching_profiles: list[str] | None = None
        self.profile_mismatches: dict[str, dict] | None = None
        self.compared_by_input: dict[str, int] | None = None
        if matches is not None:
            self.matching_profiles = list(matches["matching"])
            self.expected_matching_profiles = list(matches["expected_matching"])
            self.profile_mismatches = matches["profiles"]  # type: ignore[assignment]
            self.compared_by_input = matches["compared"]  # type: ignore[assignment]

    # ---- queries ---------------------------------------------------------------------------

    @property
    def equal(self) -> bool:
        """No byte differs: neither in the buffers nor in the scales given for both sides."""
        return self.differing_bytes == 0 and self.differing_scale_bytes == 0

    @property
    def total(self) -> int:
        """Differing units (the sum of counts)."""
        return sum(self.counts.values())

    @property
    def dims_text(self) -> str:
        return self._frame.describe_dims()

    def __repr__(self) -> str:
        nonzero = ", ".join(f"{k}={v}" for k, v in self.counts.items() if v)
        return f"<Report {self.layout}: {self.total} differing units{': ' + nonzero if nonzero else ''}>"

    # ---- renderers -------------------------------------------------------------------------

    def summary(self, max_rows: int = 20, grid: bool = True) -> str:
        return _summary(self, max_rows=max_rows, grid=grid)

    def hex_grid(self, width: int = 16, lines: int = 8) -> str:
        return "\n".join(_hex_grid(self, width=width, lines=lines))

    def to_dict(self, max_rows: int | None = None) -> dict[str, object]:
        rows = self.rows if max_rows is None else self.rows[:max_rows]
        return {
            "layout": self.layout, "dims": self.dims, "shape": list(self.shape),
            "profile": self.profile, "bytes": self.nbytes,
            "differing_bytes": self.differing_bytes,
            "scale_bytes": self.scale_bytes, "differing_scale_bytes": self.differing_scale_bytes,
            "equal": self.equal,
            "nibbles": self.compared_nibbles, "differing_nibbles": self.differing_nibbles,
            "scale_source": self.scale_source, "input": self.has_input,
            "counts": dict(self.counts), "unverified": self.unverified,
            "precedence": list(PRECEDENCE), "definitions": dict(DEFINITIONS),
            "permutation_layout": self.permutation_layout,
            "matching_profiles": self.matching_profiles,
            "expected_matching_profiles": self.expected_matching_profiles,
            "profile_mismatches": self.profile_mismatches,
            "compared_by_input": self.compared_by_input,
            "rows": list(rows), "rows_total": len(self.rows),
            "rows_truncated": max_rows is not None and len(self.rows) > max_rows,
        }

    def to_json(self, max_rows: int | None = None, indent: int | None = None) -> str:
        """JSON text of to_dict(); NaN/Inf values are written as strings so any parser reads it."""
        return json.dumps(_finite(self.to_dict(max_rows)), indent=indent)

    def plot(self, path: str | Path) -> Path:
        """Heat map of the mismatches over the layout's logical axes, written as PNG.
        Needs matplotlib (the ``plot`` extra)."""
        from mxgate.explain.plot import plot_report

        return plot_report(self, path)


def _finite(obj: object) -> object:
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


# ---- rows ----------------------------------------------------------------------------------


def _profile_list(bits: int) -> list[str]:
    """The profiles whose bits are set in a per-unit profile mask."""
    return [n for i, n in enumerate(oracle.profiles.names()) if bits >> i & 1]


def _decode_side(kind: str, code: int, scale: int | None,
                 profile: oracle.profiles.Profile) -> dict[str, object]:
    """One side of a row: the code and its fields decoded under the field's format."""
    out: dict[str, object] = {"code": code}
    if kind == FP4:
        value = float(VALUES[code & 0xF])
        out |= {"hex": f"0x{code:X}", "format": "e2m1", "sign": code >> 3 & 1,
                "exponent": code >> 1 & 3, "mantissa": code & 1, "value": value}
        if scale is not None and scale >= 0:
            factor = float(oracle.decode_e8m0(np.array([scale], np.uint8), profile)[0])
            out |= {"scale": scale, "scaled": value * factor}
    elif kind == FP8:
        value = float(oracle.decode_e4m3(np.array([code], np.uint8), profile.fp8_variant)[0])
        out |= {"hex": f"0x{code:02X}", "format": f"e4m3{profile.fp8_variant}", "sign": code >> 7,
                "exponent": code >> 3 & 0xF, "mantissa": code & 7, "value": value}
    elif kind in (E8M0, E8M0_WORD):
        value = float(oracle.decode_e8m0(np.array([code], np.uint8), profile)[0])
        out |= {"hex": f"0x{code:02X}", "format": "e8m0", "sign": None, "exponent": code,
                "mantissa": None, "value": value}
    else:
        out |= {"hex": f"0x{code:02X}", "format": "byte", "sign": None, "exponent": None,
                "mantissa": None, "value": code}
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
            "expected": _decode_side(kind, int(t.exp[i]), se, prof),
            "actual": _decode_side(kind, int(t.act[i]), sa, prof),
            "class": COUNT_KEYS[int(t.cls[i])],
            "verified": bool(t.verified[i]),
        }
        if t.has_x[i]:
            row["input"] = float(t.x[i])
            row["x_over_scale"] = float(t.xs[i])
        if t.has_x[i] or t.exp_profiles[i] or t.act_profiles[i]:
            row["expected_profiles"] = _profile_list(int(t.exp_profiles[i]))
            row["actual_profiles"] = _profile_list(int(t.act_profiles[i]))
        if kind == F32_SCALE:  # a byte of a float32 word: show the words too
            start = int(t.offsets[t.byte[i]]) - int(t.col[i])
            for side, buf in (("expected", fr.expected), ("actual", fr.actual)):
                word = f32_words(buf, start)
                row[side] |= {"format": "f32le byte", "word_byte": int(t.col[i]),
                              "word": float(word)}
        row["detail"] = _detail(t, i, kind, fr, prof)
        return row


# ---- one line of evidence per row, saying why the row got its class ------------------------

_NO_INPUT = " (no input: unverified)"


def _fp4(code: int) -> str:
    return f"{'-' if code & 8 else '+'}{MAGNITUDES[code & 7]:g}"


def _code(kind: str, code: int, profile: oracle.profiles.Profile) -> str:
    if kind == FP4:
        return f"{_fp4(code)} (0x{code:X})"
    if kind == FP8:
        v = float(oracle.decode_e4m3(np.array([code], np.uint8), profile.fp8_variant)[0])
        return f"{v:g} (0x{code:02X})"
    return f"0x{code:02X}"


def _profiles(bits: int) -> str:
    return ", ".join(_profile_list(bits)) or "no profile"


def _who(t: Table, i: int) -> str:
    if not (t.has_x[i] or t.exp_profiles[i] or t.act_profiles[i]):
        return ""
    return (f"; expected as in {_profiles(int(t.exp_profiles[i]))}; "
            f"actual as in {_profiles(int(t.act_profiles[i]))}")


def _input(t: Table, i: int) -> str:
    return f"x = {float(t.x[i]):.9g}, x/S = {float(t.xs[i]):.9g}"


def _tie(t: Table, i: int) -> str:
    k = int(t.aux[i])
    if k < 0 or not t.has_x[i]:
        return f"adjacent magnitudes {_fp4(int(t.exp[i]))} / {_fp4(int(t.act[i]))}{_NO_INPUT}"
    neg = bool(np.signbit(t.xs[i]))
    sign = "-" if neg else "+"
    lo, hi = MAGNITUDES[k], MAGNITUDES[k + 1]
    rules = [tie_rules(int(code) & 7, k, neg) for code in (t.exp[i], t.act[i])]
    return (f"x/S = {float(t.xs[i]):g} is the midpoint of {sign}{lo:g} and {sign}{hi:g}: "
            f"expected {_fp4(int(t.exp[i]))} (tie {'|'.join(rules[0])}), actual "
            f"{_fp4(int(t.act[i]))} (tie {'|'.join(rules[1])})")


def _scale_shift(t: Table, i: int, kind: str) -> str:
    aux = int(t.aux[i])
    if kind == F32_SCALE:
        return "the float32 scale words are a factor 2 apart (one binade)"
    if aux == SCALE_BYTE or kind != FP4:
        return f"e8m0 {int(t.exp[i])} vs {int(t.act[i])}: one binade apart"
    se, sa = int(t.se[i]), int(t.sa[i])
    how = ("inferred from the input: the whole group re-quantizes to the actual codes under "
           "this scale and not under the expected one" if aux == SCALE_INFERRED else
           "the whole group's actual codes are its re-quantization under the actual scale"
           if t.has_x[i] else "every element's rounding intervals at the two scales overlap"
           + _NO_INPUT)
    return f"group e8m0 {se} -> {sa} (x2^{sa - se}); {how}"


def _nan(t: Table, i: int, kind: str) -> str:
    if kind == F32_SCALE:
        return "the float32 scale word is NaN or Inf on one side"
    if kind in (E8M0, E8M0_WORD):
        return "e8m0 0xFF (NaN) on one side"
    if kind != FP4:
        return "NaN code on one side"
    if t.has_x[i] and not np.isfinite(t.x[i]):
        return f"input is {float(t.x[i])}" + _who(t, i)
    if t.se[i] == 255 or t.sa[i] == 255:
        e, a = (str(int(v)) if v >= 0 else "?" for v in (t.se[i], t.sa[i]))
        return (f"group e8m0 {e} / {a}: 0xFF is NaN, the group holds NaN or Inf and its "
                "elements follow the profile's NaN-scale rule") + _who(t, i)
    return f"{_fp4(int(t.exp[i]))} vs {_fp4(int(t.act[i]))}: a NaN/Inf rule's max code" + _NO_INPUT


def _saturation(t: Table, i: int, kind: str) -> str:
    if kind == FP8:
        return "one side saturated to the max finite value, the other gave NaN (overflow rule)"
    if t.has_x[i]:
        return f"{_input(t, i)} is beyond 6: saturates to {'-' if t.xs[i] < 0 else '+'}6"
    return "one side is the max code, the other wrapped far below it" + _NO_INPUT


def _unexplained(t: Table, i: int, kind: str) -> str:
    if kind != FP4:
        return "no rule matches"
    se, sa = int(t.se[i]), int(t.sa[i])
    if sa >= 0 and se >= 0 and sa != se:
        return f"group scales differ (e8m0 {se} vs {sa}) and the group is not a one-binade shift"
    if t.has_x[i]:
        return f"{_input(t, i)}: no rule matches" + _who(t, i)
    return "no rule matches"


def _detail(t: Table, i: int, kind: str, frame: Frame, profile: oracle.profiles.Profile) -> str:
    name = COUNT_KEYS[int(t.cls[i])]
    exp, act = int(t.exp[i]), int(t.act[i])
    if name == "index_overflow":
        k = int(t.aux[i])
        if k > 0:
            return (f"mismatch tail starting within 1 MiB after byte 2^{k} (a 32-bit index "
                    "wrap) with no mismatch in the 1 MiB before it")
        return f"holds the expected byte from 2^{-k} bytes further on (a wrapped 32-bit index)"
    if name == "untouched_bytes":
        why = {UNTOUCHED_PAD: "zero padding changed",
               UNTOUCHED_UNOWNED: "byte no field owns changed",
               UNTOUCHED_SLOT: f"{frame.main.axes[0]} {t.coord(i, 0)} is not "
               "in the slot mapping: must keep its bytes"}[int(t.aux[i])]
        return f"{why} (0x{exp:02X} -> 0x{act:02X})" if kind != FP4 else why
    if name == "layout_permutation":
        other = t.permutation_layout or "another registered layout"
        return f"the expected logical data written through layout {other} puts this byte here"
    if name == "nibble_swap":
        return "the byte's two nibbles are exchanged"
    if name == "nan_inf":
        return _nan(t, i, kind)
    if name == "scale_off_by_one":
        return _scale_shift(t, i, kind)
    if name == "sign_of_zero":
        text = f"{_code(kind, exp, profile)} vs {_code(kind, act, profile)}: equal after dequantization"
        if t.has_x[i]:
            text += f"; {_input(t, i)}" + _who(t, i)
        return text
    if name == "saturation":
        return _saturation(t, i, kind)
    if name == "tie_direction":
        if kind == FP8:
            return "adjacent FP8 codes" + _NO_INPUT
        return _tie(t, i) + (_who(t, i) if t.has_x[i] else "")
    if kind in (E8M0, E8M0_WORD):
        return f"e8m0 {exp} vs {act}: no rule matches"
    return _unexplained(t, i, kind)


# ---- text -----------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.3f}%" if whole else "n/a"


def _counts_table(report: Report) -> list[str]:
    total = sum(report.counts.values())
    lines = [f"  {'class':<20}{'units':>12}{'share':>10}"]
    for name in COUNT_KEYS:
        n = report.counts[name]
        lines.append(f"  {name:<20}{n:>12,}{_pct(n, total):>10}")
    lines.append(f"  {'total':<20}{total:>12,}")
    return lines


def _side(side: dict[str, object]) -> str:
    v = side["value"]
    value = f"{v:g}" if isinstance(v, float) else str(v)
    if side.get("format") == "e2m1" and isinstance(v, float) and v == 0:
        value = "-0" if side["sign"] else "+0"
    return f"{side['hex']}={value}"


def _rows_table(report: Report, limit: int) -> list[str]:
    lines = []
    for row in report.rows[:limit]:
        where = ", ".join(f"{k} {v}" for k, v in row["coords"].items()) or row["region"]
        nib = f".{row['nibble'][0]}" if row["nibble"] else "  "
        unit = "byte" if row["source"] == "buffer" else "e8m0"  # e8m0: of the scales argument
        lines.append(f"  {unit} {row['offset']:>10}{nib} {row['field'] or '-':<7} {where:<28} "
                     f"exp {_side(row['expected']):<10} act {_side(row['actual']):<10} "
                     f"{row['class']}: {row['detail']}")
    if len(report.rows) > limit:
        lines.append(f"  ... {len(report.rows) - limit:,} more rows (to_json() / --json for all)")
    return lines


def _hex_grid(report: Report, width: int = 16, lines: int = 8, before: int = 2) -> list[str]:
    """expected | actual | mask lines around the first differing byte. The mask has one mark
    per hex digit for bytes of a 4-bit field (high nibble first, as the hex reads), one pair
    per byte otherwise: x differs, . equal."""
    frame = report._frame
    table = report._table
    if len(table) == 0:
        return []
    first = int(table.offsets[0])
    start = max(first // width - before, 0) * width
    stop = min(start + lines * width, frame.nbytes)
    offs = np.arange(start, stop, dtype=np.int64)
    loc = frame.locate(offs)
    kinds = [f.kind for f in frame.fields]
    e, a = frame.expected[start:stop], frame.actual[start:stop]
    head = (f"hex grid from byte {start} (first mismatch at byte {first}; {width} bytes a line; "
            "mask: x differs, . equal, one mark per nibble for 4-bit codes, high nibble first)")
    out = [head, f"  {'offset':<12}{'expected':<{3 * width + 1}}{'actual':<{3 * width}}mask"]
    for i in range(0, stop - start, width):
        seg = slice(i, min(i + width, stop - start))
        marks = []
        for k in range(seg.start, seg.stop):
            fid = int(loc.field[k])
            if fid >= 0 and kinds[fid] == FP4:
                hi = "x" if (e[k] ^ a[k]) & 0xF0 else "."
                lo = "x" if (e[k] ^ a[k]) & 0x0F else "."
                marks.append(hi + lo)
            else:
                marks.append("xx" if e[k] != a[k] else "..")
        ex = " ".join(f"{b:02x}" for b in e[seg])
        ac = " ".join(f"{b:02x}" for b in a[seg])
        note = ""
        diff = np.flatnonzero(e[seg] != a[seg])
        if diff.size:
            note = "  " + _where(frame, loc, seg.start + int(diff[0]))
        out.append(f"  0x{start + i:08x}  {ex:<{3 * width - 1}}  {ac:<{3 * width - 1}} "
                   f"{' '.join(marks)}{note}")
    return out


def _where(frame: Frame, loc: Located, k: int) -> str:
    fid = int(loc.field[k])
    if fid < 0:
        return "(no field)"
    f = frame.fields[fid]
    parts = [f"{ax} {int(loc.coords[j][k])}" for j, ax in enumerate(f.axes)]
    if f.kind == FP4:
        d = int(loc.coords[len(f.axes) - 1][k])
        parts[-1] = f"{f.axes[-1]}s {d}-{d + 1}"
    return f"{f.name}: " + ", ".join(parts)


def _summary(report: Report, max_rows: int = 20, grid: bool = True) -> str:
    r = report
    lines = [f"mxgate explain: layout {r.layout} [{r.dims_text}], profile {r.profile}",
             f"  buffer {r.shape} = {r.nbytes:,} bytes; {r.differing_bytes:,} differ "
             f"({_pct(r.differing_bytes, r.nbytes)})"]
    if r.compared_nibbles:
        lines.append(f"  4-bit codes: {r.compared_nibbles:,} nibbles, {r.differing_nibbles:,} "
                     f"differ ({_pct(r.differing_nibbles, r.compared_nibbles)})")
    scales = r.scale_source
    if r.scale_bytes is not None:
        scales += (f" for both sides, {r.scale_bytes:,} e8m0 bytes; {r.differing_scale_bytes:,} "
                   f"differ ({_pct(r.differing_scale_bytes, r.scale_bytes)})")
    lines.append(f"  scales: {scales}; input: {'given' if r.has_input else 'not given'}")
    if r.equal:
        lines.append("  expected == actual")
    else:
        lines.append("counts (one unit per differing nibble of 4-bit codes, else per byte):")
        lines.extend(_counts_table(r))
        if r.unverified:
            lines.append(f"  {r.unverified:,} units were classified from the codes alone "
                         "(no input covering them): marked unverified")
        if r.permutation_layout:
            lines.append(f"  layout permutation: the actual bytes follow layout {r.permutation_layout}")
    if r.matching_profiles is not None:
        unit = "codes" if r.compared_nibbles else "e8m0 bytes"
        lines.append(f"profiles re-derived from the input ({unit} that differ; + e8m0 bytes "
                     "where that side's scales are known):")
        lines.append(f"  {'profile':<20}{'vs actual':>22}{'vs expected':>24}")
        for name, entry in r.profile_mismatches.items():
            cells = []
            for side in ("actual", "expected"):
                e = entry[side]
                cells.append(f"{e['codes']:,}" + ("" if e["scales"] is None else f" + {e['scales']:,}"))
            lines.append(f"  {name:<20}{cells[0]:>22}{cells[1]:>24}")
        lines.append(f"  actual matches: {', '.join(r.matching_profiles) or 'none'}")
        lines.append(f"  expected matches: {', '.join(r.expected_matching_profiles) or 'none'}")
    if len(r.rows):
        lines.append(f"first {min(max_rows, len(r.rows))} rows:")
        lines.extend(_rows_table(r, max_rows))
        if grid:
            lines.extend(_hex_grid(r))
    return "\n".join(lines)
