"""Documented failures of shipped implementations (listed in docs/permitted-variations.md).

The gate records these as 'fail (known finding)' in the matrix and they count as failures for
the exit status. Only a run that passes ``--mxgate-xfail-known`` (``mxgate check --xfail-known``),
as this repository's own test command does, treats them as expected failures (pytest xfail); a
failure of any other (backend, op) pair stays red either way.
"""

from __future__ import annotations

from mxgate.op_table import OpName

# (backend, op) -> the finding, as verdicts and docs/permitted-variations.md state it
KNOWN_FINDINGS: dict[tuple[str, str], str] = {
    ("triton-mxfp", OpName.E2M1_ENCODE): (
        "triton.tools.mxfp.MXFP4Tensor pulls values within ~1e-6 of a midpoint to the even neighbour, on "
        "both sides (tie-break bias applied to every multi-element tensor), and does not saturate finite "
        "magnitudes above 2^25 (they encode as 2, 4 or +0); docs/permitted-variations.md, "
        "docs/results/diff-cpu-2026-12-01.md"
    ),
}

# AITER (docs/findings/aiter.md): _mxfp4_quant_op applies Python `not` to a tensor (quant.py:145-146),
# elementwise when compiled, one bool under TRITON_INTERPRET=1, where every nibble comes out +-6.
_AITER_NOT = ("AITER _mxfp4_quant_op applies `not` to a tensor (quant.py:145-146): under TRITON_INTERPRET=1 "
              "every nibble is +-6 (0x7/0xF), the scales are right; docs/findings/aiter.md")
KNOWN_FINDINGS.update({
    ("vllm-triton-fnuz", OpName.VLLM_FP8_PAGED_MQA_LOGITS): (
        "vLLM PR #42908's FNUZ path bitcasts K to tl.float8e4b15 (bias 15) while the bytes are e4m3fnuz (bias 8): "
        "every logit is 2^-7 of its value; docs/findings/vllm.md"),
    ("aiter-triton", OpName.MX_QUANTIZE): _AITER_NOT,
    ("aiter-triton", OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT): _AITER_NOT,
    ("aiter-triton", OpName.AITER_FUSED_RMS_MXFP4_QUANT): _AITER_NOT,
    ("aiter-reference", OpName.AITER_F32_TO_MX_E8M0_SCALE_CEIL): (
        "AITER f32_to_mx_e8m0_scale Ceil mode bumps the exponent of a subnormal amax/4 to byte 1 for every amax "
        "below 2^-124 (exact: byte 0); docs/findings/aiter.md"),
    ("aiter-reference", OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN): (
        "AITER f32_to_mx_e8m0_scale RoundDown divides amax by 4 in float32 first: amax 0x017FFFFF rounds up to "
        "2^-126 and gives byte 0x01 (exact floor: 0x00); docs/findings/aiter.md"),
    ("aiter-reference", OpName.MX_QUANTIZE): (
        "AITER ref_quant_mxfp4 (RoundUp) fills the scale of a group with amax == 0 with 2^-126 (byte 0x01) but takes "
        "log2 of fl(amax / 6): for amax 2^-149, 2^-148 and 3*2^-149 that quotient underflows to 0, log2 gives -inf, "
        "the clamp -127: byte 0x00, below the 0x01 of a zero group and of every larger subnormal amax (profile: "
        "0x01); docs/findings/aiter.md"),
    ("aiter-reference", OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0): (
        "AITER fp4_quant_e2m1_with_e8m0 (the scorer tests' input quantizer) gives a block whose amax is a NaN "
        "(+qNaN, -qNaN 0xFFC00001, payload 0x7F800001, 0xFFFFFFFF) scale byte 0x00 where the argmin profile gives "
        "0xFF; an Inf amax gives 0xFF; case nonfinite-blocks (expected 0xFF, got 0x00); docs/findings/aiter.md"),
    ("aiter-reference", OpName.AITER_REF_QUANT_MXFP4_CEIL): (
        "AITER ref_quant_mxfp4 (Ceil) fills the scale of a group with amax == 0 with 2^-126 (byte 0x01) but takes "
        "log2 of fl(amax / 4): for amax 2^-149 and 2^-148 that quotient underflows to 0, log2 gives -inf, the clamp "
        "-127: byte 0x00 (profile: 0x01, as for 3*2^-149 and 4*2^-149); docs/findings/aiter.md"),
    ("aiter-reference", OpName.AITER_F32_TO_MX_E8M0_SCALE_EVEN): (
        "AITER f32_to_mx_e8m0_scale Even adds 0x200000 to the bits: a NaN at or above 0x7FE00000 carries into "
        "the sign bit, becomes -0.0 and gives byte 0x00 (its docstring and the profile: 0xFF); "
        "docs/findings/aiter.md"),
})

