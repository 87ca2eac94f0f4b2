"""How a backend's float32 logits relate to the oracle's answer (``ScoredLogits``), cell by cell.

One rule, read by the gate (``mxgate.conformance.judge.compare_logits`` turns it into a verdict)
and by ``mxgate identify`` (which counts the explained cells under each candidate profile). A
window cell is explained when it is

* ``bit_equal``: bit-equal to the emulated order (NaN matches NaN); with no emulated order,
  numerically equal to the value;
* ``within``: the value and the backend's cell finite, ``|cell - value| <= bound``;
* ``same_class``: the value not finite and the cell of its class (NaN, or the same infinity).

Cells outside the window are False in every mask. No verdict is made here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mxgate.oracle.scorers.common import ScoredLogits


@dataclass(frozen=True)
class LogitCells:
    """Boolean masks of the logits' shape; ``error`` is |cell - value| in float64 (any cell)."""

    window: np.ndarray
    bit_equal: np.ndarray
    within: np.ndarray
    same_class: np.ndarray
    error: np.ndarray

    @property
    def explained(self) -> np.ndarray:
        return self.bit_equal | self.within | self.same_class


def classify_logits(scored: ScoredLogits, actual: np.ndarray) -> LogitCells:
    """The cell classes of float32 ``actual`` against ``scored`` (NumPy arrays of one shape;
    ValueError otherwise)."""
    a = np.asarray(actual)
    if a.dtype != np.float32:
        raise TypeError(f"actual must have dtype float32, got {a.dtype}")
    win = np.asarray(scored.window, bool)
    if a.shape != win.shape:
        raise ValueError(f"actual must have shape {win.shape}, got {a.shape}")
    value, bound = np.asarray(scored.value, np.float64), np.asarray(scored.bound, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        a64 = a.astype(np.float64)
        error = np.abs(a64 - value)
        finite = np.isfinite(value)
        within = win & finite & np.isfinite(a64) & (error <= bound)
        same_class = win & ~finite & ((np.isnan(value) & np.isnan(a64)) | (value == a64))
        if scored.emulated is not None:
            e = np.asarray(scored.emulated, np.float32)
            bit_equal = win & ((a.view(np.uint32) == e.view(np.uint32)) | (np.isnan(a) & np.isnan(e)))
        else:
            bit_equal = win & (a64 == value)
    return LogitCells(win, bit_equal, within, same_class, error)
