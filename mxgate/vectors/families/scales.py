"""Scale policies and MX block quantization (SPEC sections 1 (E8M0), 3 and 4).

e8m0.decode (all 256 bytes, bytes 0/1/254/255), e8m0.scale (amax -> byte under each profile's
policy, arithmetic, floor and clamp), mx.quantize (blocks of 32: binade edges, zero, tiny, huge
and non-finite blocks, double-rounding traps, midpoints after scaling, several groups per row,
idempotence), ue8m0.round (the FP8 power-of-two scale and its log2f thresholds).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle import profiles as _profiles
from mxgate.oracle import scales as _scales
from mxgate.oracle.formats import e2m1
from mxgate.oracle import unverified as unv
from mxgate.oracle.unverified import SCALE_255_REASON
from mxgate.vectors.families._builder import FamilyBuilder, Outputs
from mxgate.inputs.bits import F32_INF, F32_MAX, bit, f32, is_nan_bits, pow2_bits
from mxgate.inputs.samples import normal, pow2_f64

NAME = "scales"
DESCRIPTION = "Scale policies: e8m0.decode, e8m0.scale, mx.quantize (groups of 32), ue8m0.round"
SEED = 0x4D584702

FLOORS = (6.0 * 2.0**-126, 1e-10, 1e-8, 1e-4, 6e-4)


def available() -> str | None:
    return None


def build(fb: FamilyBuilder) -> None:
    _e8m0_decode(fb)
    _e8m0_scale(fb)
    _mx_quantize(fb)
    _ue8m0_round(fb)


def _log2f_alternative(p: _profiles.Profile, fn):
    """For an unverified scale policy (a log2f-modelled one): the admitted policies' results too."""
    alternatives = [(f"scale_policy {policy!r} (bitwise ceil_pow2)", fn(replace(p, scale_policy=policy)))
                    for policy in p.admitted_values("scale_policy")]
    return (unv.reason(p, "scale_policy"), alternatives) if alternatives else ("", [])


# ---- e8m0.decode --------------------------------------------------------------------------


def _e8m0_decode(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.E8M0_DECODE, OpName.E8M0_DECODE, "e8m0 byte -> float32 2^(e-127); byte 0 is 2^-127 or 0.0, byte 255 "
                 "NaN or Inf, per profile (NaN compared as any NaN)", ["codes"], ["values"],
                 compare={"values": "nan_equal"})
    for slug, codes, tier, flags in (
        ("special-bytes", [0, 1, 127, 254, 255], "quick", ["scale-byte", "BUGS-18"]),
        ("all-codes", list(range(256)), "default", ["all-codes", "scale-byte", "BUGS-18"]),
    ):
        c = np.array(codes, dtype=np.uint8)
        g.case(slug, "bytes 0 (2^-127, a float32 subnormal), 1, 127 (1.0), 254 (2^127), 255 (NaN)" if slug ==
               "special-bytes" else "every byte", flags, {"codes": c},
               lambda p, c=c: {"values": oracle.decode_e8m0(c, p.name)}, tier=tier)


# ---- e8m0.scale ---------------------------------------------------------------------------


def _amax_case(g, slug: str, comment: str, flags: list[str], patterns, tier: str = "default") -> None:
    amax = f32(patterns)

    def compute(p: _profiles.Profile) -> Outputs:
        return {"e8m0": oracle.e8m0_scale(amax, p)}

    g.case(slug, comment, flags, {"amax": amax}, compute, tier=tier,
           alternatives=lambda p, out: _log2f_alternative(p, compute))


def _binade_patterns(k_lo: int, k_hi: int) -> list[int]:
    """Per binade 2^k: the edge, +1 ulp, 1.5*2^k (= 6*2^(k-2)) +-1 ulp, and the top of the binade."""
    out = []
    for k in range(k_lo, k_hi):
        base = pow2_bits(k)
        nxt = pow2_bits(k + 1)
        mid = base + (nxt - base) // 2  # 1.5 * 2^k (normal binades; a subnormal binade's midpoint)
        out += sorted({base, base + 1, mid - 1, mid, mid + 1, nxt - 1})
    return out


