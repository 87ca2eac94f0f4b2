"""compare_logits on window cells that are all NaN: a fail with the first cell, not a crash."""

from __future__ import annotations

import numpy as np

from mxgate.conformance.judge import FAIL, compare_logits
from mxgate.oracle.scorers.common import ScoredLogits


def _scored() -> ScoredLogits:
    window = np.zeros((2, 4), bool)
    window[:, :2] = True
    value = np.where(window, 1.5, -np.inf)
    bound = np.where(window, 1e-6, 0.0)
    return ScoredLogits(value, bound, window, np.where(window, np.float32(1.5), np.float32(-np.inf)).astype(np.float32))


def test_every_window_cell_nan_is_a_fail_naming_the_first_cell() -> None:
    scored = _scored()
    actual = np.where(scored.window, np.float32(np.nan), np.float32(-np.inf)).astype(np.float32)
    check = compare_logits(scored, actual)
    assert check.verdict == FAIL
    assert check.outside == 4 and check.first_outside == (0, 0)
    assert check.worst_ratio == 0.0
    assert "4 of 4 window cells outside the bound, first at (0, 0)" in check.reason


def test_worst_ratio_still_reads_the_finite_cells() -> None:
    scored = _scored()
    actual = np.where(scored.window, np.float32(1.5), np.float32(-np.inf)).astype(np.float32)
    actual[0, 0] = np.nan
    actual[1, 1] = np.float32(1.5) + np.float32(2 ** -22)  # 2.4e-7 off: a quarter of the bound
    check = compare_logits(scored, actual)
    assert check.verdict == FAIL and check.outside == 1
    assert check.worst_ratio == (2 ** -22) / 1e-6


def test_cell_classes_are_the_counts_compare_logits_reports() -> None:
    """One cell of each class: bit-equal, within the bound only, outside it, and a -inf value
    met by -inf (its non-finite class) or by a finite number (outside)."""
    from mxgate.oracle.scorers.cells import classify_logits

    window = np.ones((1, 5), bool)
    value = np.array([[1.5, 1.5, 1.5, -np.inf, -np.inf]])
    emulated = np.array([[1.5, 1.5, 1.5, -np.inf, -np.inf]], np.float32)
    scored = ScoredLogits(value, np.array([[1e-6, 1e-6, 1e-6, 0.0, 0.0]]), window, emulated)
    actual = np.array([[1.5, 1.5 + 2 ** -22, 1.5 + 2 ** -10, -np.inf, 0.0]], np.float32)
    classes = classify_logits(scored, actual)
    assert classes.bit_equal.tolist() == [[True, False, False, True, False]]
    assert classes.within.tolist() == [[True, True, False, False, False]]
    assert classes.same_class.tolist() == [[False, False, False, True, False]]
    assert classes.explained.tolist() == [[True, True, False, True, False]]
    check = compare_logits(scored, actual)
    assert (check.bit_equal, check.within, check.outside) == (2, 1, 2)
