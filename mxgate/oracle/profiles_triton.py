"""Profiles of Triton code as it was measured: triton_kernels' torch reference quantizer
(docs/findings/peers.md) and sglang's FP4 index scorers compiled for CUDA (docs/findings/sglang.md).

Registered whenever mxgate.oracle.profiles is imported (its last lines import this module), so
the set of profile names never depends on what else a process imported; like the AITER and vLLM
profiles it is not in the base table, so the golden vectors carry no results for it.
"""

from __future__ import annotations

import dataclasses

from mxgate.oracle import profiles

TRITON_KERNELS_ROUND_UP = profiles.register(profiles.derive(
    "triton-kernels-round-up",
    "triton-lang/triton python/triton_kernels numerics_details/mxfp.py downcast_to_mxfp_torch "
    "(DequantScaleRoundingMode.ROUND_UP, e8m0 scales)",
    scale_arithmetic="divide",
    amax_floor=None,
    nan_scale="inf",
    notes="byte = field of (bits(amax / max_q) + 0x7FFFFF) & 0x7F800000 (the bitwise ceil_pow2 of the quotient; a "
          "zero quotient gives byte 0 and a zero multiplier); elements multiplied by 1 / scale (exact: a power of "
          "two), encoded by bit manipulation with round to nearest even, saturating, NaN and Inf to +-6 with their "
          "sign. An Inf block's scale is +Inf: 1 / Inf = 0 zeroes its finite elements and turns the Inf into the "
          "default NaN (nan_scale 'inf'). A NaN amax overflows the sum into the sign and gives byte 0x00, where "
          "this profile gives 0xFF: a known finding (docs/findings/peers.md).",
    evidence="read + measured: downcast_to_mxfp_torch of triton-lang/triton 018a674f6d run by the "
             "triton-kernels-round-up backend, docs/findings/peers.md",
))

TRITON_KERNELS_ROUND_DOWN = profiles.register(dataclasses.replace(
    profiles.get("ocp"),
    name="triton-kernels-round-down",
    shipped_by="triton-lang/triton python/triton_kernels numerics_details/mxfp.py downcast_to_mxfp_torch "
               "(DequantScaleRoundingMode.ROUND_DOWN, e8m0 scales)",
    nan_scale="inf",
    scale0_divisor="one",
    notes="OCP's floor scale (its comment: 'follows the OCP standard'); the elements are multiplied by 1 / scale, "
          "taken as 0 where the scale is 0 or Inf: a byte-0 block (amax below 2^-124) gives zero codes, as a "
          "divisor of 1 does for elements that small (scale0_divisor 'one'), and a NaN or Inf block (byte 0xFF) "
          "gives zeros of its finite elements' signs (nan_scale 'inf'). The byte is the field of fl(amax / 4) "
          "(FP8: / 256), rounded before the floor: amax 0x017FFFFF gives byte 0x01 where floor(log2 amax) - 2 "
          "gives 0x00, a known finding (docs/findings/peers.md).",
    evidence="measured: downcast_to_mxfp_torch of triton-lang/triton 018a674f6d run by the triton-kernels-round-down "
             "backend; mxgate identify named nan_scale 'inf' and scale0_divisor 'one' (docs/findings/peers.md)",
    unverified=(),
))

SGLANG_CUDA_SCORER = profiles.register(dataclasses.replace(
    profiles.get("threshold"),
    name="sglang-cuda-scorer",
    shipped_by="sglang 0.5.23 fp4_index_logits_decode / fp4_index_logits_paged compiled by Triton for CUDA (the K cache "
    "quantized as sglang's default threshold rule does)",
    byte0="zero",
    notes="The kernel decodes each K scale byte as tl.exp2(byte - 127.0) (dsv4/fp4_indexer.py:411): compiled for "
          "CUDA, byte 0 gives 0, not 2^-127 (the approximate exp2 flushes the subnormal result, as far as the "
          "bytes show), so a group with K scale byte 0 scores 0. Under TRITON_INTERPRET=1 NumPy's exp2 gives "
          "2^-127; the interpreter cannot run these kernels correctly anyway (docs/findings/sglang.md section 8).",
    evidence="measured: mxgate identify --backend sglang-triton --device cuda on an H200 (torch 2.11.0+cu130, "
             "Triton 3.6.0): K scale byte 0 beside Q scale 2^123 scores 0x00000000 where 2^-127 gives 0x350e0000 "
             "(docs/findings/sglang.md section 11)",
))