# Peers (docs/findings/peers.md): their own defects, with the bytes there.
KNOWN_FINDINGS.update({
    ("microxcaling", OpName.E2M1_ENCODE): (
        "microxcaling rounds with floor(|y| + 0.5) in float32, which double-rounds: y = 0.25 - 1 ulp (0x3E7FFFFF) gives "
        "0.5 (code 0x1) where half away from zero gives 0x0; and 2**floor(log2|y|) overflows for |y| >= 0x7F7FFFD4 "
        "(log2 rounds to 128), which gives NaN; docs/findings/peers.md"),
    ("microxcaling", OpName.MX_QUANTIZE): (
        "microxcaling's _quantize_mx rounds each scaled element with floor(|y| + 0.5) in float32 (as its e2m1 "
        "encoder), which double-rounds: in a block of amax 6 (scale 2^0) 0.25 - 1 ulp gives code 0x1 where half "
        "away from zero gives 0x0; case midpoint-neighbour-block (packed byte (0, 0): expected 0x07, got 0x17); "
        "docs/findings/peers.md"),
    ("torchao-mx-rceil", OpName.MX_QUANTIZE): (
        "torchao RCEIL multiplies a NaN block by its NaN descale; where the element is a NaN too, torch's CPU multiply "
        "keeps the descale's NaN (the amax's, sign cleared): a -qNaN element gives 0x3 where the profile's nan_scale "
        "'nan' keeps the element's own NaN (0xB); docs/findings/peers.md"),
    ("onnx-reference", OpName.E2M1_ENCODE): (
        "onnx 1.23's reference Cast to FLOAT4E2M1 goes through ml_dtypes: +qNaN gives 0x8 and -qNaN 0x0, where ONNX's "
        "spec (technical/float4.md: NaN -> 6) and its earlier reference give 0x7; docs/findings/peers.md"),
    ("onnx-quantizelinear", OpName.E2M1_ENCODE): (
        "onnx 1.23's reference QuantizeLinear to FLOAT4E2M1 (scale 1.0, zero point 0) casts x / scale + zero_point "
        "through ml_dtypes as its Cast does: +qNaN gives 0x8 and -qNaN 0x0, where ONNX's spec (technical/float4.md: "
        "NaN -> 6) gives 0x7; docs/findings/peers.md"),
})

# triton_kernels' downcast_to_mxfp_torch (docs/findings/peers.md), one backend per rounding mode.
_TK_NAN_AMAX = ("triton_kernels downcast_to_mxfp_torch ROUND_UP adds 0x7FFFFF to the bits of amax / max_q: a NaN amax "
                "(0x7FC00000) carries into the sign, & 0x7F800000 leaves 0, so a NaN block gets scale byte 0x00 and "
                "multiplier 0 (finite elements +-0, the NaN element {nan}) where the profile gives 0xFF; "
                "docs/findings/peers.md")
_TK_ROUND_DOWN = ("triton_kernels downcast_to_mxfp_torch ROUND_DOWN (whose comment says it follows OCP) floors "
                  "fl(amax / {q}) by its bits, the quotient rounded first: {example}; docs/findings/peers.md")
KNOWN_FINDINGS.update({
    ("triton-kernels-round-up", OpName.MX_QUANTIZE): _TK_NAN_AMAX.format(nan="0x7, or 0xF for -NaN"),
    ("triton-kernels-round-up", OpName.MX_QUANTIZE_E4M3FN): _TK_NAN_AMAX.format(nan="0x7F, or 0xFF for -NaN"),
    ("triton-kernels-round-down", OpName.MX_QUANTIZE): _TK_ROUND_DOWN.format(
        q=4, example="amax 0x017FFFFF / 4 rounds up to 2^-126: byte 0x01 and code 0x6 (the exact floor(log2 amax) - 2: "
                     "0x00, code 0x7)"),
    ("triton-kernels-round-down", OpName.MX_QUANTIZE_E4M3FN): _TK_ROUND_DOWN.format(
        q=256, example="amax 0x047FFFFF / 256 rounds up to 2^-126: byte 0x01 and e4m3fn 0x78 (exact: 0x00, 0x7E)"),
})