def _e8m0_scale(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.E8M0_SCALE, OpName.E8M0_SCALE, "block amax (float32 >= 0) -> e8m0 byte under the profile's scale "
                 "policy (RCEIL/FLOOR/CEIL/EVEN), arithmetic (amax*fl(1/6) or amax/6), amax floor and clamp",
                 ["amax"], ["e8m0"])
    for k_lo in range(-149, 128, 40):
        k_hi = min(k_lo + 40, 128)
        _amax_case(g, f"binades/{k_lo}..{k_hi - 1}", f"every binade 2^k for k in [{k_lo}, {k_hi - 1}]: edge, +1 ulp, "
                   "6*2^(k-2) +-1 ulp, top", ["binade-edge", "scale-policy", "BUGS-1", "BUGS-2", "BUGS-3"],
                   _binade_patterns(k_lo, k_hi), tier="quick" if k_lo == -29 else "default")
    floors = []
    for v in FLOORS:
        floors += [bit(v) - 1, bit(v), bit(v) + 1]
    _amax_case(g, "floors", "amax just around each shipped amax floor (6*2^-126, 1e-10, 1e-8, 1e-4, 6e-4)",
               ["amax-floor", "tiny-block", "BUGS-19"], floors, tier="quick")
    _amax_case(g, "zero", "amax 0 (+0 and -0): no log2(0), no 0/0; the floor or clamp decides",
               ["zero-block", "BUGS-20"], [0, 0x80000000], tier="quick")
    _amax_case(g, "tiny", "subnormal and ~1e-36 amax", ["tiny-block", "subnormal", "BUGS-19"],
               [1, 2, 0x00400000, 0x007FFFFF, bit(1e-36), bit(1e-38)])
    _amax_case(g, "huge", "amax near FLT_MAX: the RCEIL exponent can pass 254", ["huge-block", "saturation", "BUGS-1"],
               [F32_MAX, F32_MAX - 1, bit(6.0 * 2.0**125), bit(6.0 * 2.0**125) + 1, bit(2.0**127)])
    _amax_case(g, "nonfinite", "Inf and NaN amax give 0xFF", ["nonfinite-block", "inf", "nan", "BUGS-20"],
               [F32_INF, 0x7FC00000, 0x7F800001], tier="quick")
    traps = []
    for k in (-20, -3, 0, 1, 5, 30):
        six = bit(6.0 * 2.0**k)
        traps += [six + 1, six + 2, six + 0x7FFF, six - 1, six - 0x8000]
    _amax_case(g, "double-rounding", "amax just above 6*2^k: float32 gives the next scale, a bf16-rounded amax the "
               "lower one", ["double-rounding", "binade-edge", "BUGS-6"], traps)
    _amax_case(g, "dispute-957", "957 (and 896, 1024): the scale dispute of microxcaling#4",
               ["scale-policy", "BUGS-7"], [bit(957.0), bit(896.0), bit(1024.0), bit(448.0), bit(449.0)])
    # Near 2^k*6 with amax/6 just above a power of two: a correctly rounded log2f keeps k.
    table = _scales.log2f_threshold_table()
    pats = []
    for k in (-100, -60, -30, -20, 20, 40, 60, 100):
        j = int(table[k + 149])
        for m in sorted({1, max(j, 1), j + 1}):
            s = float(f32([pow2_bits(k) + m])[0])
            pats.append(bit(float(np.float32(s) * np.float32(6.0))))
    _amax_case(g, "log2f-threshold", "amax/6 a few ulps above 2^k, around the last mantissa that log2f rounds to k",
               ["log2f-threshold", "scale-policy"], pats)
    rng = fb.rng(10)
    raw = rng.integers(0, 0x7F800000, size=2048, dtype=np.uint64).astype(np.uint32)
    _amax_case(g, "random", "2048 random positive finite amax bit patterns, seeded", ["random"], raw)


# ---- mx.quantize --------------------------------------------------------------------------


def _mx_case(g, slug: str, comment: str, flags: list[str], x: np.ndarray, tier: str = "default") -> None:
    x = np.ascontiguousarray(x, dtype=np.float32)
    has_nan = bool(np.any(is_nan_bits(x.view(np.uint32))))
    nonfinite = not bool(np.all(np.isfinite(x)))
    if has_nan and "nan" not in flags:
        raise ValueError(f"{g.id}/{slug}: a case holding NaN must carry the 'nan' flag")

    def compute(p: _profiles.Profile) -> Outputs:
        packed, e8m0 = oracle.quantize_mx(x, p)
        return {"packed": packed, "e8m0": e8m0}

    def alternatives(p: _profiles.Profile, out: Outputs):
        why, alts = _log2f_alternative(p, compute)
        if not nonfinite:
            return why, alts
        # Blocks with a 0xFF scale: the exact model's reading, and every other NaN rule when the
        # profile's own is unverified, are admissible.
        reasons = [r for r in (why, SCALE_255_REASON, unv.reason(p, "nan") if has_nan else None) if r]
        pk, sc = unv.exact_quantize_mx(x, p)
        alts.append(("exact model (scale byte 255 divides by 2^128)", {"packed": pk, "e8m0": sc}))
        for label, v in unv.nan_variants(p) if has_nan else []:
            pk, sc = unv.exact_quantize_mx(x, v)
            alts.append((f"exact model, {label}", {"packed": pk, "e8m0": sc}))
        return "; ".join(reasons), alts

    g.case(slug, comment, flags, {"x": x}, compute, tier=tier, alternatives=alternatives)


