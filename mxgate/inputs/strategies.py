"""The Hypothesis strategies of the ops' inputs, in one place.

The element and scale ops (``strategy(op)``, the differential search's table) draw from the
boundary pools of :mod:`mxgate.inputs.boundaries`; the conformance suite's strategies of MX
blocks, scorer shapes and indexer cases follow. Moving a strategy here keeps its draws: the
same seed gives the same examples.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from mxgate import oracle
from mxgate.inputs import indexer
from mxgate.inputs.bits import F32_INF, SIGN, bit
from mxgate.inputs.boundaries import (
    BINADE_EXPONENTS,
    E2M1_MIDPOINTS,
    Boundary,
    Pool,
    amax_pool,
    bf16_pool,
    block_element_pool,
    e2m1_pool,
    e4m3_pool,
    in_rms_contract,
    ue8m0_pool,
)
from mxgate.op_table import OpName
from mxgate.oracle.geometry import GROUP


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
        lanes[draw(st.integers(0, GROUP - 1))] = draw(st.floats(-8, 8, width=32).map(bit))
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
    near = st.floats(-8, 8, width=32).map(bit)
    return {
        OpName.E2M1_ENCODE: lambda: _single(f32_arrays(e2m1_pool(), near, _RANDOM_BITS)),
        OpName.E2M1_DECODE: lambda: _single(code_arrays(16)),
        OpName.E4M3FN_ENCODE: lambda: _single(f32_arrays(e4m3_pool("fn"), st.floats(-512, 512, width=32).map(bit),
                                                    _RANDOM_BITS)),
        OpName.E4M3FNUZ_ENCODE: lambda: _single(f32_arrays(e4m3_pool("fnuz"), st.floats(-256, 256, width=32).map(bit),
                                                      _RANDOM_BITS)),
        OpName.E4M3FN_DECODE: lambda: _single(code_arrays(256)),
        OpName.E4M3FNUZ_DECODE: lambda: _single(code_arrays(256)),
        OpName.BF16_ROUND: lambda: _single(f32_arrays(bf16_pool(), near, _RANDOM_BITS)),
        OpName.E8M0_DECODE: lambda: _single(code_arrays(256)),
        OpName.E8M0_SCALE: lambda: _single(f32_arrays(amax_pool(), st.floats(0, 2.0**-10, width=32).map(bit),
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


# ---- MX blocks of the conformance suite ------------------------------------------------------

_BLOCK_FLOATS = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.25, -0.25, 2.5, 5.0, 6.0, 1e-38, 3e38, 2.0**-149]),
)


@st.composite
def float_blocks(draw) -> np.ndarray:
    """float32 [1, 32 or 64]: any finite floats and a few boundary values, scaled by 2^k or
    not (what overflows is zero)."""
    groups = draw(st.integers(1, 2))
    scale = draw(st.integers(-120, 100))
    values = draw(st.lists(_BLOCK_FLOATS, min_size=GROUP * groups, max_size=GROUP * groups))
    x = np.array(values, dtype=np.float64) * (2.0**scale if draw(st.booleans()) else 1.0)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    return np.where(np.isfinite(x32), x32, np.float32(0.0)).reshape(1, -1)


@st.composite
def rms_blocks(draw) -> np.ndarray:
    """float32 [1, 32..128] inside the RMS quantizer's contract: values near the E2M1 range and
    its midpoints, times 2^k."""
    groups = draw(st.integers(1, 4))
    scale = draw(st.integers(-70, 30))
    values = draw(st.lists(st.floats(-8.0, 8.0, width=32) | st.sampled_from(E2M1_MIDPOINTS + (-0.0, 6.0, -5.0)),
                           min_size=GROUP * groups, max_size=GROUP * groups))
    return in_rms_contract((np.array(values, np.float64) * 2.0**scale).astype(np.float32).reshape(1, -1))


# ---- slots of the cache layouts --------------------------------------------------------------


@st.composite
def slot_sets(draw, num_slots: int) -> np.ndarray:
    """Distinct slots in any order (so out of order inside a block, several per block), with
    negative slots (mostly -1) mixed in."""
    n_valid = draw(st.integers(0, min(num_slots, 48)))
    chosen = draw(st.permutations(range(num_slots)))[:n_valid]
    negatives = draw(st.lists(st.sampled_from([-1, -1, -1, -2, -64]), max_size=6))
    return np.array(draw(st.permutations(chosen + negatives)), dtype=np.int64)


@st.composite
def token_masks(draw, num_tokens: int) -> np.ndarray | None:
    """Per-token slots for the q layouts (only their sign matters), or None (all rows)."""
    if draw(st.booleans()):
        return None
    return np.array(draw(st.lists(st.sampled_from([-1, 0, 5, 130]), min_size=num_tokens,
                                  max_size=num_tokens)), dtype=np.int64)


# ---- scorer shapes ---------------------------------------------------------------------------

DECODE_LENGTHS = st.sampled_from([0, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 300])


@st.composite
def decode_ragged_params(draw) -> tuple[int, int, int, list[int], int]:
    """(seed, next_n, heads, lens, spread) of the FP4 decode scorer: ragged lengths at block
    boundaries, next_n 1..4, and group scales up to 2^spread apart (16: spans past the
    close-scale MFMA case)."""
    return (draw(st.integers(0, 2**31 - 1)), draw(st.integers(1, 4)), draw(st.sampled_from([16, 32, 64])),
            draw(st.lists(DECODE_LENGTHS, min_size=1, max_size=4)), draw(st.sampled_from([0, 0, 3, 16])))


@st.composite
def vllm_paged_params(draw) -> tuple:
    """(seed, batch, next_n, heads, block_size, ctx2d, context lengths, spread) of vLLM's FP4
    paged scorer; ctx2d draws one length per (batch, next_n)."""
    lens = st.sampled_from([0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200])
    B = draw(st.integers(1, 3))
    nn = draw(st.integers(1, 4))
    ctx2d = draw(st.booleans())
    ctx = draw(st.lists(lens, min_size=B * (nn if ctx2d else 1), max_size=B * (nn if ctx2d else 1)))
    return (draw(st.integers(0, 2**31 - 1)), B, nn, draw(st.sampled_from([32, 64])),
            draw(st.sampled_from([16, 32, 64])), ctx2d, ctx, draw(st.sampled_from([0, 0, 3, 16])))


def vllm_ragged_params() -> st.SearchStrategy[tuple]:
    """(seed, rows, tokens, heads, spread, windows) of vLLM's FP4 ragged scorer."""
    return st.tuples(st.integers(0, 2**31 - 1), st.integers(1, 9), st.sampled_from([1, 2, 127, 128, 129, 300]),
                     st.sampled_from([8, 16, 32, 64]), st.sampled_from([0, 3, 16]),
                     st.sampled_from(["random", "causal"]))


