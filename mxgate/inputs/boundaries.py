"""The boundary classes of the element and scale ops as bit patterns, each tagged with the
golden-vector flag that names it (docs/vectors.md), and the fixed boundary arrays the
conformance suite runs.

Classes: signed-zero; all-codes (the values a format represents exactly); midpoint and
midpoint-neighbour (E2M1, E4M3 and bf16 ties, one float32 ulp either side); binade-edge (2^k
and the RCEIL/EVEN scale edges 6*2^k and 1.75*2^k, +-1 ulp); double-rounding (values a bf16 or
fp16 intermediate turns into a tie); negative-underflow; subnormal; saturation (E2M1's 6, E4M3's
448/240 and the ties above them, huge values); amax-floor (every profile's amax floor, +-1 ulp);
inf; nan (payloads of both signs); log2f-threshold (mantissas where a correctly rounded log2f
decides ceil()).

Order matters: Hypothesis shrinks a value drawn from a pool toward the start of the pool, so
each pool lists simple values first and positives before negatives; a shrunk case then names
the simplest boundary value that still shows what it shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mxgate import oracle
from mxgate.inputs.bits import F32_INF, F32_MAX, NAN_PAYLOADS, SIGN, bf16_patterns, bit, f32, is_nan_bits, pow2_bits
from mxgate.oracle.bits import unique_patterns
from mxgate.oracle.formats.e2m1 import MAGNITUDES, MIDPOINTS
from mxgate.oracle.geometry import GROUP
from mxgate.oracle.profiles import AITER_AMAX_FLOOR
from mxgate.oracle.scales import log2f_threshold_table

E2M1_VALUES = tuple(MAGNITUDES[1:].tolist())  # the positive E2M1 values, 0.5 .. 6
E2M1_MIDPOINTS = tuple(MIDPOINTS.tolist())
# Every registered profile's amax floor (mxgate.oracle.profiles): 6*2^-126, 1e-10, 1e-8, 1e-4.
AMAX_FLOORS = (AITER_AMAX_FLOOR, 1e-10, 1e-8, 1e-4)
SUBNORMALS = (1, 2, 3, 0x00400000, 0x007FFFFF)
UNDERFLOW = (0.1, 0.2, 1e-30, 2.0**-126)
HUGE = (1e10, 3e38)
# float32 bit offsets that bf16 (16 dropped bits) or fp16 (13) rounding turns into a tie
DOUBLE_ROUNDING = (0x7FFF, -0x7FFF, 0x8000, -0x8000, 0xFFF, -0xFFF, 0x1000)
BINADE_EXPONENTS = (0, 1, -1, 2, -2, 8, -8, 16, -16, 64, -64, 126, 127, -125, -126, -127, -130, -140, -149)
# |x| an identity RMSNorm carries exactly through AITER's fused RMS quantizer
RMS_MIN, RMS_MAX = 2.0**-76, 2.0**37


@dataclass(frozen=True)
class Boundary:
    """One float32 (or bf16, or code) bit pattern and the flag of the class it stands for."""

    bits: int
    flag: str


Pool = tuple[Boundary, ...]


def _tag(flag: str, patterns) -> list[Boundary]:
    return [Boundary(int(p) & 0xFFFFFFFF, flag) for p in patterns]


def _around(value: float, flag: str, neighbour_flag: str | None = None) -> list[Boundary]:
    """value and one float32 ulp below and above it (value > 0)."""
    b = bit(value)
    return [Boundary(b, flag)] + _tag(neighbour_flag or flag, (b - 1, b + 1))


def _signed(positives: list[Boundary]) -> list[Boundary]:
    """The positives, then each negated (the negation of +0 is -0)."""
    return positives + [Boundary(b.bits ^ SIGN, b.flag) for b in positives]


def _dedupe(pool: list[Boundary]) -> Pool:
    seen: dict[int, Boundary] = {}
    for b in pool:
        seen.setdefault(b.bits, b)
    return tuple(seen.values())


def _specials() -> list[Boundary]:
    return _tag("inf", (F32_INF, F32_INF | SIGN)) + _tag("nan", NAN_PAYLOADS)


def _tails() -> list[Boundary]:
    """Classes every float32 pool shares: underflow, subnormals, huge values."""
    out = [b for v in UNDERFLOW for b in _around(v, "negative-underflow")]
    out += _tag("subnormal", SUBNORMALS)
    out += [Boundary(bit(v), "saturation") for v in HUGE] + _tag("saturation", (F32_MAX,))
    return out


def _binade_edges(exponents: Sequence[int], factors: Sequence[float] = (1.0,)) -> list[Boundary]:
    out: list[Boundary] = []
    for k in exponents:
        for f in factors:
            with np.errstate(over="ignore"):
                b = pow2_bits(k) if f == 1.0 else bit(f * 2.0**k)
            if 0 < b < F32_INF:
                out += _tag("binade-edge", (b, b - 1, b + 1))
    return out


def e2m1_pool() -> Pool:
    """float32 boundary classes of float32 -> E2M1 (no scaling)."""
    pos = [Boundary(0, "signed-zero")]
    pos += [Boundary(bit(v), "all-codes") for v in E2M1_VALUES]
    pos += [b for m in E2M1_MIDPOINTS for b in _around(m, "midpoint", "midpoint-neighbour")]
    pos += [b for v in (6.0, 6.5, 7.0, 8.0, 12.0) for b in _around(v, "saturation")]
    pos += _tails()
    pos += _tag("double-rounding", [bit(m) + d for m in E2M1_MIDPOINTS for d in DOUBLE_ROUNDING])
    pos += _binade_edges(BINADE_EXPONENTS)
    return _dedupe(_signed(pos) + _specials())


def e4m3_pool(variant: str) -> Pool:
    """float32 boundary classes of float32 -> E4M3FN / E4M3FNUZ."""
    table = oracle.decode_e4m3(np.arange(256, dtype=np.uint8), variant)
    mags = np.unique(np.abs(table[np.isfinite(table)]).astype(np.float64))
    mids = (mags[:-1] + mags[1:]) / 2  # exact in float32 (one more bit than E4M3)
    top = 448.0 if variant == "fn" else 240.0
    above = 480.0 if variant == "fn" else 256.0
    sub = 2.0 ** (-9 if variant == "fn" else -10)
    pos = [Boundary(0, "signed-zero")]
    pos += [Boundary(bit(float(m)), "all-codes") for m in mags[1:9]]
    pos += [b for m in mids for b in _around(float(m), "midpoint", "midpoint-neighbour")]
    pos += [b for v in (top, (top + above) / 2, above, 1e6) for b in _around(v, "saturation")]
    pos += [b for v in (sub, sub / 2, sub * 1.5) for b in _around(v, "subnormal")]
    pos += _tag("double-rounding", [bit(m) + d for m in (1.0625, 1.1875, 3.25, 0.2890625)
                                    for d in (1, -1, 0xFFF, -0xFFF, 0x7FFF, -0x7FFF)])
    pos += _tails()
    return _dedupe(_signed(pos) + _specials())


def bf16_pool() -> Pool:
    """float32 boundary classes of float32 -> bf16 (ties at bit 16)."""
    pos = [Boundary(0, "signed-zero")]
    for base in (bit(1.0), bit(1.0) + 0x10000, bit(1.25), bit(3.0) + 0x10000, bit(448.0), bit(1e-30) & ~0xFFFF):
        pos += _tag("midpoint", (base + 0x8000,)) + _tag("midpoint-neighbour", (base + 0x7FFF, base + 0x8001))
    pos += [Boundary(bit(v), "all-codes") for v in E2M1_VALUES]
    pos += _tag("saturation", (0x7F7F7FFF, 0x7F7F8000, 0x7F7F0000))  # below, at the tie to Inf, bf16 max
    pos += _tails()
    pos += _binade_edges(BINADE_EXPONENTS)
    return _dedupe(_signed(pos) + _specials())


def amax_pool() -> Pool:
    """Block amax values (float32 >= 0) around every scale policy's edges and every amax floor."""
    pos = [Boundary(0, "zero-block"), Boundary(SIGN, "zero-block")]
    pos += [b for v in (6.0, 1.0, 4.0, 448.0, 240.0) for b in _around(v, "scale-policy")]
    pos += [b for v in AMAX_FLOORS for b in _around(v, "amax-floor")]
    pos += _tag("tiny-block", SUBNORMALS) + [Boundary(bit(1e-36), "tiny-block")]
    pos += _binade_edges(BINADE_EXPONENTS, factors=(1.0, 6.0, 1.75))
    pos += _tag("huge-block", (F32_MAX, F32_MAX - 1, bit(3e38)))
    pos += _tag("nonfinite-block", (F32_INF,) + tuple(p for p in NAN_PAYLOADS if p < SIGN))
    return _dedupe(pos)


