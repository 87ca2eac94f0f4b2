"""Element encoders and decoders: E2M1, E4M3FN/FNUZ, BF16 (SPEC sections 1-2, 4).

Every boundary class: all codes, midpoints +-1 ulp x sign, +-0, small negatives, subnormals,
saturation, Inf, NaN payloads, double-rounding traps, every bf16 pattern, seeded random data.
"""

from __future__ import annotations

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats import e2m1
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW
from mxgate.oracle import unverified as unv
from mxgate.vectors.families._builder import FamilyBuilder, Group, Outputs
from mxgate.inputs.bits import F32_INF, F32_MAX, NAN_PAYLOADS, bf16_patterns, bit, f32, is_nan_bits, negate, neighbours
from mxgate.inputs.samples import normal

NAME = "elements"
DESCRIPTION = "Element codecs: e2m1.encode/decode, e4m3fn/e4m3fnuz encode/decode, bf16.round"
SEED = 0x4D584701

E2M1_MIDPOINTS: list[float] = e2m1.MIDPOINTS.tolist()


def available() -> str | None:
    return None


def build(fb: FamilyBuilder) -> None:
    _e2m1_decode(fb)
    _e2m1_encode(fb)
    for variant in ("fn", "fnuz"):
        _e4m3_encode(fb, variant)
        _e4m3_decode(fb, variant)
    _bf16_round(fb)


# ---- E2M1 ---------------------------------------------------------------------------------


def _e2m1_decode(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.E2M1_DECODE, OpName.E2M1_DECODE, "All 16 E2M1 codes decode to their values; 0x8 is -0.0.",
                 ["codes"], ["values"])
    codes = np.arange(16, dtype=np.uint8)
    g.case("all-codes", "codes 0x0..0xF: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (0x8 = -0.0)",
           ["all-codes", "signed-zero", "subnormal", "BUGS-15"], {"codes": codes},
           lambda p: {"values": oracle.decode_e2m1(codes)}, tier="quick")


def _e2m1_case(g: Group, slug: str, comment: str, flags: list[str], patterns: list[int] | np.ndarray,
               tier: str = "default") -> None:
    x = f32(patterns)
    has_nan = bool(np.any(is_nan_bits(x.view(np.uint32))))
    if has_nan and "nan" not in flags:
        raise ValueError(f"{g.id}/{slug}: a case holding NaN must carry the 'nan' flag")

    def compute(p: _profiles.Profile) -> Outputs:
        return {"codes": oracle.encode_e2m1(x, p.name)}

    alternatives = _e2m1_nan_alternatives(x) if has_nan else None
    g.case(slug, comment, flags, {"x": x}, compute, tier=tier, alternatives=alternatives)


def _e2m1_nan_alternatives(x: np.ndarray):
    def alternatives(p: _profiles.Profile, out: Outputs):
        variants = unv.nan_variants(p)
        if not variants:
            return "", []
        # The exact model must agree with the fast oracle on the profile itself first.
        if not np.array_equal(unv.exact_encode_e2m1(x, p), out["codes"]):
            raise AssertionError(f"exact and fast oracle disagree on NaN codes under {p.name}")
        return unv.reason(p, "nan"), [(label, {"codes": unv.exact_encode_e2m1(x, v)}) for label, v in variants]

    return alternatives