def _rows_with_amax(rng: np.random.Generator, amax: np.ndarray, n: int = 32) -> np.ndarray:
    """One row of n per amax: the amax at a random position (random sign), the rest |v| < amax."""
    rows = (rng.uniform(-1.0, 1.0, size=(amax.size, n)) * amax.astype(np.float64)[:, None]).astype(np.float32)
    pos = rng.integers(0, n, size=amax.size)
    sign = np.where(rng.integers(0, 2, size=amax.size) == 1, -1.0, 1.0).astype(np.float32)
    rows[np.arange(amax.size), pos] = amax * sign
    return rows


def _mx_quantize(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.MX_QUANTIZE, OpName.MX_QUANTIZE, "x [rows, N] float32 -> (packed uint8 [rows, N/2], e8m0 uint8 "
                 "[rows, N/32]): a scale per group of 32 from its amax, each element divided by the scale and "
                 "rounded to E2M1; element 2i in the low nibble", ["x"], ["packed", "e8m0"])
    rng = fb.rng(20)
    for k_lo in range(-149, 128, 40):
        k_hi = min(k_lo + 40, 128)
        amax = f32(_binade_patterns(k_lo, k_hi))
        _mx_case(g, f"binades/{k_lo}..{k_hi - 1}", f"one block per amax at the binade edges for k in [{k_lo}, {k_hi - 1}]",
                 ["binade-edge", "scale-policy", "BUGS-1", "BUGS-3"], _rows_with_amax(rng, amax),
                 tier="quick" if k_lo == -29 else "default")
    zeros = np.zeros((3, 32), np.float32)
    zeros[1] = -0.0
    zeros[2, ::2] = -0.0
    _mx_case(g, "zero-block", "all +0, all -0, alternating: amax 0 must not give NaN (0/0) or log2(0)",
             ["zero-block", "signed-zero", "BUGS-20"], zeros, tier="quick")
    tiny = np.stack([
        np.full(32, 1e-36, np.float32),
        f32(np.arange(1, 33)),  # subnormals 2^-149 .. 32*2^-149
        np.where(np.arange(32) % 2 == 0, np.float32(1e-36), np.float32(-3e-37)).astype(np.float32),
        np.full(32, 6.0 * 2.0**-126, np.float32),
        np.full(32, 1e-10, np.float32),
        np.full(32, 1e-4, np.float32),
        np.full(32, 6e-4, np.float32),
        np.full(32, -1e-8, np.float32),
    ])
    _mx_case(g, "tiny-block", "blocks of ~1e-36, subnormals, and amax at the shipped floors (6*2^-126, 1e-10, 1e-8, "
             "1e-4, 6e-4)", ["tiny-block", "amax-floor", "subnormal", "BUGS-19"], tiny, tier="quick")
    huge = np.stack([
        np.full(32, np.float32(f32([F32_MAX])[0])),
        np.linspace(-3e38, 3e38, 32, dtype=np.float32),
        np.full(32, 6.0 * 2.0**125, np.float32),  # 6*2^126 would overflow float32
    ])
    _mx_case(g, "huge-block", "amax near FLT_MAX", ["huge-block", "saturation", "BUGS-1"], huge)
    bad = np.tile(np.linspace(-3, 3, 32, dtype=np.float32), (4, 1))
    bad[0, 5] = np.inf
    bad[1, 7] = -np.inf
    bad[2, 9] = f32([0x7FC00000])[0]
    bad[3, 0] = f32([0xFFC00001])[0]
    _mx_case(g, "nonfinite-block", "a block holding +Inf, -Inf or a NaN: scale 0xFF, every element NaN after division",
             ["nonfinite-block", "inf", "nan", "BUGS-20"], bad, tier="quick")
    mids = np.array([*e2m1.MIDPOINTS, 6.0], np.float64)
    rows = []
    for k in (-10, 0, 3):
        for sign in (1.0, -1.0):
            r = np.concatenate([mids, mids - mids * 2.0**-23, mids + mids * 2.0**-23, mids * 0.5]) * 2.0**k * sign
            r[7] = 6.0 * 2.0**k  # amax 6*2^k: the scale is exactly 2^k, so x/scale hits the midpoints
            rows.append(r.astype(np.float32))
    _mx_case(g, "midpoints-after-scale", "amax 6*2^k so each element divided by the scale lands on an E2M1 "
             "midpoint (or one ulp away)", ["midpoint", "midpoint-neighbour", "BUGS-8", "BUGS-9"], np.stack(rows),
             tier="quick")
    traps = []
    for k in (-8, 0, 4):
        for d in (1, 0x7FFF, -0x8000):
            traps.append(bit(6.0 * 2.0**k) + d)
    amax = f32(traps)
    _mx_case(g, "double-rounding", "amax just above/below 6*2^k where a bf16 rounding of amax would move the scale",
             ["double-rounding", "binade-edge", "BUGS-6"], _rows_with_amax(rng, amax))
    row957 = np.concatenate([[957.0, -896.0, 448.0, 100.0], np.linspace(-200, 200, 28)]).astype(np.float32)
    _mx_case(g, "dispute-957", "a block with amax 957 (microxcaling#4): RCEIL and FLOOR disagree on its scale",
             ["scale-policy", "BUGS-7"], row957[None, :])
    ramp = np.tile(np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32), 2)
    for n in (64, 128, 160, 288):
        x = (normal(rng, (3, n)) * 2.0).astype(np.float32)
        x[0, :32] = ramp  # every code once per half: low/high nibble order is visible
        _mx_case(g, f"groups/N{n}", f"rows of {n} elements ({n // 32} groups); the first block holds every code",
                 ["group-count", "nibble-order", "BUGS-21", "BUGS-27", "BUGS-30"], x, tier="quick" if n == 160 else "default")
    base = (normal(rng, (16, 128)) * 4.0).astype(np.float32)
    hw = _profiles.hardware().name
    again = oracle.dequantize_mx(*oracle.quantize_mx(base, hw), hw)
    _mx_case(g, "idempotence", f"dequantized values dq(q(x)) under {hw}: quantizing them again must give the same bytes",
             ["idempotence", "BUGS-33"], again)
    bf16_rows = oracle.round_bf16((normal(rng, (32, 128)) * 1.5).astype(np.float32))
    _mx_case(g, "random/bf16-rows", "bf16-representable rows of 128 (the indexer's K input), seeded", ["random"], bf16_rows,
             tier="quick")
    wide = (normal(rng, (64, 32)) * pow2_f64(rng.integers(-60, 60, size=(64, 1)))).astype(np.float32)
    _mx_case(g, "random/wide-range", "blocks whose magnitude ranges over 2^-60..2^60, seeded", ["random"], wide)