def ue8m0_pool() -> Pool:
    """Positive scales (and +Inf) around 2^k and the log2f thresholds 2^k (1 + J(k) 2^-23)."""
    pos = [Boundary(bit(v), "power-of-two-scale") for v in (1.0, 1.5, 0.75, 3.0, 1.0 / 448.0, 1.0 / 240.0)]
    table = log2f_threshold_table()
    for k in range(-149, 127):
        j = int(table[k + 149])
        base = pow2_bits(k)
        pos += _tag("binade-edge", (base, base + 1) + ((base - 1,) if base > 1 else ()))
        if j:
            pos += _tag("log2f-threshold", (base + j, base + j + 1))
    pos += _tag("saturation", (F32_MAX, F32_INF))
    return _dedupe(pos)


def block_element_pool() -> Pool:
    """Element values of an MX block before its scale exponent is applied: E2M1 values,
    midpoints and their float32 and bf16 neighbours, zeros, small values, the amax floors, Inf
    and NaN."""
    pos = [Boundary(0, "zero-block")]
    pos += [Boundary(bit(v), "all-codes") for v in E2M1_VALUES]
    pos += [b for m in E2M1_MIDPOINTS for b in _around(m, "midpoint", "midpoint-neighbour")]
    # one bf16 ulp beside each midpoint: the neighbours that survive rounding a block to bf16
    pos += _tag("midpoint-neighbour", [bit(m) + d for m in E2M1_MIDPOINTS for d in (-0x10000, 0x10000)])
    pos += [b for v in (6.0, 8.0) for b in _around(v, "binade-edge")]
    pos += [Boundary(bit(v), "negative-underflow") for v in (0.1, 1e-30)] + _tag("subnormal", (1, 0x007FFFFF))
    pos += [Boundary(bit(v), "amax-floor") for v in AMAX_FLOORS]
    return _dedupe(_signed(pos) + _tag("nonfinite-block", (F32_INF, F32_INF | SIGN, 0x7FC00000, 0xFFC00001)))


