"""The structured answer of ``explain``: counts per class, rows, profile matches, renderers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mxgate.explain import render
from mxgate.explain.classes import CODE, COUNT_KEYS, DEFINITIONS, PRECEDENCE
from mxgate.explain.table import Table
from mxgate.explain.context import Context
from mxgate.explain.frame import FP4, KINDS, Frame
from mxgate.explain.rows import Rows
from mxgate.explain.scale_args import ScalePart

_INPUT_CLASSES = ("nan_inf", "scale_off_by_one", "sign_of_zero", "saturation", "tie_direction")


class Report:
    """Mismatch report. ``counts`` has every class name (zeros included); ``rows`` one entry
    per differing unit; ``matching_profiles`` is None without input."""

    def __init__(self, frame: Frame, ctx: Context, table: Table,
                 matches: dict[str, object] | None, scale_part: ScalePart | None = None) -> None:
        self._frame, self._ctx, self._table = frame, ctx, table
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
                                      else int(scale_part.table.extra["differing_bytes"]))
        self.layout = frame.name
        self.dims = dict(frame.dims)
        self.shape = tuple(frame.shape)
        self.nbytes = frame.nbytes
        self.profile = ctx.profile.name
        self.scale_source = ctx.scale_source
        self.has_input = ctx.has_input
        self.differing_bytes = int(table.extra.get("differing_bytes", 0))
        self.compared_nibbles = sum(int(np.prod(f.extents)) for f in frame.fields if f.kind == FP4)
        self.differing_nibbles = int(np.count_nonzero(table.nibble >= 0))
        self.permutation_layout = table.extra.get("permutation_layout")
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
        return render.summary(self, max_rows=max_rows, grid=grid)

    def hex_grid(self, width: int = 16, lines: int = 8) -> str:
        return "\n".join(render.hex_grid(self, width=width, lines=lines))

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