# ---- ue8m0.round --------------------------------------------------------------------------


def _ue8m0_round(fb: FamilyBuilder) -> None:
    g = fb.group(OpName.UE8M0_ROUND, OpName.UE8M0_ROUND, "positive float32 s -> the power of two exp2f(ceilf(log2f(s))) "
                 "(FP8 scale_fmt 'ue8m0', SPEC 4), under the profile's ue8m0_rounding", ["s"], ["scale"])
    table = _scales.log2f_threshold_table()
    pats = []
    for k in range(-149, 127):
        j = int(table[k + 149])
        if j == 0:
            continue
        base = pow2_bits(k)
        pats += sorted({base, base + 1, base + j, base + j + 1})
    s_all = f32(pats)

    def compute_for(s: np.ndarray):
        def compute(p: _profiles.Profile) -> Outputs:
            return {"scale": _scales.ue8m0_round(s, p.ue8m0_rounding)}

        def alternatives(p: _profiles.Profile, out: Outputs):
            return unv.reason(p, "ue8m0_rounding"), [(f"ue8m0_rounding {other!r}", {"scale": _scales.ue8m0_round(s, other)})
                                                     for other in p.admitted_values("ue8m0_rounding")]

        return compute, alternatives

    # Split so the binades where log2f keeps k (j <= J(k)) are separate, citable cases.
    half = len(s_all) // 2
    for slug, s, tier in (("log2f-threshold/low", s_all[:half], "default"), ("log2f-threshold/high", s_all[half:], "default")):
        compute, alternatives = compute_for(s)
        g.case(slug, "2^k, 2^k+1ulp, and the last/first mantissa where a correctly rounded log2f still gives k",
               ["log2f-threshold", "power-of-two-scale", "BUGS-29"], {"s": s}, compute, tier=tier,
               alternatives=alternatives)
    plain = f32([bit(v) for v in (1.0, 1.5, 0.75, 3.0, 1.0 / 448.0, 1.0 / 240.0, 1e-10 / 448.0, 2.0**-126, 2.0**126)])
    compute, alternatives = compute_for(plain)
    g.case("plain", "ordinary scales, far from the log2f thresholds", ["power-of-two-scale", "BUGS-29"], {"s": plain},
           compute, tier="quick", alternatives=alternatives)