# Known findings whose bytes cannot come back: the peer's output holds a value for which no code
# exists, so its adapter raises NotACode (mxgate.kernels.peers) instead of rounding it here.
# (backend, op) -> text the raised message must contain. Only that raise is the finding: any other
# fault of the pair (another exception, a crash, a hang) stays a fail under --xfail-known.
KNOWN_FAULTS: dict[tuple[str, str], str] = {
    ("microxcaling", OpName.E2M1_ENCODE): "the peer returned nan",
}


def expected_fault(backend: str, op: str, type_name: str, message: str) -> str | None:
    """The finding a raised op of (backend, op) is, or None: only an adapter's NotACode whose
    message holds the documented value."""
    from mxgate.kernels.peers import NotACode  # the worker reports the raised type by name

    needle = KNOWN_FAULTS.get((backend, op))
    if needle is None or type_name != NotACode.__name__ or needle not in message:
        return None
    return KNOWN_FINDINGS[(backend, op)]


# Findings seen on one device only: (backend, op, device) -> the finding, before the entries above.
DEVICE_FINDINGS: dict[tuple[str, str, str], str] = {}
_AITER_UINT8 = ("AITER _mxfp4_quant_op converts the float unbiased exponent to uint8 before adding 127 "
                "(quant.py: scale_e8m0_unbiased.to(tl.uint8) + 127); compiled on NVIDIA a negative float saturates "
                "to 0, so every block with amax < 4 gets scale byte 0x7F; and exp2(-127) flushes to 0, zeroing blocks "
                "with a non-finite amax (H200, docs/findings/aiter.md)")
for _op in (OpName.MX_QUANTIZE, OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT, OpName.AITER_FUSED_RMS_MXFP4_QUANT):
    DEVICE_FINDINGS[("aiter-triton", _op, "cuda")] = _AITER_UINT8
_HOPPER_FP8 = ("on Hopper an e4m3fn tl.dot with a float32 accumulator drops low bits on large tiles (GPU probe: "
               "127 products of 2^-16 beside 1.0 lost on a 64x64 tile), so ROCm FP8 scorers written for float32 "
               "MFMA accumulation leave the float32 bound on the H200; docs/results/h200-2026-12-01.md")
for _backend, _op in (("vllm-triton", OpName.VLLM_FP8_PAGED_MQA_LOGITS), ("aiter-triton", OpName.AITER_FP8_MQA_LOGITS),
                      ("aiter-triton", OpName.PA_MQA_LOGITS_FP8_DECODE)):
    DEVICE_FINDINGS[(_backend, _op, "cuda")] = _HOPPER_FP8


def finding(backend: str, op: str, device: str = "cpu") -> str | None:
    """The documented finding of (backend, op) on ``device``, or None."""
    return DEVICE_FINDINGS.get((backend, op, device)) or KNOWN_FINDINGS.get((backend, op))


# (backend, op) -> the measurements behind a finding, in Markdown (docs/permitted-variations.md)
DETAILS: dict[tuple[str, str], str] = {
    ("triton-mxfp", OpName.E2M1_ENCODE): """\
`MXFP4Tensor._from_float` finds the nearest E2M1 value by distance and breaks ties by subtracting
1e-6 from the distance of even-mantissa candidates. The bias is applied whenever the tensor has
more than one element, so a value *above* an odd-side midpoint by less than about 1e-6 (in scaled
units) is pulled to the even neighbour. Measured with triton 3.9.0 (torch 2.13 CPU):

| input (float32) | correct RNE code | MXFP4Tensor |
|---|---|---|
| 0.25 + 1 ulp (0x3E800001) | 0x1 (0.5) | 0x0 |
| 1.25 + 1 ulp (0x3FA00001) | 0x3 (1.5) | 0x2 |
| 2.5 + 1 ulp (0x40200001) | 0x5 (3) | 0x4 |
| 1.25 + 8 ulps | 0x3 | 0x3 |

On 2^20 N(0, 3^2) values it agreed everywhere (the window is a few ulps wide), which is why a
random test never sees it; the gate's midpoint-neighbour cases do. A one-element tensor rounds
correctly. Verdict: `fail` under `ocp` (the profile it declares) with this reason.
""",
}
