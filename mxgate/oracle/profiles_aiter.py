"""Profiles of AITER's Triton quantizers and Python references (docs/findings/aiter.md).

They are registered whenever mxgate.oracle.profiles is imported (its last lines import this
module), so the set of profile names never depends on what else a process imported; the golden
vectors carry results for profiles.vector_names() only, the base table. Each is the semantics
read from the code and confirmed by the gate's run. All of them encode elements as ``aiter-py``
does (torchao's integer path), so each is written as its differences from that profile.
"""

from __future__ import annotations

from dataclasses import replace

from mxgate.oracle import profiles

EVIDENCE = "read + measured, docs/findings/aiter.md"
_REF_QUANT = "op_tests/test_quant_mxfp4.py ref_quant_mxfp4"
_E8M0_SCALE = "AITER fp4_utils.f32_to_mx_e8m0_scale"
# The reference clamps log2 of the scale to +-127 and maps a non-finite amax through that clamp.
_LOG2_CLAMPED = dict(exp_clamp=(0, 254), special_scale="clamped")


def _aiter_profile(name: str, shipped_by: str, **differences: object) -> profiles.Profile:
    made = replace(profiles.get("aiter-py"), name=name, shipped_by=shipped_by, evidence=EVIDENCE)
    return profiles.register(replace(made, **differences))


_aiter_profile(
    "aiter-even", "AITER Triton _mxfp4_quant_op (dynamic_mxfp4_quant, fused_flatten/rms_mxfp4_quant) and "
    f"{_REF_QUANT}(round_mode=2): EVEN scale, log2 clamped to +-127",
    scale_policy="even", amax_floor=None, **_LOG2_CLAMPED,
    notes="A block amax that rounds up to Inf (or is Inf) gives floor(log2(inf)) clamped to 127: byte 254.")
_aiter_profile(
    "aiter-ref-rceil", f"AITER {_REF_QUANT}(round_mode=1, the default): "
    "ceil_pow2(amax / 6) by division, a zero group scaled 2^-126, log2 clamped to +-127",
    scale_arithmetic="divide", **_LOG2_CLAMPED,
    notes="The 6*2^-126 amax floor stands for the reference's zero-group fill 2^-126: the same bytes except for amax "
          "2^-149, 2^-148 and 3*2^-149, whose quotient amax / 6 underflows to 0 and misses the fill (AITER gives 0x00 "
          "there, a known finding: docs/findings/aiter.md 5b).")
_aiter_profile(
    "aiter-ref-floor", f"AITER {_REF_QUANT}(round_mode=0): floor_pow2(amax) / 4, log2 clamped to +-127",
    scale_policy="floor", amax_floor=None, **_LOG2_CLAMPED)
_aiter_profile(
    "aiter-ref-ceil", f"AITER {_REF_QUANT}(round_mode=3): ceil_pow2(amax / 4), log2 clamped to +-127",
    scale_policy="ceil", amax_floor=2.0**-124, **_LOG2_CLAMPED,
    notes="The 2^-124 amax floor stands for the bitwise ceil of a subnormal amax / 4 (byte 1, as is a zero group); "
          "amax 2^-149 and 2^-148, whose quotient underflows to 0, give 0x00 in AITER (docs/findings/aiter.md 5b).")

# f32_to_mx_e8m0_scale's modes: (name, mode and what it computes, the profile's scale fields)
for _name, _mode, _scale in (
    ("aiter-py-floor", "mode=RoundDown): exponent field of amax / 4", dict(scale_policy="floor")),
    ("aiter-py-rceil", "mode=RoundUp, the default): ceil_pow2(amax / 6)", dict(scale_arithmetic="divide")),
    ("aiter-py-even", "mode=Even): (bits(amax) + 0x200000) & 0xFF800000, / 4", dict(scale_policy="even")),
    ("aiter-py-ceil", "mode=Ceil): ceil_pow2(amax / 4)", dict(scale_policy="ceil")),
):
    _aiter_profile(_name, f"{_E8M0_SCALE}({_mode}", amax_floor=None, **_scale)

_aiter_profile(
    "aiter-dsv4-act", "AITER op_tests/test_dsv4_rotate_quant.py fp4_act_quant: 2^ceil(log2(max(amax, 6*2^-126) "
    "* fl(1/6))), x / scale clamped to +-6, then f32_to_mxfp4", scale_policy="rceil_log2f",
    unverified=(*profiles.BASE_UNVERIFIED, profiles.LOG2F_SCALE),
    notes="torch.log2 modelled as a correctly rounded log2f.")
