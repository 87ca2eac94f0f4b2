"""Top-k: the oracle's deterministic order and the bound-aware check of a backend's choice."""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.inputs import logits as lc
from mxgate.conformance.judge import check_topk
from mxgate.oracle.scorers import aiter_fp4 as logits
from mxgate.oracle.scorers.topk import topk_indices


def test_topk_order_ties_to_lower_index_and_padding() -> None:
    v = np.array([[1.0, 3.0, 3.0, -np.inf, 2.0, np.nan, 3.0],
                  [-np.inf, 5.0, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf]])
    got = topk_indices(v, 4)
    assert got[0].tolist() == [1, 2, 6, 4]
    assert got[1].tolist() == [1, -1, -1, -1]
    win = np.ones_like(v, dtype=bool)
    win[0, 1] = False
    assert topk_indices(v, 2, window=win)[0].tolist() == [2, 6]


def _near_tie_case() -> tuple[np.ndarray, np.ndarray]:
    # column 2 is the 3rd largest; column 3 sits within the bounds of it; column 4 is far below
    v = np.array([[10.0, 9.0, 5.0, 4.9999, 1.0, 0.5]])
    b = np.full_like(v, 1e-3)
    return v, b


def test_check_accepts_a_near_tie_swap() -> None:
    v, b = _near_tie_case()
    assert topk_indices(v, 3)[0].tolist() == [0, 1, 2]
    res = check_topk(v, b, np.array([[0, 3, 1]]), 3)
    assert res.passed, res.reason
    assert res.accepted_swaps == 1 and res.genuine_misses == 0
    assert res.overlap == pytest.approx(2 / 3)
    exact_tie = check_topk(np.array([[3.0, 2.0, 2.0]]), np.zeros((1, 3)), np.array([[0, 2]]), 2)
    assert exact_tie.passed and exact_tie.accepted_swaps == 1


def test_check_rejects_a_genuine_miss() -> None:
    v, b = _near_tie_case()
    res = check_topk(v, b, np.array([[0, 1, 4]]), 3)
    assert not res.passed
    assert res.genuine_misses == 1
    assert res.misses[0] == (0, 2, 4)
    assert "genuine miss" in res.reason


def test_check_counts_invalid_choices() -> None:
    v, b = _near_tie_case()
    win = np.ones_like(v, dtype=bool)
    win[0, 5] = False
    assert check_topk(v, b, np.array([[0, 1, 1]]), 3).invalid >= 1  # repeated
    assert check_topk(v, b, np.array([[0, 1, 5]]), 3, window=win).invalid >= 1  # outside the window
    assert check_topk(v, b, np.array([[0, 1, 99]]), 3).invalid >= 1  # out of range
    assert check_topk(v, b, np.array([[0, 1, -1]]), 3).invalid >= 1  # padded though 6 candidates exist
    short = np.array([[2.0, -np.inf, 1.0]])
    assert check_topk(short, np.zeros((1, 3)), np.array([[0, 2, -1]]), 3).passed  # only 2 candidates


def test_scorer_topk_of_emulated_order_passes_against_exact() -> None:
    seed = 12
    case = lc.fp4_decode_case(seed, 2, 1024, 2, 64)
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs)
    mine = topk_indices(s.emulated, 64, window=s.window)
    res = check_topk(s.value, s.bound, mine, 64, window=s.window)
    assert res.passed, f"seed {seed}: {res.reason}"
    assert res.overlap > 0.95, f"seed {seed}"
