"""Profiles of peer implementations run by the peer tier (docs/findings/peers.md).

profiles.py puts them in its table (the golden vectors carry a result for each), after the
profiles written there; this module builds them with profiles.derive, so it is imported by
profiles.py before its table is complete and must not look any profile up.
"""

from __future__ import annotations

from mxgate.oracle import profiles as _profiles

_TORCH_PROBED = "the torch backend probes its own casts at start and declares the profile that matches"

# torch's eager float8_e4m3fn casts saturate from 2.13 on (pytorch#178817) and did not before; the
# bf16 NaN differs by device. Every (overflow, bf16 NaN) pair the backend can probe has a profile.
TORCH_CUDA_SATURATING = _profiles.derive(
    "torch-cuda-saturating",
    "torch >= 2.13 CUDA casts: float8_e4m3fn saturates finite overflow and Inf, bf16 NaN is 0x7FFF",
    unverify=_profiles.Unverified("bf16_nan", "SPEC 1.4: the CUDA bf16 NaN of torch 2.13 is not measured here "
                                  "(0x7FFF was measured with torch 2.11)"),
    fp8_overflow="saturate",
    bf16_nan="canonical",
    notes=_TORCH_PROBED + ".",
    evidence="read: pytorch#178817 (eager saturation from 2.13); the CPU cast of torch 2.13 measured here",
)
TORCH_CPU_NONSATURATING = _profiles.derive(
    "torch-cpu-nonsaturating",
    "torch <= 2.12 CPU casts: float8_e4m3fn overflow and Inf give NaN (0x7F/0xFF), bf16 NaN is 0xFFFF",
    unverify=_profiles.Unverified("bf16_nan", "SPEC 1.4: the CPU bf16 NaN before torch 2.13 is not measured here"),
    bf16_nan="all_ones",
    notes=_TORCH_PROBED + ".",
    evidence="read: pytorch#178817 (eager casts did not saturate before 2.13)",
)

# (float8_e4m3fn overflow rule, bf16 NaN rule) -> the torch profile with those fields
TORCH_CAST_PROFILES: dict[tuple[str, str], str] = {
    ("saturate", "all_ones"): "torch-cpu",
    ("nan", "canonical"): "torch-cuda",
    ("saturate", "canonical"): TORCH_CUDA_SATURATING.name,
    ("nan", "all_ones"): TORCH_CPU_NONSATURATING.name,
}

_UNVERIFIED_ARITHMETIC = _profiles.Unverified(
    "scale_arithmetic", "SPEC 3.3: whether the kernels feeding cvt.rp.satfinite.ue8m0x2 form amax/6 by a division or "
    "a multiply by fl(1/6) is not read here", admitted=("reciprocal",))

NVIDIA_UE8M0 = _profiles.derive(
    "nvidia-ue8m0",
    "NVIDIA sm_100 cvt.rp.satfinite.ue8m0x2.f32 scales (vLLM, DeepGEMM, FlashInfer, TransformerEngine MX "
    "quantizers on Blackwell) with cvt.rn.satfinite.e2m1x2.f32 elements",
    unverify=_UNVERIFIED_ARITHMETIC,
    nan="pos_max",
    scale_policy="rceil_exact",
    scale_arithmetic="divide",
    amax_floor=None,
    special_scale="satfinite",
    fp8_overflow="satfinite",
    notes="cvt.rp rounds amax/6 up to a power of two exactly: a subnormal v <= 2^-127 gives byte 0; satfinite sends "
          "+Inf to 0xFE and keeps NaN 0xFF. No sm_100 here: the rule is read, not measured.",
    evidence="read: PTX ISA cvt (.rp, .satfinite, .ue8m0x2); torchao mx_tensor.py _to_mx_rceil (the instruction and "
             "its eager fallback: NaN 255, Inf 254, subnormals 0)",
)

_TORCHAO_TO_MX = "torchao 0.18 prototype.mx_formats.mx_tensor.to_mx(x, torch.float4_e2m1fn_x2, 32, {mode}) on the CPU"
TORCHAO_RCEIL = _profiles.derive(
    "torchao-rceil",
    _TORCHAO_TO_MX.format(mode="ScaleCalculationMode.RCEIL") + " (the eager fallback of _to_mx_rceil)",
    unverify=_profiles.LOG2F_SCALE,
    nan="torchao_bits",
    scale_policy="rceil_log2f",
    scale_arithmetic="divide",
    amax_floor=None,
    special_scale="satfinite",
    scale0_divisor="one",
    notes="byte = clamp(ceil(torch.log2(amax / 6)), -127, 127) + 127, NaN 255, Inf 254; the elements are multiplied "
          "by 2^(127 - byte), except byte 0 (by 1.0) and 254 (2^-127), clamped to +-6 and encoded by "
          "f32_to_f4_unpacked. torch.log2 on this CPU equals a correctly rounded log2f near every power of two "
          "(tests/test_profile_peers.py).",
    evidence="read + measured: torchao 0.18 to_mx on the CPU, docs/findings/peers.md",
)
TORCHAO_FLOOR = _profiles.derive(
    "torchao-floor",
    _TORCHAO_TO_MX.format(mode="ScaleCalculationMode.FLOOR"),
    nan="torchao_bits",
    scale_policy="floor",
    amax_floor=None,
    special_scale="inf_field",
    scale0_divisor="min_normal",
    nan_scale="inf",
    notes="byte = field(amax) - 2 clamped to [0, 255] (Inf: 253), NaN 255; the elements are divided by the byte's "
          "float (bits byte << 23: byte 255 is +Inf) clamped below to 2^-126, then encoded by f32_to_f4_unpacked.",
    evidence="read + measured: torchao 0.18 to_mx on the CPU, docs/findings/peers.md",
)

ONNX = _profiles.derive(
    "onnx",
    "ONNX FLOAT4E2M1 / FLOAT8E4M3FN Cast with saturate=1 as its spec states it (docs/docsgen/source/technical/float4.md)",
    nan="pos_max",
    fp8_overflow="saturate",
    notes="E2M1: round to nearest even, +-0 kept, |x| > 6 and +-Inf to +-6, NaN to 6 (0x7) whatever its sign: "
          "cuda-satfinite's element rule; ONNX's pre-ml_dtypes reference float32_to_float4e2m1_unpacked is the same.",
    evidence="read: onnx docs/docsgen/source/technical/float4.md and onnx/subbyte.py before commit 5039239a2 "
             "(2025-07-02); measured: the onnx reference Cast, docs/findings/peers.md",
)

PEER_PROFILES = (TORCH_CUDA_SATURATING, TORCH_CPU_NONSATURATING, NVIDIA_UE8M0, TORCHAO_RCEIL, TORCHAO_FLOOR, ONNX)
