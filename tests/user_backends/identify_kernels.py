"""Kernels with planted rules for mxgate identify's tests and docs/identify.md.

Each planted kernel is the oracle under a declared profile with one field replaced (or a few:
``indexer_mul_add_fnuz_bitwise``), and it declares the unmodified profile: identify must name
exactly the planted fields. The indexer plants are the oracle's op
``indexer_qk_rope_quant_and_cache`` under the planted profile (writing its output buffers in
place); ``indexer_rsqrt_down`` runs it with the front-end envelope member ``rsqrt-down+fma``.
``indexer_bf16_only`` is the oracle's op refusing float32 inputs. ``inconsistent`` and
``inconsistent_indexer`` answer every other call under another tie rule. vLLM's quantizer plants
are the oracle's models of its Q kernel and K insert (``mxgate.oracle.ops.quant_vllm``) under
the planted profile; ``paged_kv_ties_even`` builds AITER's paged FP4 K cache with quantize_mx. (docs/identify.md's worked examples are kernels written by hand or from
the oracle's op, in the doc itself.)
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import profiles
from mxgate.oracle.ops import quant_vllm

INDEXER = OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE
VLLM_Q, VLLM_K = OpName.VLLM_INDEXER_Q_MXFP4, OpName.VLLM_FP4_INDEXER_K_STORE
PAGED_KV = OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4

# name -> (declared profile, planted fields, the ops the plant shows on)
PLANTS: dict[str, tuple[str, dict[str, object], tuple[str, ...]]] = {
    "ties_zero": ("gfx950", {"tie": "zero"}, ("e2m1.encode", "mx.quantize")),
    "ties_away": ("gfx950", {"tie": "away"}, ("e2m1.encode", "mx.quantize")),
    "zero_cleared": ("gfx950", {"zero_sign": "clear"}, ("e2m1.encode", "mx.quantize")),
    "nan_zero": ("gfx950", {"nan": "zero"}, ("e2m1.encode",)),
    "inf_neg6": ("gfx950", {"inf": "neg_max"}, ("e2m1.encode", "mx.quantize")),
    "floor_scale": ("gfx950", {"scale_policy": "floor"}, ("e8m0.scale", "mx.quantize")),
    # amax * fl(1/6) and amax / 6 give the same byte above the 6*2^-126 floor: planted without a floor
    "divide_scale": ("ml_dtypes", {"scale_arithmetic": "divide"}, ("e8m0.scale", "mx.quantize")),
    "no_floor": ("gfx950", {"amax_floor": None}, ("e8m0.scale", "mx.quantize")),
    "e4m3_nan_overflow": ("torch-cpu", {"fp8_overflow": "nan"}, ("e4m3fn.encode",)),
    "indexer_ties_zero": ("gfx950", {"tie": "zero"}, (INDEXER,)),
    "indexer_floor_scale": ("gfx950", {"scale_policy": "floor"}, (INDEXER,)),
    # the K front end and FP8 mode: fields the Q blocks cannot read, decided by the side probes
    "indexer_mul_add_fnuz_bitwise": ("gfx950", {"fma_contraction": False, "fp8_variant": "fnuz",
                                                "ue8m0_rounding": "bitwise"}, (INDEXER,)),
    "vllm_q_ties_zero": ("vllm-rocm", {"tie": "zero"}, (VLLM_Q,)),
    "vllm_k_zero_kept": ("vllm-rocm", {"zero_sign": "keep"}, (VLLM_K,)),
    "paged_kv_ties_even": ("argmin", {"tie": "even"}, (PAGED_KV,)),
}


def _functions(p: profiles.Profile) -> dict[str, object]:
    from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW

    return {
        "e2m1.encode": lambda x: oracle.encode_e2m1(x, p),
        "mx.quantize": lambda x: oracle.quantize_mx(x, p),
        "e8m0.scale": lambda amax: oracle.e8m0_scale(amax, p),
        "e4m3fn.encode": lambda x: oracle.encode_e4m3(x, "fn", saturate=SATURATE_OF_OVERFLOW[p.fp8_overflow]),
        INDEXER: _indexer(p),
        VLLM_Q: lambda x, w, softmax_scale, head_scale: quant_vllm.indexer_q_mxfp4(x, w, softmax_scale, head_scale,
                                                                                   profile_=p),
        VLLM_K: lambda k, slots, cache, block_size=64: quant_vllm.k_insert_mxfp4(k, slots, cache,
                                                                                 block_size=block_size, profile_=p),
        PAGED_KV: _paged_kv(p),
    }


def _paged_kv(p: profiles.Profile):
    def create_paged_preshuffle_kv_fp4(kv_bf16, kv_block_size, num_blocks, block_tables):
        """AITER's paged K builder: rows quantized under ``p``, written through the aiter-fp4-kv
        layouts at block_tables[b, t // block] * block + t % block; also the dense copies."""
        B, T, D = kv_bf16.shape
        packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(kv_bf16.reshape(-1, D)), p)
        t = np.arange(T)
        slots = (block_tables[:, t // kv_block_size].astype(np.int64) * kv_block_size + t % kv_block_size).reshape(-1)
        cache = oracle.layouts.get("aiter-fp4-kv").new_buffer(fill=0, num_blocks=num_blocks)
        scale = oracle.layouts.get("aiter-fp4-kv-scale").new_buffer(fill=0, num_blocks=num_blocks)
        oracle.layouts.get("aiter-fp4-kv").scatter(cache, packed, slots=slots)
        oracle.layouts.get("aiter-fp4-kv-scale").scatter(scale, e8m0, slots=slots)
        return cache, scale, packed.reshape(B, T, D // 2), e8m0.reshape(B, T, D // 32)

    return create_paged_preshuffle_kv_fp4


def _indexer(p: profiles.Profile, variant: str | None = None):
    def indexer_qk_rope_quant_and_cache(**kwargs) -> None:
        # the oracle writes the output buffers in place, as AITER's op does
        oracle.ops.indexer_qk_rope_quant_and_cache(**kwargs, profile=p, variant=variant)

    return indexer_qk_rope_quant_and_cache


def _planted(name: str):
    declared, changes, ops = PLANTS[name]
    functions = _functions(dataclasses.replace(profiles.get(declared), name=f"planted-{name}", **changes))
    return backend_from_functions(f"planted-{name}", *(kernel(op, functions[op], profile=declared) for op in ops))


ties_zero = _planted("ties_zero")
ties_away = _planted("ties_away")
zero_cleared = _planted("zero_cleared")
nan_zero = _planted("nan_zero")
inf_neg6 = _planted("inf_neg6")
floor_scale = _planted("floor_scale")
divide_scale = _planted("divide_scale")
no_floor = _planted("no_floor")
e4m3_nan_overflow = _planted("e4m3_nan_overflow")
indexer_ties_zero = _planted("indexer_ties_zero")
indexer_floor_scale = _planted("indexer_floor_scale")
indexer_mul_add_fnuz_bitwise = _planted("indexer_mul_add_fnuz_bitwise")
vllm_q_ties_zero = _planted("vllm_q_ties_zero")
vllm_k_zero_kept = _planted("vllm_k_zero_kept")
paged_kv_ties_even = _planted("paged_kv_ties_even")
# rsqrtf one ulp below the correctly rounded value: an envelope member, no profile field
indexer_rsqrt_down = backend_from_functions(
    "planted-indexer-rsqrt-down", kernel(INDEXER, _indexer(profiles.get("gfx950"), "rsqrt-down+fma"), profile="gfx950"))

_calls = itertools.count()


def _flip_flop(x: np.ndarray) -> np.ndarray:
    # even calls round ties to even, odd calls toward zero: the same input, two answers
    tie = "even" if next(_calls) % 2 == 0 else "zero"
    return oracle.encode_e2m1(x, dataclasses.replace(profiles.get("gfx950"), tie=tie))


# amax * fl(1/6) against amax / 6 under gfx950's floor: no probe can tell them apart
divide_with_floor = backend_from_functions(
    "divide-with-floor", kernel("e8m0.scale", _functions(dataclasses.replace(
        profiles.get("gfx950"), name="planted-divide-with-floor", scale_arithmetic="divide"))["e8m0.scale"],
        profile="gfx950"))
inconsistent = backend_from_functions("inconsistent", kernel("e2m1.encode", _flip_flop, profile="gfx950"))


def _bf16_only(**kwargs) -> None:
    # a kernel built for bf16 alone: the float32 side calls are refused
    if np.asarray(kwargs["q"]).dtype != np.uint16:
        raise TypeError(f"q must be bf16, got {np.asarray(kwargs['q']).dtype}")
    oracle.ops.indexer_qk_rope_quant_and_cache(**kwargs, profile="gfx950")


indexer_bf16_only = backend_from_functions("indexer-bf16-only", kernel(INDEXER, _bf16_only, profile="gfx950"))


def _flip_flop_indexer(**kwargs) -> None:
    tie = "even" if next(_calls) % 2 == 0 else "zero"
    oracle.ops.indexer_qk_rope_quant_and_cache(**kwargs, profile=dataclasses.replace(profiles.get("gfx950"), tie=tie))


inconsistent_indexer = backend_from_functions("inconsistent-indexer", kernel(INDEXER, _flip_flop_indexer,
                                                                             profile="gfx950"))
