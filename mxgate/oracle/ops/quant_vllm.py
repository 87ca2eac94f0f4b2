"""vLLM PR #42908's ROCm MXFP4 quantizer (``_quantize_mxfp4_pair`` and the pure-Triton ROCm
branch of ``_fp32x2_to_fp4x2`` in ``deepseek_v4_ops/fused_indexer_q.py``) as a profile, and the
two kernels that use it, each with its front end configured as an exact identity so that what
is judged is the quantizer and the store:

* ``indexer_q_mxfp4`` models ``fused_indexer_q_rope_quant(..., use_fp4=True)``
  (``_fused_indexer_q_rope_mxfp4_kernel``) at positions whose cos/sin row is (1, 0): dims 0..63
  (NoPE) are quantized as loaded; the last 64 dims are GPT-J pairs (2i, 2i+1) with
  r_even = fl(x_even * 1 - fl(x_odd * 0)) and r_odd = fl(x_odd * 1 + fl(x_even * 0)) (so a
  non-finite partner makes the value NaN; an fma contraction gives the same bits, x * 1 being
  exact), rounded to bf16 and back (exact: bf16 in). weights_out = fl(fl(w * softmax_scale) *
  head_scale).
* ``k_insert_mxfp4`` models ``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn`` launched
  with COMPRESS_RATIO 1, OVERLAP 0, one state row per token whose score is 0 (softmax of one
  element: 1), RMSNorm weight 2^50 and epsilon 2^100 (fl(var + 2^100) = 2^100 while
  |x| < 2^36, rsqrt = 2^-50, so normed = fl(fl(x * 2^-50) * 2^50) = x for |x| >= 2^-76) and
  cos/sin (1, 0) on every pair (the NoPE pairs get the masked loads' 1.0 / 0.0 too), then the
  same quantizer, into the ``vllm-fp4-indexer-k`` layout at ``slots`` (slot < 0: nothing).
  Its domain: finite bf16 with |x| = 0 or 2^-60 <= |x| < 2^36 (ValueError otherwise).

The quantizer's rule (profile ``vllm-rocm``), read from the code and measured (docs/findings/vllm.md):
  amax = max-num of |x| over the 32 values (a NaN does not reach it), floored at 6*2^-126;
  e = ceil(log2(amax * fl(1/6))) clamped to [-127, 127]; byte = e + 127; x is multiplied by 2^-e;
  code = thresholds >0.25, >=0.75, >1.25, >=1.75, >2.5, >=3.5, >5 (half to even, saturating at
  6), sign bit = (x < 0): -0.0 gives 0x0 while -0.1 gives 0x8; NaN gives 0x0 (every comparison
  is false); an Inf amax gives byte 254 (the clamp), not 0xFF.
The profile's scale policy is the bitwise ceil_pow2 ("rceil"): both kernels quantize bf16
values (the K kernel rounds to bf16 first), and for a bf16 amax, amax * fl(1/6) is either a
power of two or at least 2^-8 (relative) away from one, where ceil(log2f(.)) and the bitwise
ceil_pow2 give the same byte (tests/test_vllm_oracle.py checks every bf16 amax); "rceil" also
takes an Inf amax through the clamp to 254 as the kernel does.
"""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.oracle import layouts as _layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import HEAD_DIM, ROPE_DIM
from mxgate.oracle.scorers import common as v
from mxgate.oracle.profiles_vllm import PROFILE_NAME, VLLM_ROCM  # noqa: F401 - the quantizer's rule

K_DOMAIN = (2.0**-60, 2.0**36)  # |x| range (besides 0) where the K front end is an exact identity


def profile(name: str | _profiles.Profile = PROFILE_NAME) -> _profiles.Profile:
    """A profile by name (``vllm-rocm`` included, registered above)."""
    return _profiles.get(name)