def _e2m1_encode(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.E2M1_ENCODE, OpName.E2M1_ENCODE,
                 "float32 -> E2M1 code (one per element, no scaling) under each profile's tie, "
                 "zero-sign, saturation and NaN rules (SPEC 2).", ["x"], ["codes"])
    exact_values = [bit(float(v)) for v in oracle.decode_e2m1(np.arange(16, dtype=np.uint8))]
    _e2m1_case(g, "all-codes", "the 16 exactly representable values (incl. -0.0) encode to their own codes",
               ["all-codes", "signed-zero", "BUGS-15"], exact_values, tier="quick")
    quick = {(0.25, "pos"), (0.25, "neg"), (1.25, "neg"), (2.5, "pos"), (5.0, "pos"), (5.0, "neg")}
    for m in E2M1_MIDPOINTS:
        for sign in ("pos", "neg"):
            pats = neighbours(m)
            pats = pats if sign == "pos" else negate(pats)
            _e2m1_case(g, f"midpoint/{sign}-{m}",
                       f"{'-' if sign == 'neg' else ''}{m} (midpoint) and one float32 ulp below and above it: "
                       "ties decide the middle value (even, toward zero, away, or down)",
                       ["midpoint", "midpoint-neighbour", "BUGS-8", "BUGS-9"], pats,
                       tier="quick" if (m, sign) in quick else "default")
    _e2m1_case(g, "zero/signed", "+0.0 and -0.0: whether -0 keeps its sign (0x8) is a profile choice",
               ["signed-zero", "BUGS-17"], [0x00000000, 0x80000000], tier="quick")
    small = [bit(v) for v in (0.1, 0.2, 0.24999999, 1e-30, 2.0**-126)] + [bit(0.25) - 1]
    _e2m1_case(g, "underflow/negative", "small negatives that round to zero: 0x8 or 0x0 depending on the zero-sign rule",
               ["negative-underflow", "signed-zero", "BUGS-17"], negate(small), tier="quick")
    _e2m1_case(g, "underflow/positive", "small positives that round to +0", ["negative-underflow", "signed-zero"], small)
    subnormals = [1, 2, 3, 0x00400000, 0x007FFFFF]
    _e2m1_case(g, "subnormal/pos", "float32 subnormals (2^-149 .. largest): not flushed, encode to +0",
               ["subnormal", "signed-zero"], subnormals)
    _e2m1_case(g, "subnormal/neg", "negative float32 subnormals: -0 or +0 per the zero-sign rule",
               ["subnormal", "signed-zero", "negative-underflow", "BUGS-17"], negate(subnormals))
    top = [bit(v) for v in (6.0, 6.5, 7.0, 8.0, 12.0, 1e10)] + [bit(6.0) + 1, F32_MAX]
    _e2m1_case(g, "saturation/pos", "6 and above: every finite magnitude past 6 saturates to 6 (0x7)",
               ["saturation"], top, tier="quick")
    _e2m1_case(g, "saturation/neg", "-6 and below: saturate to -6 (0xF)", ["saturation"], negate(top))
    _e2m1_case(g, "inf", "+Inf and -Inf: saturate with sign (or 0xF for the argmin rule)", ["inf", "saturation"],
               [F32_INF, F32_INF | 0x80000000], tier="quick")
    _e2m1_case(g, "nan/payloads", "NaNs of both signs, quiet and signalling, with payloads (torchao's bit path "
               "depends on them)", ["nan", "BUGS-20"], NAN_PAYLOADS, tier="quick")
    # Double rounding: a float32 just off a midpoint whose bf16 (16 bits dropped) or fp16
    # (13 bits dropped) rounding lands exactly on the midpoint, creating a false tie.
    for m in E2M1_MIDPOINTS:
        base = bit(m)
        pats = [base + d for d in (0x7FFF, -0x7FFF, 0x8000, -0x8000, 0xFFF, -0xFFF, 0x1000)]
        _e2m1_case(g, f"double-rounding/{m}",
                   f"values beside {m} that bf16/fp16 rounding would turn into an exact tie; encoding directly "
                   "from float32 must not see a tie", ["double-rounding", "BUGS-6", "BUGS-10", "BUGS-13"],
                   pats + negate(pats), tier="quick" if m == 1.25 else "default")
    allbf = bf16_patterns()
    nan_mask = is_nan_bits(allbf)
    _e2m1_case(g, "exhaustive/bf16-finite", "every non-NaN bf16 bit pattern, as float32",
               ["exhaustive-source", "BUGS-11"], allbf[~nan_mask])
    _e2m1_case(g, "exhaustive/bf16-nan", "the 254 NaN bf16 bit patterns, as float32",
               ["exhaustive-source", "nan"], allbf[nan_mask])
    rng = fb.rng(1)
    gauss = (normal(rng, 4096) * 3.0).astype(np.float32).view(np.uint32)
    _e2m1_case(g, "random/normal", "4096 normal values (sigma 3), seeded", ["random"], gauss)
    raw = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).astype(np.uint32)
    raw = raw[~is_nan_bits(raw)]
    _e2m1_case(g, "random/bits", "random float32 bit patterns (NaNs removed), seeded", ["random"], raw)


