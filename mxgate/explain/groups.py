"""Group-level evidence: is a group's difference one binade of scale?

A group is 32 consecutive elements sharing one e8m0 byte. The test looks at the whole group
(every element, not only the differing ones): a real scale bug moves all of them.
"""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.explain import elements
from mxgate.explain.context import Context
from mxgate.explain.frame import GROUP, Frame


def _fp4_codes(frame: Frame, side: np.ndarray, di: int, rows: np.ndarray,
               dims: np.ndarray) -> np.ndarray:
    """4-bit codes of (row, dim) pairs of FP4 field ``di`` read from ``side``."""
    off = frame.offsets(di, rows, dims)
    return (side[off] >> ((dims & 1) * 4).astype(np.uint8)) & 0xF


def dense_unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(unique keys, inverse) for small non-negative int keys, without sorting."""
    mark = np.zeros(size, bool)
    mark[keys] = True
    uniq = np.flatnonzero(mark)
    pos = np.zeros(size, np.int64)
    pos[uniq] = np.arange(uniq.size)
    return uniq, pos[keys]


def one_binade(fr: Frame, ctx: Context, grow: np.ndarray, ggrp: np.ndarray, se: np.ndarray,
               sa: np.ndarray, open_g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(good, actual scale, inferred) per group (row ``grow``, group ``ggrp``).

    good: the e8m0 bytes are one apart and the whole actual group is the re-quantization
    under the actual scale (with input: exactly; without: every element's rounding intervals
    overlap). Groups whose actual scale is unknown but whose input is known are tried at
    e +- 1: good when that re-quantization gives the actual codes and e does not (inferred).
    Only groups flagged in ``open_g`` are considered.
    """
    known = open_g & (se >= 0) & (sa >= 0) & (np.abs(se.astype(np.int32) - sa) == 1)
    in_g = ctx.input_row(grow)
    inferable = open_g & (sa < 0) & (se >= 0) & (in_g >= 0) & (se != 255)
    good = np.zeros(grow.size, bool)
    shifted = sa.astype(np.int16).copy()
    di = ctx.ref_index
    dims = np.arange(GROUP)[None, :]
    k = np.flatnonzero(known)
    if k.size:
        cols = ggrp[k, None] * GROUP + dims
        act = _fp4_codes(fr, fr.actual, di, grow[k, None], cols)
        covered = in_g[k] >= 0
        ok = np.zeros(k.size, bool)
        if covered.any():
            xv = ctx.group_values(in_g[k][covered], ggrp[k][covered])
            redo = oracle.encode_e2m1(xv, ctx.profile, scale=sa[k][covered, None].astype(np.uint8))
            ok[covered] = np.all(redo == act[covered], axis=1)
        if (~covered).any():
            exp = _fp4_codes(fr, fr.expected, di, grow[k, None], cols)
            ok[~covered] = elements.fp4_group_consistent(exp[~covered], act[~covered],
                                                         se[k][~covered], sa[k][~covered])
        good[k[ok]] = True
    k = np.flatnonzero(inferable)
    if k.size:
        cols = ggrp[k, None] * GROUP + dims
        act = _fp4_codes(fr, fr.actual, di, grow[k, None], cols)
        xv = ctx.group_values(in_g[k], ggrp[k])
        base = oracle.encode_e2m1(xv, ctx.profile, scale=se[k, None].astype(np.uint8))
        for step in (1, -1):
            s2 = se[k] + step
            valid = (s2 >= 0) & (s2 <= 254) & ~good[k]
            redo = oracle.encode_e2m1(xv, ctx.profile,
                                      scale=np.clip(s2, 0, 254)[:, None].astype(np.uint8))
            ok = valid & np.all(redo == act, axis=1) & np.any(base != act, axis=1)
            good[k[ok]] = True
            shifted[k[ok]] = s2[ok]
    return good, shifted, inferable
