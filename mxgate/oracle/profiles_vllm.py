"""The profile of vLLM PR #42908's ROCm MXFP4 quantizer branch (docs/findings/vllm.md).

Registered with mxgate.oracle.profiles whenever that module is imported (its last lines import
this one), so the set of profile names never depends on what else a process imported; the
golden vectors carry results for profiles.vector_names() only.
"""

from __future__ import annotations

from mxgate.oracle import profiles as _profiles

PROFILE_NAME = "vllm-rocm"

VLLM_ROCM = _profiles.register(_profiles.derive(
    PROFILE_NAME,
    ("vLLM PR #42908 ROCm branch of _fp32x2_to_fp4x2 with _quantize_mxfp4_pair / the MXFP4 K insert "
     "(deepseek_v4_ops/fused_indexer_q.py, fused_compress_quant_cache.py)"),
    zero_sign="if_negative",
    nan="zero",
    exp_clamp=(0, 254),
    amax_nan="ignore",
    special_scale="clamped",
    notes=("Thresholds with (x < 0) as the sign: ties to even, -0.0 -> 0x0, small negatives -> 0x8, NaN -> 0x0; "
           "scale 2^ceil(log2(amax*fl(1/6))) clamped to [-127, 127], Inf amax -> byte 254. Measured under "
           "Triton 3.9's interpreter (docs/findings/vllm.md)."),
    evidence="read + measured under Triton 3.9's interpreter, docs/findings/vllm.md",
))