# ---- flags of a drawn input --------------------------------------------------------------


def _flag_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for pool in (e2m1_pool(), e4m3_pool("fn"), e4m3_pool("fnuz"), bf16_pool(), amax_pool(), ue8m0_pool()):
        for b in pool:
            table.setdefault(b.bits, b.flag)
    return table


_FLAGS: dict[int, str] | None = None


def flags_of(x: np.ndarray) -> list[str]:
    """Golden-vector flags of float32 values: the boundary class of each pool value, the class
    of special values (NaN, Inf, zero, subnormal), 'random' for anything else."""
    global _FLAGS
    if _FLAGS is None:
        _FLAGS = _flag_table()
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).reshape(-1)
    flags: list[str] = []
    for p in unique_patterns(u).tolist():
        if is_nan_bits(np.uint32(p)):
            flag = "nan"
        elif p & ~SIGN == F32_INF:
            flag = "inf"
        elif p & ~SIGN == 0:
            flag = "signed-zero"
        else:
            flag = _FLAGS.get(p) or _FLAGS.get(p ^ SIGN) or ("subnormal" if p & ~SIGN < 0x00800000 else "random")
        flags.append(flag)
    return list(dict.fromkeys(flags))


# ---- fixed boundary arrays of the conformance suite ------------------------------------------


def element_boundaries() -> np.ndarray:
    """Every element boundary class as float32 values (both signs)."""
    pats: list[int] = [0, 1, 2, 0x00400000, 0x007FFFFF, F32_MAX, F32_INF, 0x3F800000 + 1]
    for m in E2M1_MIDPOINTS + (6.0, 448.0, 464.0, 240.0, 248.0, 1.0625, 0.0009765625, 0.001953125):
        b = bit(m)
        pats += [b - 1, b, b + 1, b + 0x7FFF, b - 0x7FFF, b + 0x8000, b + 0xFFF]
    pats += [int(v) for v in np.float32([0.1, 1e-30, 7.0, 8.0, 1e10, 3.0, 1.5]).view(np.uint32)]
    pats += [p ^ SIGN for p in pats]
    return f32(pats)


