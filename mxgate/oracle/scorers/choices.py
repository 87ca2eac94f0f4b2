"""How a backend's top-k choices relate to the oracle's values and bounds, row by row.

One rule, read by the gate (``mxgate.conformance.judge.check_topk`` turns it into a verdict) and
by ``mxgate identify`` (which counts the rows each candidate profile explains). Every oracle
top-k cell a row leaves out is an accepted *swap* while the row's set is still a top-k of some
admissible logits (``topk.admissible_range``); a left-out cell whose lowest admissible value
beats the highest of a chosen cell is a genuine *miss*. Chosen columns that are not candidates
(out of the window, -inf, NaN, out of range, repeated), and padding (-1) where the row has at
least k candidates, are *invalid*. No verdict is made here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mxgate.oracle.scorers import common as _args
from mxgate.oracle.scorers.topk import admissible_range, topk_indices


@dataclass(frozen=True)
class TopkRows:
    """Per row: the share of the oracle's top-k the backend chose (1.0 for an empty one), the
    accepted swaps, the genuine misses and the invalid choices; ``oracle`` is the oracle's top-k
    (int64 [rows, k], -1 padding); ``misses`` (row, oracle column, the chosen column it beats)
    for the first few genuine misses."""

    overlap: np.ndarray
    swaps: np.ndarray
    misses: np.ndarray
    invalid: np.ndarray
    oracle: np.ndarray
    first_misses: list[tuple[int, int, int]]

    @property
    def explained(self) -> np.ndarray:
        """Rows with no genuine miss and no invalid choice."""
        return (self.misses == 0) & (self.invalid == 0)


def classify_topk(oracle_values: np.ndarray, bound: np.ndarray, backend_indices: np.ndarray, k: int,
                  window: np.ndarray | None = None, max_misses: int = 8) -> TopkRows:
    """oracle_values, bound: float [rows, columns] (``ScoredLogits.value`` / ``.bound``);
    backend_indices: int [rows, k'] with k' >= k (the first k are read; -1 is padding)."""
    k = _args.integer(k, "k", minimum=0)
    max_misses = _args.integer(max_misses, "max_misses", minimum=0)
    v = np.asarray(oracle_values, dtype=np.float64)
    b = np.asarray(bound, dtype=np.float64)
    idx = np.asarray(backend_indices)
    if v.ndim != 2 or b.shape != v.shape:
        raise ValueError(f"oracle_values and bound must have the same [rows, columns] shape, got {v.shape} and {b.shape}")
    if idx.ndim != 2 or idx.shape[0] != v.shape[0] or idx.shape[1] < k:
        raise ValueError(f"backend_indices must have shape [{v.shape[0]}, >= {k}], got {idx.shape}")
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"backend_indices must be integers, got {idx.dtype}")
    rows, n = v.shape
    cand, lo, hi = admissible_range(v, b, window)
    ref = topk_indices(v, k, window)
    overlap = np.ones(rows)
    swaps, misses, invalid = (np.zeros(rows, np.int64) for _ in range(3))
    first: list[tuple[int, int, int]] = []
    for r in range(rows):  # rows are few (queries); columns are vectorised
        want = ref[r][ref[r] >= 0]
        got = idx[r, :k].astype(np.int64)
        pad = got < 0
        inside = (got >= 0) & (got < n)
        valid = inside.copy()
        valid[inside] = cand[r, got[inside]]
        _, first_pos = np.unique(got, return_index=True)
        repeat = np.ones(k, bool)
        repeat[first_pos] = False
        bad = ~pad & (~valid | repeat)
        chosen = np.unique(got[valid & ~repeat])
        # padding is only legitimate when the row has fewer than k candidates
        invalid[r] = int(bad.sum()) + max(0, min(k, int(cand[r].sum())) - chosen.size - int(bad.sum()))
        if want.size:
            overlap[r] = np.isin(want, chosen).sum() / want.size
        left = want[~np.isin(want, chosen)]
        if left.size == 0:
            continue
        floor = hi[r, chosen].min() if chosen.size else -np.inf
        beats = lo[r, left] > floor
        misses[r] = int(beats.sum())
        swaps[r] = int((~beats).sum())
        if beats.any() and len(first) < max_misses:
            loser = int(chosen[np.argmin(hi[r, chosen])])
            first.extend((r, int(c), loser) for c in left[beats][: max_misses - len(first)])
    return TopkRows(overlap, swaps, misses, invalid, ref, first)
