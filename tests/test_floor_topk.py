"""``topk_indices`` with a k no kernel can have (issue 21 item 10): a ValueError naming k and the
row width, not a MemoryError; a k past the width stays legal padding."""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.oracle.scorers.topk import topk_indices


def test_a_k_far_past_the_row_width_is_a_value_error() -> None:
    values = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError, match=r"k=1099511627776 is too large: it exceeds the row width 8"):
        topk_indices(values, 2**40)


def test_a_k_past_the_row_width_pads_with_minus_one() -> None:
    values = np.float32([[0.5, 2.0, -1.0], [np.nan, 1.0, 1.0]])
    got = topk_indices(values, 5)
    assert got.shape == (2, 5)
    assert got.tolist() == [[1, 0, 2, -1, -1], [1, 2, -1, -1, -1]]
