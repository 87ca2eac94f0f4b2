"""Profiles of AITER's Triton quantizers and Python references (docs/findings/aiter.md).

They are registered whenever mxgate.oracle.profiles is imported (its last lines import this
module), so the set of profile names never depends on what else a process imported; the golden
vectors carry results for profiles.vector_names() only, the base table. Each is the semantics read from the code and confirmed by the gate's run.
"""

from __future__ import annotations

from dataclasses import replace

from mxgate.oracle import profiles

_PROFILES = profiles._PROFILES  # the registry names() and get() read
NAMES: list[str] = []


def _aiter_profile(name: str, shipped_by: str, **fields: object) -> None:
    made = replace(profiles.get("aiter-py"), name=name, shipped_by=shipped_by, **fields)
    taken = _PROFILES.get(name)
    if taken is not None and taken != made:
        raise ValueError(f"profile name {name!r} is taken by another profile")
    _PROFILES[name] = made
    NAMES.append(name)


_aiter_profile(
    "aiter-even", "AITER Triton _mxfp4_quant_op (dynamic_mxfp4_quant, fused_flatten/rms_mxfp4_quant) and "
    "op_tests/test_quant_mxfp4.py ref_quant_mxfp4(round_mode=2): EVEN scale, log2 clamped to +-127",
    scale_policy="even", amax_floor=None, exp_clamp=(0, 254), special_scale="clamped",
    notes="A block amax that rounds up to Inf (or is Inf) gives floor(log2(inf)) clamped to 127: byte 254.")
_aiter_profile(
    "aiter-ref-rceil", "AITER op_tests/test_quant_mxfp4.py ref_quant_mxfp4(round_mode=1, the default): "
    "ceil_pow2(amax / 6) by division, a zero group scaled 2^-126, log2 clamped to +-127",
    scale_arithmetic="divide", exp_clamp=(0, 254), special_scale="clamped",
    notes="The 6*2^-126 amax floor stands for the reference's zero-group fill 2^-126 (same bytes).")
_aiter_profile(
    "aiter-ref-floor", "AITER op_tests/test_quant_mxfp4.py ref_quant_mxfp4(round_mode=0): floor_pow2(amax) / 4, "
    "log2 clamped to +-127", scale_policy="floor", amax_floor=None, exp_clamp=(0, 254), special_scale="clamped")
_aiter_profile(
    "aiter-ref-ceil", "AITER op_tests/test_quant_mxfp4.py ref_quant_mxfp4(round_mode=3): ceil_pow2(amax / 4), "
    "log2 clamped to +-127", scale_policy="ceil", amax_floor=2.0**-124, exp_clamp=(0, 254), special_scale="clamped",
    notes="The 2^-124 amax floor stands for the bitwise ceil of a subnormal amax / 4 (byte 1, as is a zero group).")
_aiter_profile(
    "aiter-py-floor", "AITER fp4_utils.f32_to_mx_e8m0_scale(mode=RoundDown): exponent field of amax / 4",
    scale_policy="floor", amax_floor=None)
_aiter_profile(
    "aiter-py-rceil", "AITER fp4_utils.f32_to_mx_e8m0_scale(mode=RoundUp, the default): ceil_pow2(amax / 6)",
    scale_arithmetic="divide", amax_floor=None)
_aiter_profile(
    "aiter-py-even", "AITER fp4_utils.f32_to_mx_e8m0_scale(mode=Even): (bits(amax) + 0x200000) & 0xFF800000, / 4",
    scale_policy="even", amax_floor=None)
_aiter_profile(
    "aiter-py-ceil", "AITER fp4_utils.f32_to_mx_e8m0_scale(mode=Ceil): ceil_pow2(amax / 4)",
    scale_policy="ceil", amax_floor=None)
_aiter_profile(
    "aiter-dsv4-act", "AITER op_tests/test_dsv4_rotate_quant.py fp4_act_quant: 2^ceil(log2(max(amax, 6*2^-126) "
    "* fl(1/6))), x / scale clamped to +-6, then f32_to_mxfp4", scale_policy="rceil_log2f",
    notes="torch.log2 modelled as a correctly rounded log2f.")