# ---- E4M3 ---------------------------------------------------------------------------------


def _e4m3_compute(x: np.ndarray, variant: str):
    def compute(p: _profiles.Profile) -> Outputs:
        return {"codes": oracle.encode_e4m3(x, variant, saturate=SATURATE_OF_OVERFLOW[p.fp8_overflow])}

    return compute


def _e4m3_encode(fb: FamilyBuilder, variant: str) -> None:
    op = f"e4m3{variant}.encode"
    g = fb.group(op, op, f"float32 -> E4M3{variant.upper()} code, round to nearest even; overflow, Inf and NaN "
                 "per the profile's fp8_overflow (nan: AMD hardware; saturate; satfinite: NVIDIA)", ["x"], ["codes"])
    fam = ["fp8-encoding-family", "BUGS-14"]

    def case(slug: str, comment: str, flags: list[str], patterns, tier: str = "default") -> None:
        x = f32(patterns)
        g.case(slug, comment, flags + fam, {"x": x}, _e4m3_compute(x, variant), tier=tier)

    table = oracle.decode_e4m3(np.arange(256, dtype=np.uint8), variant)
    finite = [bit(float(v)) if not (float(v) == 0 and np.signbit(v)) else 0x80000000 for v in table if np.isfinite(v)]
    case("all-codes", "every finite code's value encodes to that code", ["all-codes", "signed-zero", "BUGS-16"],
         finite, tier="quick")
    mags = np.unique(np.abs(table[np.isfinite(table)]).astype(np.float64))
    mids = (mags[:-1] + mags[1:]) / 2  # exact in float64, and exact in float32 (one more bit)
    bias = 7 if variant == "fn" else 8
    for field in range(16):
        lo = 0.0 if field == 0 else 2.0 ** (field - bias)
        hi = 2.0 ** (field + 1 - bias) if field else 2.0 ** (1 - bias)
        sel = [m for m in mids if lo <= m < hi]
        if not sel:
            continue
        pats = [p for m in sel for p in neighbours(float(m))]
        case(f"midpoint/field-{field:02d}", f"midpoints of exponent field {field} (+-1 ulp, both signs)",
             ["midpoint", "midpoint-neighbour", "BUGS-8"] + (["subnormal"] if field == 0 else []),
             pats + negate(pats), tier="quick" if field == bias else "default")
    traps = []
    for m in (1.0625, 1.1875, 3.25, 0.2890625):
        base = bit(m)
        traps += [base + d for d in (1, -1, 0xFFF, -0xFFF, 0x7FFF, -0x7FFF)]
    case("double-rounding/fp16-bf16", "1.0625001 and friends: an fp16 or bf16 intermediate turns them into ties "
         "(1.0625001 -> 1.0 instead of 1.125)", ["double-rounding", "BUGS-10", "BUGS-12"], traps + negate(traps),
         tier="quick")
    top_value = 448.0 if variant == "fn" else 240.0
    next_value = 480.0 if variant == "fn" else 256.0
    tie = (top_value + next_value) / 2
    top = [bit(top_value), bit(top_value) + 1, bit(tie) - 1, bit(tie), bit(tie) + 1, bit(next_value), bit(1e6), F32_MAX]
    case("saturation", f"{top_value:g} (max), the tie {tie:g} with the next binade value, and beyond: NaN (AMD), "
         "or clamp (saturate/satfinite)", ["saturation"], top + negate(top), tier="quick")
    sub = 2.0 ** (-9 if variant == "fn" else -10)
    pats = [bit(sub), bit(sub / 2) - 1, bit(sub / 2), bit(sub / 2) + 1, bit(sub * 1.5), 1, 0x007FFFFF]
    case("subnormal", f"around the smallest subnormal {sub:g}: half of it ties to zero; float32 subnormals",
         ["subnormal", "signed-zero", "negative-underflow", "BUGS-16"], pats + negate(pats))
    case("zero", "+0 and -0: fn keeps -0 (0x80), fnuz has none (0x00)", ["signed-zero", "BUGS-16"],
         [0, 0x80000000], tier="quick")
    case("inf", "+Inf and -Inf", ["inf", "saturation"], [F32_INF, F32_INF | 0x80000000], tier="quick")
    case("nan", "NaN payloads of both signs: fn keeps the sign (0x7F/0xFF) except satfinite (0x7F); fnuz 0x80",
         ["nan"], NAN_PAYLOADS, tier="quick")
    case("exhaustive/bf16", "every bf16 bit pattern, as float32", ["exhaustive-source", "BUGS-11"], bf16_patterns())
    rng = fb.rng(2 if variant == "fn" else 3)
    vals = (normal(rng, 4096) * (top_value / 4)).astype(np.float32).view(np.uint32)
    case("random/normal", "4096 normal values across the format's range, seeded", ["random"], vals)


