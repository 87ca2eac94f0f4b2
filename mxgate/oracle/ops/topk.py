"""Top-k of scorer logits: the oracle's own deterministic choice, and a check of a backend's
choice that allows ties and near-ties inside the rigorous bound.

Oracle order (``topk_indices``): per row, candidates are the cells with a non-NaN value above
-inf (inside the window when one is given); they are ranked by value, larger first, and equal
values by column index, smaller first. The first k are returned in that order; rows with fewer
than k candidates are padded with -1 (as the kernels pad).

Backend check (``check_topk``): the backend's logits may differ from the exact values v by at
most the bound b per cell. A set S of k columns is a top-k of *some* admissible logits exactly
when  min_{j in S} (v_j + b_j) >= max_{i not in S} (v_i - b_i)  (raise the chosen cells, lower
the others). Every oracle top-k cell the backend left out is then an accepted swap; a left-out
cell i with v_i - b_i > min_{j in S}(v_j + b_j) is a genuine miss (it beats a chosen cell under
every admissible rounding). Columns that are not candidates (out of the window, -inf, NaN, out
of range, repeated) are invalid choices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mxgate.oracle._validate import allocation, integer, shown


@dataclass(frozen=True)
class TopkCheck:
    """Result of ``check_topk`` over all rows.

    overlap: |backend set ∩ oracle set| / |oracle set|, pooled over rows (1.0 when every row
    matches); overlap_per_row: the same per row. accepted_swaps: oracle cells left out where
    the row is still admissible (ties and near-ties within the bound); genuine_misses: oracle
    cells left out that beat a chosen cell under every admissible rounding; invalid: backend
    columns that are not candidates or repeat. passed: no genuine miss and nothing invalid.
    misses: (row, oracle column, backend column it lost to) for the first few genuine misses.
    """

    overlap: float
    overlap_per_row: np.ndarray
    accepted_swaps: int
    genuine_misses: int
    invalid: int
    passed: bool
    misses: list[tuple[int, int, int]]
    reason: str


def _candidates(values: np.ndarray, window: np.ndarray | None) -> np.ndarray:
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
    allocation(rows * k, 8, f"k={shown(k)}", f"the top-k indices of {rows} rows")
    cand = _candidates(values, window)
    key = np.where(cand, values.astype(np.float64), -np.inf)
    # lexsort: last key is primary; stable by column for equal values
    order = np.lexsort((np.broadcast_to(np.arange(n), (rows, n)), -key), axis=1)
    kk = min(k, n)
    top = order[:, :kk]
    picked = np.take_along_axis(cand, top, axis=1)
    out = np.full((rows, k), -1, dtype=np.int64)
    out[:, :kk] = np.where(picked, top, -1)
    return out


def check_topk(oracle_values: np.ndarray, bound: np.ndarray, backend_indices: np.ndarray, k: int,
               window: np.ndarray | None = None, max_misses: int = 8) -> TopkCheck:
    """Judge a backend's top-k columns against exact values and per-cell bounds (see module).

    oracle_values, bound: float [rows, columns] (e.g. ``ScoredLogits.value`` / ``.bound``);
    backend_indices: int [rows, k'] with k' >= k (the first k are used; -1 entries are padding).
    """
    k = integer(k, "k", minimum=0)
    max_misses = integer(max_misses, "max_misses", minimum=0)
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
    cand = _candidates(v, window)
    ref = topk_indices(v, k, window)
    hi = np.where(cand, v + b, -np.inf)
    lo = np.where(cand, v - b, -np.inf)
    per_row = np.ones(rows)
    swaps = misses = invalid = 0
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
        invalid += int(bad.sum())
        chosen = np.unique(got[valid & ~repeat])
        # padding is only legitimate when the row has fewer than k candidates
        invalid += int(max(0, min(k, int(cand[r].sum())) - chosen.size - int(bad.sum())))
        if want.size:
            per_row[r] = np.isin(want, chosen).sum() / want.size
        left = want[~np.isin(want, chosen)]
        if left.size == 0:
            continue
        floor = hi[r, chosen].min() if chosen.size else -np.inf
        beats = lo[r, left] > floor
        misses += int(beats.sum())
        swaps += int((~beats).sum())
        if beats.any() and len(first) < max_misses:
            loser = int(chosen[np.argmin(hi[r, chosen])])
            first.extend((r, int(c), loser) for c in left[beats][: max_misses - len(first)])
    total = int((ref >= 0).sum())
    overlap = float((per_row * (ref >= 0).sum(axis=1)).sum() / total) if total else 1.0
    passed = misses == 0 and invalid == 0
    if passed:
        reason = "" if swaps == 0 else f"{swaps} near-tie swap(s) within the bound, overlap {overlap:.4f}"
    else:
        parts = []
        if misses:
            r, c, j = first[0]
            parts.append(f"{misses} genuine miss(es), first row {r}: column {c} (exact {float(v[r, c])!r} "
                         f"+- {float(b[r, c])!r}) beats chosen column {j} (exact {float(v[r, j])!r} +- {float(b[r, j])!r})")
        if invalid:
            parts.append(f"{invalid} invalid choice(s) (not a candidate, repeated, or missing)")
        reason = "; ".join(parts)
    return TopkCheck(overlap, per_row, swaps, misses, invalid, passed, first, reason)
