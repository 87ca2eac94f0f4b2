"""Float32 head-summation orders the emulated scorers can follow (all start from +0.0).

aiter-fp4:  four partial sums S_g over heads m*16 + 4g + e (m outer, e inner), then
            (S0 + S1) + (S2 + S3): the FlyDSL MFMA lane layout (SPEC section 7).
sequential: ((0 + p_0) + p_1) + ... left to right.
pairwise:   a balanced binary tree in natural order: (p0 + p1), (p2 + p3), ... then pairs of
            pairs; an odd element at the end of a level moves up unchanged.
"""

from __future__ import annotations

import numpy as np

HEAD_ORDERS = ("aiter-fp4", "sequential", "pairwise")


def head_sum(p: np.ndarray, order: str) -> np.ndarray:
    """Sum float32 p [rows, H, tokens] over axis 1 in the named order -> float32 [rows, tokens]."""
    H = p.shape[1]
    zero = np.zeros((p.shape[0], p.shape[2]), dtype=np.float32)
    if order == "aiter-fp4":
        if H % 16:
            raise ValueError(f"head order 'aiter-fp4' needs heads to be a multiple of 16, got {H}")
        parts = []
        for g in range(4):
            acc = zero.copy()
            for m in range(H // 16):
                for e in range(4):
                    acc += p[:, m * 16 + 4 * g + e]
            parts.append(acc)
        return (parts[0] + parts[1]) + (parts[2] + parts[3])
    if order == "sequential":
        acc = zero.copy()
        for h in range(H):
            acc += p[:, h]
        return acc
    if order == "pairwise":
        level = [p[:, h] for h in range(H)]
        if not level:
            return zero
        while len(level) > 1:
            nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0] + np.float32(0.0)  # the +0 start: -0 becomes +0
    raise ValueError(f"head_order must be one of {', '.join(map(repr, HEAD_ORDERS))}; got {order!r}")