def _e4m3_decode(fb: FamilyBuilder, variant: str) -> None:
    op = f"e4m3{variant}.decode"
    g = fb.group(op, op, f"All 256 E4M3{variant.upper()} codes -> float32 (NaN compared as any NaN).",
                 ["codes"], ["values"], compare={"values": "nan_equal"})
    codes = np.arange(256, dtype=np.uint8)
    g.case("all-codes", "fn: 0x80 = -0.0, 0x7F/0xFF NaN, max 448 (0x7E); fnuz: 0x80 NaN, max 240 (0x7F)",
           ["all-codes", "signed-zero", "subnormal", "nan", "fp8-encoding-family", "BUGS-14", "BUGS-16"],
           {"codes": codes}, lambda p: {"values": oracle.decode_e4m3(codes, variant)}, tier="quick")


# ---- BF16 ---------------------------------------------------------------------------------


def _bf16_round(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.BF16_ROUND, OpName.BF16_ROUND, "float32 -> bf16 bits, round to nearest even at bit 16; NaN quieted "
                 "NaN per the profile's bf16_nan (sign | 0x7FC0, or 0xFFFF)", ["x"], ["bits"])

    def case(slug: str, comment: str, flags: list[str], patterns, tier: str = "default") -> None:
        x = f32(patterns)
        g.case(slug, comment, flags, {"x": x}, lambda p: {"bits": oracle.bf16_bits(x, p.name)}, tier=tier)

    ties = []
    for hi in (0x3F80, 0x3F81, 0x4000, 0x4001, 0x0080, 0x0001, 0x7F7F):
        base = hi << 16
        ties += [base | 0x8000, (base | 0x8000) - 1, (base | 0x8000) + 1, base | 0x7FFF]
    case("midpoint", "exact ties at bit 16 (even and odd bf16 below) and one ulp either side",
         ["midpoint", "midpoint-neighbour", "BUGS-13"], ties + negate(ties), tier="quick")
    case("zero-subnormal", "+-0 and float32 subnormals (not flushed)", ["signed-zero", "subnormal"],
         [0, 0x80000000, 1, 0x8000, 0x7FFF, 0x00400000, 0x007FFFFF, 0x80000001, 0x807FFFFF])
    case("overflow", "the largest float32 rounds up to Inf; Inf stays Inf", ["saturation", "inf"],
         [F32_MAX, 0x7F7F7FFF, 0x7F7F8000, F32_INF, F32_MAX | 0x80000000, F32_INF | 0x80000000], tier="quick")
    case("nan", "NaN payloads of both signs: sign | 0x7FC0 or 0xFFFF per the profile's bf16_nan", ["nan"], NAN_PAYLOADS,
         tier="quick")
    rng = fb.rng(4)
    raw = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).astype(np.uint32)
    raw = raw[~is_nan_bits(raw)]
    case("random/bits", "random float32 bit patterns (NaNs removed), seeded", ["random"], raw)
