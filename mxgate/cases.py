"""Inputs of the element and scale ops in one place: the suite's boundary classes as bit
patterns, each tagged with the golden-vector flag that names it (docs/vectors.md), and the
Hypothesis strategies that draw op inputs from them.

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
from typing import Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle.profiles import AITER_AMAX_FLOOR
from mxgate.oracle.scales import log2f_threshold_table
from mxgate.vectors.families._values import F32_INF, F32_MAX, NAN_PAYLOADS, SIGN, bit, is_nan_bits, pow2_bits

E2M1_VALUES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
# Every registered profile's amax floor (mxgate.oracle.profiles): 6*2^-126, 1e-10, 1e-8, 1e-4.
AMAX_FLOORS = (AITER_AMAX_FLOOR, 1e-10, 1e-8, 1e-4)
SUBNORMALS = (1, 2, 3, 0x00400000, 0x007FFFFF)
UNDERFLOW = (0.1, 0.2, 1e-30, 2.0**-126)
HUGE = (1e10, 3e38)
# float32 bit offsets that bf16 (16 dropped bits) or fp16 (13) rounding turns into a tie
DOUBLE_ROUNDING = (0x7FFF, -0x7FFF, 0x8000, -0x8000, 0xFFF, -0xFFF, 0x1000)
GROUP = 32  # elements per MX block
BINADE_EXPONENTS = (0, 1, -1, 2, -2, 8, -8, 16, -16, 64, -64, 126, 127, -125, -126, -127, -130, -140, -149)


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
    for p in np.unique(u).tolist():
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


# ---- Hypothesis strategies ---------------------------------------------------------------


def _f32_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


@st.composite
def _windows(draw, pool: Pool, others: tuple[st.SearchStrategy[int], ...], max_extra: int,
             max_windows: int = 4, max_length: int = 64) -> list[int]:
    # An example is a few runs of consecutive pool values, then a few values of the other
    # strategies: a given value of a 300-value pool is in about one example in five. Drawing
    # values one by one met it in a few percent of the examples; a subset drawn value by value
    # met it often but made Hypothesis' shrinking slow (one choice per pool value). A run costs
    # two choices, its length drawn first: shrinking makes it short, then moves it, down to the
    # values that still show the difference.
    bits = [b.bits for b in pool]
    chosen: list[int] = []
    for _ in range(draw(st.integers(1, max_windows))):
        length = draw(st.integers(1, min(max_length, len(bits))))
        start = draw(st.integers(0, len(bits) - length))
        chosen += bits[start:start + length]
    if others:
        extra = st.one_of(*others)
        chosen += [draw(extra) for _ in range(draw(st.integers(0, max_extra)))]
    return chosen


def _as(dtype: type, bits_dtype: type) -> Callable[[list[int]], np.ndarray]:
    return lambda bits: np.array(bits, dtype=np.uint64).astype(bits_dtype).view(dtype)


_RANDOM_BITS = st.integers(0, 0xFFFFFFFF)


def f32_arrays(pool: Pool, *others: st.SearchStrategy[int], max_extra: int = 8) -> st.SearchStrategy[np.ndarray]:
    """1-D float32 arrays: runs of consecutive pool values, then up to ``max_extra`` values of
    the ``others`` (bit-pattern strategies)."""
    return _windows(pool, others, max_extra).map(_as(np.float32, np.uint32))


def code_arrays(codes: int) -> st.SearchStrategy[np.ndarray]:
    """1-D uint8 arrays: runs of consecutive codes of 0..codes-1."""
    pool = tuple(Boundary(c, "all-codes") for c in range(codes))
    return _windows(pool, (), 0).map(lambda c: np.array(c, dtype=np.uint8))


def _scaled(bits: list[int], exponent: int) -> np.ndarray:
    """Boundary values times 2^exponent (finite ones; Inf and NaN keep their bits)."""
    x = np.array(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        scaled = (x.astype(np.float64) * 2.0**exponent).astype(np.float32)
    return np.where(np.isfinite(x), scaled, x)


@st.composite
def _group(draw, pool: Pool, max_runs: int = 4, max_extra: int = 2) -> list[int]:
    # 32 lanes: a fill value, then a few runs of consecutive pool values at drawn lanes, then a
    # few values near the E2M1 range; about twenty choices a group, so shrinking stays quick
    # (one choice per lane made it slow) and ends on a group of zeros holding the values that
    # matter.
    bits = [b.bits for b in pool]
    lanes = [draw(st.sampled_from(bits))] * GROUP
    for _ in range(draw(st.integers(0, max_runs))):
        length = draw(st.integers(1, GROUP))
        start = draw(st.integers(0, len(bits) - 1))
        lane = draw(st.integers(0, GROUP - 1))
        for j in range(length):
            lanes[(lane + j) % GROUP] = bits[(start + j) % len(bits)]
    for _ in range(draw(st.integers(0, max_extra))):
        lanes[draw(st.integers(0, GROUP - 1))] = draw(st.floats(-8, 8, width=32).map(_f32_bits))
    return lanes


@st.composite
def mx_blocks(draw, max_rows: int = 2, max_groups: int = 4, groups: int | None = None) -> np.ndarray:
    """float32 [rows, 32*groups]: each group holds block-element pool values times 2^k, k drawn
    from the binade exponents (or any exponent), so midpoints land on ties after scaling."""
    rows = draw(st.integers(1, max_rows))
    count = groups if groups is not None else draw(st.integers(1, max_groups))
    pool = block_element_pool()
    exponent = st.one_of(st.sampled_from(BINADE_EXPONENTS), st.integers(-149, 127))
    out = []
    for _ in range(rows * count):
        k = draw(exponent)
        out.append(_scaled(draw(_group(pool)), k))
    return np.concatenate(out).reshape(rows, GROUP * count)


def bf16_rows(max_rows: int = 2) -> st.SearchStrategy[np.ndarray]:
    """bf16 bit patterns [rows, 128] (four MX groups): MX blocks rounded to bf16 (RNE)."""
    return mx_blocks(max_rows=max_rows, groups=4).map(lambda x: oracle.bf16_bits(x))


def _positive(bits: int) -> int:
    return bits & ~SIGN


def _positive_finite_or_inf(bits: int) -> int:
    return (bits & ~SIGN) % F32_INF + 1  # 2^-149 .. +Inf


# op -> the Hypothesis strategy of its positional arguments (a tuple)
def _single(strategy: st.SearchStrategy[np.ndarray]) -> st.SearchStrategy[tuple[np.ndarray]]:
    return strategy.map(lambda a: (a,))


def _strategies() -> dict[str, Callable[[], st.SearchStrategy[tuple]]]:
    near = st.floats(-8, 8, width=32).map(_f32_bits)
    return {
        OpName.E2M1_ENCODE: lambda: _single(f32_arrays(e2m1_pool(), near, _RANDOM_BITS)),
        OpName.E2M1_DECODE: lambda: _single(code_arrays(16)),
        OpName.E4M3FN_ENCODE: lambda: _single(f32_arrays(e4m3_pool("fn"), st.floats(-512, 512, width=32).map(_f32_bits),
                                                    _RANDOM_BITS)),
        OpName.E4M3FNUZ_ENCODE: lambda: _single(f32_arrays(e4m3_pool("fnuz"), st.floats(-256, 256, width=32).map(_f32_bits),
                                                      _RANDOM_BITS)),
        OpName.E4M3FN_DECODE: lambda: _single(code_arrays(256)),
        OpName.E4M3FNUZ_DECODE: lambda: _single(code_arrays(256)),
        OpName.BF16_ROUND: lambda: _single(f32_arrays(bf16_pool(), near, _RANDOM_BITS)),
        OpName.E8M0_DECODE: lambda: _single(code_arrays(256)),
        OpName.E8M0_SCALE: lambda: _single(f32_arrays(amax_pool(), st.floats(0, 2.0**-10, width=32).map(_f32_bits),
                                                 _RANDOM_BITS.map(_positive))),
        OpName.UE8M0_ROUND: lambda: _single(f32_arrays(ue8m0_pool(), _RANDOM_BITS.map(_positive_finite_or_inf))),
        OpName.MX_QUANTIZE: lambda: _single(mx_blocks()),
        OpName.FP4_INDEXER_QUANTIZE: lambda: _single(bf16_rows()),
        OpName.FP4_INDEXER_QUANTIZE_ROWS: lambda: _single(bf16_rows()),
    }


COVERED_OPS: tuple[str, ...] = tuple(_strategies())


def strategy(op: str) -> st.SearchStrategy[tuple] | None:
    """The Hypothesis strategy of ``op``'s positional arguments, or None when no generator
    exists for it yet."""
    make = _strategies().get(op)
    return make() if make else None


__all__ = ["AMAX_FLOORS", "COVERED_OPS", "E2M1_MIDPOINTS", "E2M1_VALUES", "Boundary", "amax_pool", "bf16_pool",
           "block_element_pool", "code_arrays", "e2m1_pool", "e4m3_pool", "f32_arrays", "flags_of", "mx_blocks",
           "strategy", "ue8m0_pool"]
