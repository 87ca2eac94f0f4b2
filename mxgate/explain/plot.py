"""Heat map of a report's mismatches over the layout's logical axes (PNG).

matplotlib is the optional ``plot`` extra: imported here only, on first use, through its
object API (no pyplot, so no global backend state is touched).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mxgate.explain.inputs import E8M0, E8M0_WORD, F32_SCALE, FP4, FP8, FieldInfo
from mxgate.explain.io import check_writable
from mxgate.explain.rules import COUNT_KEYS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mxgate.explain.report import Report

MAX_CELLS = 512  # bins per axis: a 64 MB cache still draws as a readable picture
# One colour per class, in COUNT_KEYS order (tab10's, unexplained in black).
COLOURS = [(0.122, 0.467, 0.706, 1.0), (1.0, 0.498, 0.055, 1.0), (0.173, 0.627, 0.173, 1.0),
           (0.839, 0.153, 0.157, 1.0), (0.580, 0.404, 0.741, 1.0), (0.549, 0.337, 0.294, 1.0),
           (0.890, 0.467, 0.761, 1.0), (0.498, 0.498, 0.498, 1.0), (0.737, 0.741, 0.133, 1.0),
           (0.0, 0.0, 0.0, 1.0)]


def _matplotlib(what: str = "Report.plot"):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"{what} needs the matplotlib package, which is not installed "
                          "(pip install 'mxgate[plot]')", name="matplotlib") from exc
    return Figure, FigureCanvasAgg


def require_matplotlib(what: str) -> None:
    """ImportError naming ``what`` and the package when matplotlib cannot be imported."""
    _matplotlib(what)


def _grid(f: FieldInfo, rows: np.ndarray, cols: np.ndarray, cls: np.ndarray
          ) -> tuple[np.ndarray, int, int, int]:
    """Per-class counts [classes, y, x] binned over (first axis, remaining axes flattened
    with the column last)."""
    first = f.row_extents[0]
    inner_rows = int(np.prod(f.row_extents[1:], dtype=np.int64)) if len(f.row_extents) > 1 else 1
    width = f.width
    if inner_rows > 1:
        y = rows // inner_rows
        x = (rows - y * inner_rows) * width + cols
    else:  # one row axis: rows and columns are the cell coordinates already
        y, x = rows, cols
    nx = inner_rows * width
    by = max(1, -(-first // MAX_CELLS))
    bx = max(1, -(-nx // MAX_CELLS))
    shape = (len(COUNT_KEYS), -(-first // by), -(-nx // bx))
    if by > 1:
        y = y // by
    if bx > 1:
        x = x // bx
    flat = (cls.astype(np.int64) * shape[1] + y) * shape[2] + x
    counts = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)
    return counts, by, bx, inner_rows


def _class_image(counts: np.ndarray) -> np.ndarray:
    """RGBA: each cell in the colour of the class with most units there, more opaque where
    more units differ; white where nothing differs."""
    total = counts.sum(axis=0)
    top = counts.argmax(axis=0)
    rgba = np.asarray(COLOURS)[top].copy()
    peak = max(int(total.max()), 1)
    rgba[..., 3] = np.where(total > 0, 0.35 + 0.65 * total / peak, 0.0)
    return rgba


def _labels(f: FieldInfo, by: int, bx: int, inner_rows: int) -> tuple[str, str]:
    ylabel = f.axes[0] + (f" ({by} per cell)" if by > 1 else "")
    col = {FP4: f.axes[-1], FP8: f.axes[-1], E8M0: "group", E8M0_WORD: "group",
           F32_SCALE: "byte of the float32 word"}[f.kind]
    if inner_rows > 1:
        middle = " × ".join(f.row_axes[1:])
        xlabel = f"{middle} × {col}  ({middle}·{f.width} + {col})"
    else:
        xlabel = col
    return ylabel, xlabel + (f"  ({bx} per cell)" if bx > 1 else "")


def build_figure(report: Report) -> Figure:
    Figure, _ = _matplotlib()
    frame, t = report._frame, report._table
    panels = []
    field = t.field
    for i, f in enumerate(frame.fields):
        if f.kind in (FP4, FP8, E8M0, E8M0_WORD, F32_SCALE):
            mask = (field == i) & (t.row >= 0)
            if mask.all():  # the usual single-field buffer: no copies
                panels.append((f, t.row, t.col, t.cls))
                continue
            sel = np.flatnonzero(mask)
            if sel.size or i == 0:
                panels.append((f, t.row[sel], t.col[sel], t.cls[sel]))
    part = report._scale_part
    if part is not None and len(part.table):  # the scales argument's differing e8m0 bytes
        st = part.table
        panels.append((part.frame.main, st.row, st.col, st.cls))
    fig = Figure(figsize=(5 + 4.5 * len(panels), 6), layout="constrained")
    axes = fig.subplots(1, len(panels) + 1,
                        gridspec_kw={"width_ratios": [3] * len(panels) + [2]})
    for ax, (f, rows, cols, cls) in zip(axes, panels):
        counts, by, bx, inner = _grid(f, rows, cols, cls)
        ny, nx = counts.shape[1:]
        ax.imshow(_class_image(counts), aspect="auto", interpolation="nearest",
                  extent=(0, nx * bx, ny * by, 0))
        unit = "nibbles" if f.kind == FP4 else "bytes"
        ylabel, xlabel = _labels(f, by, bx, inner)
        ax.set_ylabel(ylabel)
        ax.set_xlabel(xlabel)
        ax.set_facecolor("white")
        ax.set_title(f"{f.name} ({f.kind}): {rows.size:,} differing {unit}\n"
                     "colour: root cause, opacity: mismatch density", fontsize=9)
        if 1 < inner <= 64:  # mark where each inner row (e.g. head) starts
            ax.set_xticks(np.arange(inner) * f.width)
            ax.set_xticklabels([str(h) for h in range(inner)], fontsize=7)
    bar = axes[-1]
    values = [report.counts[k] for k in COUNT_KEYS]
    bar.barh(range(len(COUNT_KEYS)), values, color=COLOURS)
    bar.set_yticks(range(len(COUNT_KEYS)))
    bar.set_yticklabels(COUNT_KEYS)
    bar.invert_yaxis()
    bar.set_xlabel("differing units")
    bar.set_title("root cause (legend)")
    for y, v in enumerate(values):
        if v:
            bar.text(v, y, f" {v:,}", va="center", fontsize=8)
    bar.set_xlim(0, max(max(values), 1) * 1.25)
    other = int(np.count_nonzero(t.row < 0))
    fig.suptitle(f"mxgate explain: {report.layout} [{report.dims_text}]\nprofile "
                 f"{report.profile}: {report.total:,} differing units"
                 + (f" ({other:,} outside the logical axes: padding / unowned)" if other else ""))
    return fig


def plot_report(report: Report, path: str | Path) -> Path:
    """Write the heat map to ``path`` (PNG) and return the path."""
    _, FigureCanvasAgg = _matplotlib()
    out = check_writable(path, "path")  # before drawing: a missing folder fails at once
    fig = build_figure(report)
    FigureCanvasAgg(fig).print_png(str(out))
    return out
