"""Kernels of the ops identify probes beyond the encoders, for tests/test_identify_readers.py:
the decoders, the page68 reader, AITER's Q scale shuffle and the scorers. Each ``*_ok`` backend is the oracle's function
(identify must name its declared profile, exit 0); each planted one breaks one rule the oracle
does not have, or one profile field, and declares the unmodified profile:

- ``decode_saturating``: e4m3fn codes 0x7F / 0xFF decode as +-448 instead of NaN;
- ``gather_scales_reversed``: the page68 reader returns each slot's four scale bytes reversed;
- ``shuffle_heads_swapped``: the Q scale shuffle writes heads 0 and 1 in each other's place;
- ``scorer_byte0_zero``: AITER's FP4 scorer with e8m0 byte 0 read as 0.0 (a profile field);
- ``scorer_scaled``: AITER's FP4 scorer whose logits are 1% too large (no field explains it);
- ``topk_only``: a top-k kernel answering column 0 k times.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import profiles, scorers
from mxgate.oracle.scorers import vllm as lv

GFX950 = profiles.get("gfx950")
BYTE0_ZERO = dataclasses.replace(GFX950, name="planted-byte0-zero", byte0="zero")


def _gather(cache: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return oracle.layouts.get("sglang-page68").gather(cache, slots=slots)


def _ragged(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke, *, clean_logits=True,
            knobs=None) -> np.ndarray:
    return lv.fp4_ragged_logits(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke, profile=GFX950)


def _topk(q_fp4, q_e8m0, kv_cache, weights, context_lens, block_tables, max_context_len, topk, *,
          block_size=64) -> np.ndarray:
    return np.zeros((weights.shape[0], topk), np.int32)


def _decode_saturating(codes: np.ndarray) -> np.ndarray:
    values = oracle.decode_e4m3(codes, "fn")
    return np.where((codes & 0x7F) == 0x7F, np.where(codes & 0x80, np.float32(-448), np.float32(448)), values)


def _gather_reversed(cache: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    packed, e8m0 = _gather(cache, slots)
    return packed, np.ascontiguousarray(e8m0[:, ::-1])


def _shuffle(scale: np.ndarray) -> np.ndarray:
    """AITER's dsv4_shuffle_scale as the oracle's aiter-fp4-q-scale layout places the bytes."""
    layout = oracle.layouts.get("aiter-fp4-q-scale")
    tokens, heads = scale.shape[:2]
    out = layout.new_buffer(fill=0, num_tokens=tokens, num_heads=heads)
    layout.scatter(out, scale, num_heads=heads)
    return out


def _shuffle_swapped(scale: np.ndarray) -> np.ndarray:
    return _shuffle(np.ascontiguousarray(scale[:, [1, 0] + list(range(2, scale.shape[1]))]))


def _fp4_scorer(profile):
    return lambda **kwargs: scorers.pa_mqa_logits_fp4(**kwargs, profile=profile)


def _scaled(**kwargs) -> np.ndarray:
    return (scorers.pa_mqa_logits_fp4(**kwargs) * np.float32(1.01)).astype(np.float32)


_FLIP_CALLS = [0]


def _flip_every_other_call(**kwargs) -> np.ndarray:
    """The oracle's logits, 1% larger on every second call: one input, two answers."""
    _FLIP_CALLS[0] += 1
    logits = scorers.pa_mqa_logits_fp4(**kwargs)
    return (logits * np.float32(1.01)).astype(np.float32) if _FLIP_CALLS[0] % 2 == 0 else logits


def _gfx950(op: str, function) -> object:
    return kernel(op, function, profile="gfx950")


readers_ok = backend_from_functions(
    "readers-ok",
    _gfx950(OpName.E2M1_DECODE, oracle.decode_e2m1),
    _gfx950(OpName.E4M3FN_DECODE, lambda codes: oracle.decode_e4m3(codes, "fn")),
    _gfx950(OpName.SGLANG_PAGE68_GATHER, _gather),
    _gfx950(OpName.AITER_DSV4_SHUFFLE_SCALE, _shuffle),
    _gfx950(OpName.PA_MQA_LOGITS_FP4_DECODE, _fp4_scorer(GFX950)),
    _gfx950(OpName.VLLM_FP4_MQA_LOGITS, _ragged))
decode_saturating = backend_from_functions("decode-saturating", _gfx950(OpName.E4M3FN_DECODE, _decode_saturating))
gather_scales_reversed = backend_from_functions("gather-scales-reversed",
                                                _gfx950(OpName.SGLANG_PAGE68_GATHER, _gather_reversed))
shuffle_heads_swapped = backend_from_functions("shuffle-heads-swapped",
                                               _gfx950(OpName.AITER_DSV4_SHUFFLE_SCALE, _shuffle_swapped))
scorer_byte0_zero = backend_from_functions("scorer-byte0-zero",
                                           _gfx950(OpName.PA_MQA_LOGITS_FP4_DECODE, _fp4_scorer(BYTE0_ZERO)))
scorer_scaled = backend_from_functions("scorer-scaled", _gfx950(OpName.PA_MQA_LOGITS_FP4_DECODE, _scaled))
scorer_flipping = backend_from_functions("scorer-flipping",
                                         _gfx950(OpName.PA_MQA_LOGITS_FP4_DECODE, _flip_every_other_call))
topk_only = backend_from_functions("topk-only", _gfx950(OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK, _topk))