def element_inputs(tier: str) -> np.ndarray:
    """The element boundaries; from the default tier on, every non-NaN bf16 pattern too."""
    x = element_boundaries()
    if tier == "quick":
        return x
    every = bf16_patterns()
    return np.concatenate([x, f32(every[~is_nan_bits(every)])])


def scale_blocks() -> np.ndarray:
    """MX blocks [rows, 32]: zero, tiny, huge, non-finite and binade-edge blocks, rows spanning
    [-amax, amax] at 1, 1.5 and just under 2 times 2^k, and blocks at every amax floor."""
    rows = [np.zeros(GROUP, np.float32), np.full(GROUP, -0.0, np.float32), np.full(GROUP, 1e-36, np.float32),
            f32(np.arange(1, GROUP + 1)), np.full(GROUP, np.float32(f32([F32_MAX])[0])),
            np.linspace(-6, 6, GROUP, dtype=np.float32)]
    for k in range(-140, 128, 7):
        for m in (1.0, 1.5, 1.9999999):
            amax = np.float32(m * 2.0**k)
            rows.append((np.linspace(-1, 1, GROUP) * float(amax)).astype(np.float32))
    bad = np.linspace(-3, 3, GROUP, dtype=np.float32)
    bad[3] = np.inf
    rows.append(bad)
    for floor in AMAX_FLOORS:
        rows.append(np.full(GROUP, floor, np.float32))
    return np.stack(rows)


def nonfinite_blocks() -> np.ndarray:
    """MX blocks [rows, 32] spanning [-3, 3] with one element replaced by a NaN (quiet of both
    signs, a payload, all ones) or an Inf of either sign: the NaN / Inf amax of every rule
    (scale_blocks has one +Inf block only)."""
    rows = []
    for special in (0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFFFFFFF, F32_INF, F32_INF | SIGN):
        row = np.linspace(-3, 3, GROUP, dtype=np.float32)
        row[3] = f32([special])[0]
        rows.append(row)
    return np.stack(rows)


# float32 log2 of these rounds to 128 (0x7F7FFFD4 up to FLT_MAX) or stays below it (0x7F7FFFD3)
LOG2_ROUNDS_TO_128 = (0x7F7FFFD4, 0x7F7FFFD3)


def extreme_amax_blocks() -> np.ndarray:
    """Finite MX blocks [rows, 32] at both ends of float32: amax 1..4 x 2^-149 (where amax / 6
    or amax / 4 underflows to zero or rounds to the smallest subnormal), and blocks of FLT_MAX,
    -FLT_MAX and the amax values whose float32 log2 rounds to 128 or just not. Kept apart from scale_blocks: nothing non-finite, so a backend that declares
    NaN and Inf outside its contract is still judged on them."""
    rows = []
    for ulps in (1, 2, 3, 4):
        row = np.zeros(GROUP, np.float32)
        row[0], row[1], row[5] = f32([ulps])[0], -f32([max(ulps - 1, 1)])[0], f32([1])[0]
        rows.append(row)
        rows.append(-row)
    for top in (F32_MAX,) + LOG2_ROUNDS_TO_128:
        amax = f32([top])[0]
        rows.append(np.full(GROUP, amax))
        rows.append((np.linspace(-1, 1, GROUP) * np.float64(amax)).astype(np.float32))
    rows.append(np.full(GROUP, -f32([F32_MAX])[0]))
    return np.stack(rows)