def indexer_q_mxfp4(x_bf16: np.ndarray, weights: np.ndarray, softmax_scale: float, head_scale: float, *,
                    profile_: str | _profiles.Profile = PROFILE_NAME) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Q kernel with the identity rotation: x_bf16 uint16 [T, H, 128] (bf16 bits), weights
    float32 [T, H] -> (packed uint8 [T, H, 64], e8m0 uint8 [T, H, 4], weights_out float32 [T, H])."""
    bits = v.bf16_bits(x_bf16, "x_bf16")
    if bits.ndim != 3 or bits.shape[2] != HEAD_DIM:
        raise ValueError(f"x_bf16 must have shape [T, H, 128], got {bits.shape}")
    w = v.float32(weights, "weights")
    if w.shape != bits.shape[:2]:
        raise ValueError(f"weights must have shape {bits.shape[:2]}, got {w.shape}")
    ss = v.real_f32(softmax_scale, "softmax_scale")
    hs = v.real_f32(head_scale, "head_scale")
    x = oracle.bf16_to_f32(bits)
    x = _identity_rope(x, first_pair=(HEAD_DIM - ROPE_DIM) // 2)
    packed, e8m0 = oracle.quantize_mx(np.ascontiguousarray(x), profile(profile_))
    with np.errstate(over="ignore", invalid="ignore"):
        w_out = (w * ss).astype(np.float32) * hs
    return packed, e8m0, w_out.astype(np.float32)


def k_insert_mxfp4(k_bf16: np.ndarray, slots: np.ndarray, cache: np.ndarray, *, block_size: int = 64,
                   profile_: str | _profiles.Profile = PROFILE_NAME) -> np.ndarray:
    """The K insert kernel with identity compress / norm / rope: k_bf16 uint16 [T, 128], slots
    int [T], cache uint8 [num_blocks, page_bytes] (vllm-fp4-indexer-k) -> a written copy."""
    bits = v.bf16_bits(k_bf16, "k_bf16")
    if bits.ndim != 2 or bits.shape[1] != HEAD_DIM:
        raise ValueError(f"k_bf16 must have shape [T, 128], got {bits.shape}")
    x = oracle.bf16_to_f32(bits)
    check_k_domain(x)
    with np.errstate(under="ignore"):
        normed = (x * np.float32(2.0**-50)).astype(np.float32) * np.float32(2.0**50)
    normed = _identity_rope(normed.astype(np.float32), first_pair=0)
    normed = oracle.bf16_to_f32(oracle.bf16_bits(normed))  # the kernel's bf16 round trip
    packed, e8m0 = oracle.quantize_mx(np.ascontiguousarray(normed), profile(profile_))
    out = np.array(cache, copy=True)
    layout = _layouts.get("vllm-fp4-indexer-k")
    s = v.integers(slots, "slots", 1)
    if s.shape[0] != bits.shape[0]:
        raise ValueError(f"slots must have one entry per row ({bits.shape[0]}), got {s.shape[0]}")
    return layout.scatter(out, packed, e8m0, slots=s.astype(np.int64), block_size=block_size)


def check_k_domain(x: np.ndarray) -> None:
    """ValueError unless every value is 0 or finite with 2^-60 <= |x| < 2^36."""
    a = np.abs(x.astype(np.float64))
    bad = ~np.isfinite(a) | ((a != 0) & ((a < K_DOMAIN[0]) | (a >= K_DOMAIN[1])))
    if bad.any():
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise ValueError(f"k_bf16 must hold 0 or finite values with 2^-60 <= |x| < 2^36 (where the K kernel's "
                         f"compress/norm/rope front end is an exact identity); got {float(x[i])!r} at {i}")


def _identity_rope(x: np.ndarray, first_pair: int) -> np.ndarray:
    """GPT-J pairs (2i, 2i+1), i >= first_pair, rotated by cos 1, sin 0 in IEEE float32."""
    out = x.copy()
    even = x[..., 2 * first_pair::2]
    odd = x[..., 2 * first_pair + 1::2]
    zero = np.float32(0.0)
    with np.errstate(invalid="ignore"):
        out[..., 2 * first_pair::2] = (even * np.float32(1.0)) - (odd * zero)
        out[..., 2 * first_pair + 1::2] = (odd * np.float32(1.0)) + (even * zero)
    return out