def vllm_q_row_params() -> st.SearchStrategy[tuple]:
    """(seed, 128 bf16 patterns, group scale exponent) of vLLM's MXFP4 Q kernel: any pattern
    but a subnormal (Triton's CPU interpreter loads those wrongly)."""
    normal = st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7F80) != 0 or (b & 0x7F) == 0)
    return st.tuples(st.integers(0, 2**31 - 1), st.lists(normal, min_size=128, max_size=128), st.integers(-120, 120))


# ---- indexer cases ---------------------------------------------------------------------------


@st.composite
def indexer_fp4_cases(draw) -> tuple[int, dict[str, Any]]:
    """(seed, keyword arguments) of the FP4 indexer: any shape, slot set and position, with
    E2M1 midpoints and zero rows planted now and then."""
    seed = draw(st.integers(0, 2**31 - 1))
    config = indexer.IndexerConfig("fp4", draw(st.integers(1, 40)), draw(st.sampled_from([16, 32, 48, 64, 128])),
                                   draw(st.booleans()), draw(st.booleans()))
    args = indexer.make_case(config, seed=seed, padded_fraction=draw(st.sampled_from([0.0, 0.25, 0.9])))
    rng = np.random.Generator(np.random.PCG64(seed))
    if draw(st.booleans()):
        indexer.plant_midpoints(args, rng)
    if draw(st.booleans()):
        indexer.zero_rows(args, rng)
    return seed, args


@st.composite
def indexer_fp8_cases(draw, variant: str) -> tuple[int, dict[str, Any]]:
    """(seed, keyword arguments) of the FP8 indexer: any configuration, with ue8m0 scale
    boundaries of the ``variant`` and zero rows planted now and then."""
    seed = draw(st.integers(0, 2**31 - 1))
    config = indexer.IndexerConfig("fp8", draw(st.integers(1, 40)), draw(st.integers(1, 8)), draw(st.booleans()),
                                   draw(st.booleans()), draw(st.sampled_from(["ue8m0", None])), draw(st.booleans()),
                                   draw(st.sampled_from([16, 32, 64])))
    args = indexer.make_case(config, seed=seed, padded_fraction=draw(st.sampled_from([0.0, 0.25, 0.9])))
    rng = np.random.Generator(np.random.PCG64(seed))
    if draw(st.booleans()):
        indexer.plant_scale_boundaries(args, rng, variant)
    if draw(st.booleans()):
        indexer.zero_rows(args, rng)
    return seed, args