def mx_e4m3fn_blocks() -> np.ndarray:
    """MXFP8 blocks [rows, 32]: the scale boundary and extreme-amax blocks, then blocks at
    E4M3FN's own edges: amax 448 and 512 and their float32 neighbours (where floor and rceil
    part), every E4M3 midpoint at scale 2^0, zero and -0 blocks with one tiny element, and NaN
    and Inf blocks with elements of both signs."""
    rows = list(scale_blocks()) + list(extreme_amax_blocks())
    spread = np.linspace(-1, 1, GROUP)
    for top in (448.0, 512.0, 464.0, 480.0, 8.0, 1.75 * 2.0**-120, 448.0 * 2.0**-127):
        for b in (bit(top) - 1, bit(top), bit(top) + 1):
            rows.append((spread * np.float64(f32([b])[0])).astype(np.float32))
    codes = oracle.decode_e4m3(np.arange(127, dtype=np.uint8), "fn").astype(np.float64)
    mids = ((codes[:-1] + codes[1:]) / 2).astype(np.float32)  # exact in float32
    body = np.concatenate([mids, -mids])
    body = np.concatenate([body, np.zeros(-body.size % (GROUP - 1), np.float32)]).reshape(-1, GROUP - 1)
    rows += list(np.concatenate([np.full((body.shape[0], 1), 448.0, np.float32), body], axis=1))  # amax 448: 2^0
    for zero in (0.0, -0.0):
        row = np.full(GROUP, zero, np.float32)
        row[7] = f32([1])[0]
        rows.append(row)
    for special in (F32_INF, F32_INF | SIGN, 0x7FC00000, 0xFFC00000, 0x7F800001):
        row = np.linspace(-3, 3, GROUP, dtype=np.float32)
        row[4], row[9] = f32([special])[0], f32([special ^ SIGN])[0]
        rows.append(row)
    return np.stack(rows).astype(np.float32)


def tie_probe() -> np.ndarray:
    """One MX block [1, 32] whose amax is 6 (scale 2^0 under every policy): each E2M1 midpoint
    of both signs, -0, and small values that round to zero."""
    row = [6.0] + [s * m for m in E2M1_MIDPOINTS for s in (1.0, -1.0)] + [-0.0, -0.1, 0.1, -6.0]
    row += [0.0] * (GROUP - len(row))
    return f32([int(v) for v in np.float32(row).view(np.uint32)]).reshape(1, GROUP)


def midpoint_neighbour_block() -> np.ndarray:
    """One MX block [1, 32] whose amax is 6 (scale 2^0 under every policy): one float32 ulp below
    and above each E2M1 midpoint, both signs. Not ties, so every rule rounds them alike; an
    encoder that rounds twice (first to float32 after adding a half) moves the ones below."""
    below = [int(bit(m)) - 1 for m in E2M1_MIDPOINTS]
    above = [int(bit(m)) + 1 for m in E2M1_MIDPOINTS]
    mags = below + above
    row = [int(bit(6.0))] + mags + [p | SIGN for p in mags]
    row += [0] * (GROUP - len(row))
    return f32(row).reshape(1, GROUP)


def in_rms_contract(x: np.ndarray) -> np.ndarray:
    """Zero what an identity RMSNorm cannot carry exactly (|x| below RMS_MIN or from RMS_MAX up)."""
    mag = np.abs(x)
    keep = np.isfinite(x) & (mag >= RMS_MIN) & (mag < RMS_MAX)
    return np.where(keep, x, np.float32(0.0)).astype(np.float32)


def scale_inputs() -> np.ndarray:
    """Positive amax values: every finite bf16 pattern, the element boundaries, every float32
    from 2^-125 - 2^-140 up to 2^-124 (where amax / 4 rounds into the normal range), 2^k, 1.5 2^k,
    1.75 2^k, 3 2^k and 6 2^k with three float32 neighbours either side at every exponent (where
    a floor, ceil or even policy changes its byte), Inf, and every positive NaN payload (a
    policy that adds a rounding constant to the bits can carry a payload into the exponent)."""
    every = bf16_patterns()
    every = every[(every & SIGN) == 0]
    bf16 = f32(every[~is_nan_bits(every)])
    edge = np.arange(0x01000000 - (1 << 15), 0x01000000 + 4, dtype=np.uint32).view(np.float32)
    steps = []
    for k in range(-149, 128):
        for factor in (1.0, 1.5, 1.75, 3.0, 6.0):
            with np.errstate(over="ignore"):
                b = pow2_bits(k) if factor == 1.0 else bit(factor * 2.0**k)
            steps += [b + d for d in range(-3, 4) if 0 < b + d < F32_INF]
    nans = [p for p in NAN_PAYLOADS if p < SIGN]
    special = np.float32([np.inf, np.nan, 0.0])
    return np.concatenate([bf16, np.abs(element_boundaries()), edge, f32(steps + nans), special]).astype(np.float32)
