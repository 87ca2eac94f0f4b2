"""Top-k of scorer logits: the oracle's own deterministic choice and the candidate cells.

Oracle order (``topk_indices``): per row, candidates are the cells with a non-NaN value above
-inf (inside the window when one is given); they are ranked by value, larger first, and equal
values by column index, smaller first. The first k are returned in that order; rows with fewer
than k candidates are padded with -1 (as the kernels pad), so k may exceed the row width, up to
``MAX_TOPK``.

A backend's choice is judged against the admissible sets (ties and near-ties inside the
rigorous bound) by ``mxgate.conformance.judge.check_topk``.
"""

from __future__ import annotations

import numpy as np

from mxgate.oracle.arguments import allocation, integer, shown

MAX_TOPK = 2**31 - 1  # the kernels write top-k indices as int32: no k of theirs is larger


def candidates(values: np.ndarray, window: np.ndarray | None) -> np.ndarray:
    ok = ~np.isnan(values) & (values > -np.inf)
    return ok if window is None else ok & window


def topk_indices(values: np.ndarray, k: int, window: np.ndarray | None = None) -> np.ndarray:
    """int64 [rows, k]: per row the k largest candidate values, ties to the lower column,
    in rank order; -1 pads rows with fewer than k candidates."""
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"values must have shape [rows, columns], got {values.shape}")
    k = integer(k, "k", minimum=0)
    rows, n = values.shape
    if k > n and k > MAX_TOPK:
        # columns past the width only pad; a k no kernel can have must not become a MemoryError
        raise ValueError(f"k={shown(k)} is too large: it exceeds the row width {n} (columns past it are "
                         f"only -1 padding) and 2^31 - 1, the most top-k columns an int32 index output holds")
    allocation(rows * k, 8, f"k={shown(k)}", f"the top-k indices of {rows} rows")
    cand = candidates(values, window)
    key = np.where(cand, values.astype(np.float64), -np.inf)
    # lexsort: last key is primary; stable by column for equal values
    order = np.lexsort((np.broadcast_to(np.arange(n), (rows, n)), -key), axis=1)
    kk = min(k, n)
    top = order[:, :kk]
    picked = np.take_along_axis(cand, top, axis=1)
    out = np.full((rows, k), -1, dtype=np.int64)
    out[:, :kk] = np.where(picked, top, -1)
    return out


def admissible_range(values: np.ndarray, bound: np.ndarray, window: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidates, lowest, highest) per cell: the logits a backend may produce lie in
    [value - bound, value + bound]; cells that are not candidates get -inf for both. A set S of
    k columns is then a top-k of some admissible logits exactly when
    min_{j in S} highest_j >= max_{i not in S} lowest_i."""
    v = np.asarray(values, dtype=np.float64)
    b = np.asarray(bound, dtype=np.float64)
    cand = candidates(v, window)
    return cand, np.where(cand, v - b, -np.inf), np.where(cand, v + b, -np.inf)
