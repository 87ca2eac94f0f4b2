"""Inputs of AITER's ragged FP8 scorer ``fp8_mqa_logits`` and the oracle's answer for them.

The oracle has no ragged FP8 scorer of its own: row i of ``fp8_mqa_logits`` scores
kv[cu_starts[i]:cu_ends[i]], which is the FP8 paged scorer (``pa_mqa_logits_fp8``) with one
batch per row over one table of every K block, the cells below cu_starts[i] taken out of the
window. Read by the gate (mxgate.conformance.test_aiter_conformance) and by ``mxgate identify``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mxgate import oracle
from mxgate.inputs import logits as lc
from mxgate.oracle import layouts
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers.common import ANY_ORDER, ScoredLogits


@dataclass(frozen=True)
class Fp8RaggedCase:
    """kwargs: ``fp8_mqa_logits``'s arguments; paged: the FP8 paged scorer's positional
    arguments that score the same rows; starts: each row's first window column (>= 0)."""

    kwargs: dict[str, Any]
    paged: tuple[Any, ...]
    starts: np.ndarray


def fp8_ragged_case(seed: int, rows: int, kv_len: int, heads: int) -> Fp8RaggedCase:
    """Row i scores kv[starts[i]:ends[i]], some rows empty, some windows clipped at either end;
    Q codes e4m3fn of bf16 values scaled per row to 448, K from ``logits.fp8_decode_case``."""
    base = lc.fp8_decode_case(seed, 1, kv_len, 1, heads, context_lens=np.array([kv_len]))
    rng = lc.rng_for(seed + 1)
    starts = rng.integers(-8, kv_len, rows).astype(np.int32)
    ends = (starts + rng.integers(0, kv_len // 2 + 1, rows)).astype(np.int32)
    ends[::5] = starts[::5]  # empty windows
    ends[1::7] = kv_len + 5  # windows clipped at the end
    table = base.kwargs["block_tables"]
    kv = base.kwargs["kv_cache"]
    slots = (table[0, np.arange(kv_len) // 64].astype(np.int64) * 64 + np.arange(kv_len) % 64)
    data, ks = layouts.get("aiter-fp8-kv").gather(kv, slots=slots, num_blocks=kv.shape[0], block_size=64)
    qv = lc.bf16_values(lc.rng_for(seed + 2), (rows, heads, 128))
    qs = (np.abs(qv).max(axis=2, keepdims=True).clip(1e-10) / np.float32(448.0)).astype(np.float32)
    q = oracle.encode_e4m3((qv / qs).astype(np.float32), "fn")
    w = (lc.bf16_values(lc.rng_for(seed + 3), (rows, heads), 0.1) * np.float32(2.0**-8)).astype(np.float32)
    lo, hi = np.maximum(starts, 0), np.clip(ends, 0, kv_len)
    paged = (q.reshape(rows, 1, heads, 128), kv, w, hi.astype(np.int32), np.repeat(table, rows, axis=0), kv_len)
    kwargs = dict(q_fp8=q, kv_fp8=np.ascontiguousarray(data), kv_scales=np.ascontiguousarray(ks), weights=w,
                  cu_starts=starts, cu_ends=ends)
    return Fp8RaggedCase(kwargs, paged, lo)


def fp8_ragged_scored(case: Fp8RaggedCase, *, variant: str = "fn",
                      scorer: Callable[..., ScoredLogits] = pa_mqa_logits_fp8_scored) -> ScoredLogits:
    """The oracle's answer (any qk summation order in the bound), the codes read as ``variant``;
    ``scorer``: ``pa_mqa_logits_fp8_scored`` or a caller's wrapper of it (one on a device)."""
    scored = scorer(*case.paged, bound_model=ANY_ORDER, variant=variant)
    kv_len = scored.window.shape[1]
    window = scored.window & (np.arange(kv_len)[None, :] >= case.starts[:, None])
    value = np.where(window, scored.value, -np.inf)
    bound = np.where(window, scored.bound, 0.0)
    emulated = np.where(window, scored.emulated, np.float32(-np.inf)).astype(np.float32)
    return dataclasses.replace(scored, value=value, bound=bound, window=window, emulated=emulated)
