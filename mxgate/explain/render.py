"""Text renderings of a report: the summary, a table of the first rows, and a checkasm-style
hex grid (expected | actual | x/. mismatch map) around the first mismatches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mxgate.explain.classes import COUNT_KEYS
from mxgate.explain.frame import FP4

if TYPE_CHECKING:
    from mxgate.explain.report import Report


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.3f}%" if whole else "n/a"


def counts_table(report: Report) -> list[str]:
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


def rows_table(report: Report, limit: int) -> list[str]:
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


def hex_grid(report: Report, width: int = 16, lines: int = 8, before: int = 2) -> list[str]:
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


def _where(frame, loc, k: int) -> str:
    fid = int(loc.field[k])
    if fid < 0:
        return "(no field)"
    f = frame.fields[fid]
    parts = [f"{ax} {int(loc.coords[j][k])}" for j, ax in enumerate(f.axes)]
    if f.kind == FP4:
        d = int(loc.coords[len(f.axes) - 1][k])
        parts[-1] = f"{f.axes[-1]}s {d}-{d + 1}"
    return f"{f.name}: " + ", ".join(parts)


def summary(report: Report, max_rows: int = 20, grid: bool = True) -> str:
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
        lines.extend(counts_table(r))
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
        lines.extend(rows_table(r, max_rows))
        if grid:
            lines.extend(hex_grid(r))
    return "\n".join(lines)
