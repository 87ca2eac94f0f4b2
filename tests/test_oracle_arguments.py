"""Arguments of the oracle's public functions: flags are bools, caches cannot be poisoned by an
equal-hashing spelling of an argument, scalars and sizes out of range are ValueErrors naming the
argument, every scalar of the ops goes through one check, outputs keep the documented shape.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from typing import Any, Callable

import numpy as np
import pytest

from mxgate import oracle
from mxgate.conformance.judge import compare_logits
from mxgate.oracle import arguments, exact, layouts, ops, profiles, scales
from mxgate.oracle.formats import e2m1, e4m3
from mxgate.oracle.ops import fastq, frontend
from mxgate.oracle.scorers import sglang as logits_sglang
from mxgate.inputs import logits as lc
from mxgate.inputs.indexer import IndexerConfig, make_case

SEED = 20260611
HUGE_INT = 10**400  # beyond the float64 range: float(HUGE_INT) raises OverflowError
NOT_BOOLS = [0, 1, 0.0, 1.0, np.False_, np.True_, np.int64(1), None, b"satfinite"]


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def e4m3_inputs() -> np.ndarray:
    """Every class the overflow rule decides: finite overflow past both maxima (448 fn, 240
    fnuz) and their rounding ties, Inf, NaN of both signs, plus ordinary values."""
    values = [0.0, -0.0, 1.0, -3.5, 240.0, 247.9, 248.0, 256.0, 448.0, 463.9, 464.0, 480.0, 1000.0,
              3.0e38, np.inf, -np.inf, np.nan, -np.nan, 2.0**-10, -(2.0**-9)]
    x = np.array(values, dtype=np.float32)
    return np.concatenate([x, -x[:14]])


def exact_e4m3(x: np.ndarray, variant: str, saturate: bool | str) -> np.ndarray:
    """The independent model's codes (mxgate.oracle.exact, one value at a time)."""
    overflow = {False: "nan", True: "saturate", "satfinite": "satfinite"}[saturate]
    return np.array([exact.encode_e4m3(int(b), variant, overflow) for b in x.view(np.uint32)], np.uint8)


# ---- flags --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
def test_saturate_refuses_everything_but_bools_and_satfinite(value: object) -> None:
    with pytest.raises(TypeError, match="saturate must be one of False, True, 'satfinite'"):
        oracle.encode_e4m3(e4m3_inputs(), "fn", saturate=value)


def test_saturate_refuses_an_unknown_string_as_a_value_error() -> None:
    with pytest.raises(ValueError, match="saturate must be one of"):
        oracle.encode_e4m3(e4m3_inputs(), "fn", saturate="yes")


# (fnuz, "satfinite") is left out: SPEC 11.3 leaves NaN open there (tests/test_oracle_vs_exact.py)
E4M3_MODES = [("fn", False), ("fn", True), ("fn", "satfinite"), ("fnuz", False), ("fnuz", True)]


@pytest.mark.parametrize("variant, saturate", E4M3_MODES, ids=repr)
def test_encode_e4m3_modes_match_the_exact_model(variant: str, saturate: bool | str) -> None:
    x = e4m3_inputs()
    assert np.array_equal(oracle.encode_e4m3(x, variant, saturate), exact_e4m3(x, variant, saturate))


def test_a_str_subclass_names_the_same_choice() -> None:
    x = e4m3_inputs()
    got = oracle.encode_e4m3(x, np.str_("fn"), np.str_("satfinite"))
    assert np.array_equal(got, exact_e4m3(x, "fn", "satfinite"))
    assert np.array_equal(oracle.encode_e4m3(x, np.str_("fnuz"), True), exact_e4m3(x, "fnuz", True))
    assert np.array_equal(oracle.decode_e4m3(np.arange(256, dtype=np.uint8), np.str_("fn")).view(np.uint32),
                          oracle.decode_e4m3(np.arange(256, dtype=np.uint8), "fn").view(np.uint32))


def _indexer_fp8() -> dict[str, Any]:
    return make_case(IndexerConfig("fp8", 6, 2, True, False, "ue8m0", False, 16), seed=SEED)


def _indexer_fp4() -> dict[str, Any]:
    return make_case(IndexerConfig("fp4", 4, 16, True, False), seed=SEED)


def _fp4_decode() -> dict[str, Any]:
    return dict(lc.fp4_decode_case(SEED, 2, 128, 1, 16).kwargs)


def _fp4_prefill() -> dict[str, Any]:
    return dict(lc.fp4_prefill_case(SEED, 1, 100, 2, 16).kwargs)


def _fp8_decode() -> dict[str, Any]:
    return dict(lc.fp8_decode_case(SEED, 2, 100, 1, 16).kwargs)


def _sglang_decode() -> dict[str, Any]:
    return dict(lc.sglang_decode_case(SEED, 2, 40, 16).kwargs)


FLAG_CALLS: list[tuple[str, Callable[[dict[str, Any]], Any], Callable[[], dict[str, Any]], str]] = [
    ("indexer is_neox", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp8, "is_neox"),
    ("indexer preshuffle", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp8, "preshuffle"),
    ("indexer compute_all_q_rope", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp4,
     "compute_all_q_rope"),
    ("fp4 decode emulate", lambda k: ops.pa_mqa_logits_fp4_scored(**k), _fp4_decode, "emulate"),
    ("fp4 prefill emulate", lambda k: ops.pa_mqa_logits_fp4_prefill_scored(**k), _fp4_prefill, "emulate"),
    ("fp8 preshuffle", lambda k: ops.pa_mqa_logits_fp8(**k), _fp8_decode, "preshuffle"),
    ("fp8 Preshuffle", lambda k: ops.pa_mqa_logits_fp8(**k), _fp8_decode, "Preshuffle"),
    ("fp8 emulate", lambda k: ops.pa_mqa_logits_fp8_scored(**k), _fp8_decode, "emulate"),
    ("sglang emulate", lambda k: ops.fp4_index_logits_decode_scored(**k), _sglang_decode, "emulate"),
]


@pytest.mark.parametrize("value", [0, 1, np.False_, np.True_], ids=repr)
@pytest.mark.parametrize("label, call, build, name", FLAG_CALLS, ids=[c[0] for c in FLAG_CALLS])
def test_op_flags_are_bools_only(label: str, call: Callable, build: Callable, name: str, value: object) -> None:
    kwargs = build()
    kwargs[name] = value
    with pytest.raises(TypeError, match=f"{name} must be a bool, got (int|numpy.bool)"):
        call(kwargs)


def test_front_end_fields_are_checked() -> None:
    with pytest.raises(TypeError, match="fma must be a bool"):
        frontend.FrontEnd("rn", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rsqrt must be one of"):
        frontend.FrontEnd("fast", True)  # type: ignore[arg-type]
    assert frontend.FrontEnd(np.str_("up"), False) == frontend.FrontEnd("up", False)  # type: ignore[arg-type]


# ---- caches: same bytes in any order ----------------------------------------------------------


def _caches() -> list:
    return [e4m3._table, e4m3._decode_table, e2m1._table, e2m1._reciprocals, fastq._tables,
            fastq._pair_tables, fastq._divisor_reciprocals, exact._fl32_of_float, exact._fl32_one_over,
            exact._log2f_value, exact._log2f_threshold, exact._e4m3_max, exact._e4m3_code_of_max,
            scales.log2f_threshold_table]


def _clear_caches() -> None:
    for cached in _caches():
        cached.cache_clear()


def _bytes(a: object) -> bytes:
    if isinstance(a, tuple):
        return b"|".join(_bytes(x) for x in a)
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a).tobytes()
    return repr(a).encode()


def _e2m1_x() -> np.ndarray:
    x = rng_of(SEED).standard_normal(256).astype(np.float32) * np.float32(3.0)
    return np.concatenate([x, np.array([0.25, 0.75, -2.5, 5.0, -0.0, np.inf, -np.inf, np.nan, 7.0], np.float32)])


def _indexer_bytes(profile: str) -> Callable[[], object]:
    def run() -> object:
        return tuple(ops.indexer_qk_rope_quant_and_cache(**_indexer_fp4(), profile=profile))
    return run


X8 = e4m3_inputs()
CODES = np.arange(256, dtype=np.uint8)
SCALE = rng_of(SEED + 1).integers(0, 256, size=(265,), dtype=np.uint8)
TIE_AWAY = dataclasses.replace(profiles.get("gfx950"), name="gfx950-away", tie="away")

# (label, call): results of the cached functions, each compared with what it gives first thing
# after the caches are cleared.
GOOD_CALLS: list[tuple[str, Callable[[], object]]] = [
    ("e4m3 fn nan", lambda: oracle.encode_e4m3(X8, "fn", False)),
    ("e4m3 fn saturate", lambda: oracle.encode_e4m3(X8, "fn", True)),
    ("e4m3 fn satfinite", lambda: oracle.encode_e4m3(X8, "fn", "satfinite")),
    ("e4m3 fnuz nan", lambda: oracle.encode_e4m3(X8, "fnuz", False)),
    ("e4m3 fnuz saturate", lambda: oracle.encode_e4m3(X8, "fnuz", True)),
    ("e4m3 decode fn", lambda: oracle.decode_e4m3(CODES, "fn")),
    ("e4m3 decode fnuz", lambda: oracle.decode_e4m3(CODES, "fnuz")),
    ("e2m1 gfx950", lambda: oracle.encode_e2m1(_e2m1_x(), "gfx950")),
    ("e2m1 argmin", lambda: oracle.encode_e2m1(_e2m1_x(), "argmin")),
    ("e2m1 tie away", lambda: oracle.encode_e2m1(_e2m1_x(), TIE_AWAY)),
    ("e2m1 scaled gfx950", lambda: oracle.encode_e2m1(_e2m1_x(), "gfx950", scale=SCALE)),
    ("e2m1 scaled ocp", lambda: oracle.encode_e2m1(_e2m1_x(), "ocp", scale=SCALE)),
    ("indexer fp4 gfx950", _indexer_bytes("gfx950")),
    ("indexer fp4 deepgemm", _indexer_bytes("deepgemm")),
    ("exact fl32", lambda: (exact.fl32_of_float(1e-4), exact.fl32_of_float(1e-10), exact.fl32_one_over(448))),
    ("exact e4m3 max", lambda: (exact.e4m3_max("fn"), exact.e4m3_max("fnuz"), exact.encode_e4m3(0x7F800000, "fn", "saturate"))),
    ("exact log2f", lambda: (exact.log2f_threshold(-3), exact.ceil_log2f(0x3FC00001))),
]

# Calls that must be refused (each an equal-hashing or equal-comparing stand-in for a valid
# argument); they run between the good calls and must not change what those return.
BAD_CALLS: list[tuple[str, Callable[[], object]]] = [
    ("saturate=0", lambda: oracle.encode_e4m3(X8, "fn", 0)),
    ("saturate=1", lambda: oracle.encode_e4m3(X8, "fnuz", 1)),
    ("saturate=np.False_", lambda: oracle.encode_e4m3(X8, "fn", np.False_)),
    ("saturate=np.True_", lambda: oracle.encode_e4m3(X8, "fn", np.True_)),
    ("saturate=0.0", lambda: oracle.encode_e4m3(X8, "fn", 0.0)),
    ("e4m3.table saturate=0", lambda: e4m3.table("fn", 0)),
    ("variant=1", lambda: oracle.decode_e4m3(CODES, 1)),
    ("exact fl32 True", lambda: exact.fl32_of_float(True)),
    ("exact one_over 448.0", lambda: exact.fl32_one_over(448.0)),  # type: ignore[arg-type]
    ("exact one_over True", lambda: exact.fl32_one_over(True)),
    ("exact log2f 1.5", lambda: exact.log2f_value(1.5)),  # type: ignore[arg-type]
    ("exact threshold True", lambda: exact.log2f_threshold(True)),
    ("FrontEnd fma=1", lambda: frontend.FrontEnd("rn", 1)),  # type: ignore[arg-type]
]


def _references() -> dict[str, bytes]:
    out = {}
    for label, call in GOOD_CALLS:
        _clear_caches()
        out[label] = _bytes(call())
    return out


def _orders() -> list[list[int]]:
    n = len(GOOD_CALLS)
    rng = rng_of(SEED + 2)
    return [list(range(n)), list(range(n))[::-1]] + [list(rng.permutation(n)) for _ in range(4)]


def test_cached_functions_give_the_same_bytes_in_any_order() -> None:
    references = _references()
    accepted: list[str] = []  # bad calls that did not raise
    differ: list[str] = []  # good calls whose bytes depend on what ran before
    for number, order in enumerate(_orders()):
        _clear_caches()
        bad = itertools.cycle(BAD_CALLS)
        for position, index in enumerate(order):
            # a call that must be refused before every good one, the bad ones in turn
            bad_label, bad_call = next(bad)
            try:
                bad_call()
                accepted.append(bad_label)
            except (TypeError, ValueError):
                pass
            label, call = GOOD_CALLS[index]
            if _bytes(call()) != references[label]:
                differ.append(f"order #{number} (seed {SEED + 2}) call {position} {label!r} after {bad_label!r}")
    assert not differ and not accepted, f"differ: {differ}; accepted: {sorted(set(accepted))}"


def test_a_refused_saturate_first_leaves_saturate_false_non_saturating() -> None:
    """The reported sequence: saturate=0 first, then saturate=False in the same process."""
    _clear_caches()
    x = np.array([1000.0, -1000.0, np.inf], np.float32)
    with pytest.raises(TypeError):
        oracle.encode_e4m3(x, saturate=0)
    assert oracle.encode_e4m3(x, saturate=False).tolist() == [0x7F, 0xFF, 0x7F]
    assert oracle.encode_e4m3(x, saturate=True).tolist() == [0x7E, 0xFE, 0x7E]
    assert oracle.encode_e4m3(x, saturate=False).tolist() == [0x7F, 0xFF, 0x7F]


def test_profile_caches_use_only_the_fields_they_read() -> None:
    """Two profiles that differ only in fields the E2M1 table ignores give the same codes; a
    profile whose table field is no valid value is refused, naming the field."""
    x = _e2m1_x()
    renamed = dataclasses.replace(profiles.get("gfx950"), name="gfx950-copy", amax_floor=1.0)
    assert np.array_equal(oracle.encode_e2m1(x, renamed), oracle.encode_e2m1(x, "gfx950"))
    bogus = dataclasses.replace(profiles.get("gfx950"), name="bogus-tie", tie="nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="profile.tie must be one of"):
        oracle.encode_e2m1(x, bogus)


# ---- encode_e2m1: the output has x's shape ------------------------------------------------------


def test_encode_e2m1_scale_with_more_dimensions_than_x_is_refused() -> None:
    x = np.array([0.5, 1.0, 3.0, -6.0], np.float32)
    with pytest.raises(ValueError, match=r"scale must broadcast to the shape of x \(4,\), got shape \(3, 4\)"):
        oracle.encode_e2m1(x, "gfx950", scale=np.full((3, 4), 127, np.uint8))
    with pytest.raises(ValueError, match=r"scale must broadcast to the shape of x \(4,\), got shape \(3,\)"):
        oracle.encode_e2m1(x, "gfx950", scale=np.full(3, 127, np.uint8))
    with pytest.raises(ValueError, match="scale must broadcast"):
        e2m1.scaled_by_e8m0(x, np.full((2, 4), 127, np.uint8))


def test_encode_e2m1_scale_broadcast_keeps_x_shape_and_values() -> None:
    rng = rng_of(SEED + 3)
    x = (rng.standard_normal((3, 4, 8)) * 40).astype(np.float32)
    scale = rng.integers(120, 135, size=(3, 1, 8), dtype=np.uint8)
    got = oracle.encode_e2m1(x, "gfx950", scale=scale)
    assert got.shape == x.shape
    want = [exact.encode_e2m1_scaled(int(b), int(s), "gfx950")
            for b, s in zip(x.view(np.uint32).reshape(-1), np.broadcast_to(scale, x.shape).reshape(-1))]
    assert got.reshape(-1).tolist() == want, f"seed {SEED + 3}"
    assert oracle.encode_e2m1(x[0, 0], "gfx950", scale=np.array(127, np.uint8)).shape == (8,)


# ---- numbers beyond float range and huge sizes: ValueError naming the argument ------------------


SCALAR_CALLS: list[tuple[str, Callable[[], object], str]] = [
    ("round_bf16", lambda: oracle.round_bf16(HUGE_INT), "x must be exactly representable"),
    ("bf16_bits", lambda: oracle.bf16_bits(-HUGE_INT), "x must be exactly representable"),
    ("encode_e2m1", lambda: oracle.encode_e2m1(HUGE_INT), "x must be exactly representable"),
    ("encode_e4m3", lambda: oracle.encode_e4m3(HUGE_INT), "x must be exactly representable"),
    ("e8m0_scale", lambda: oracle.e8m0_scale(HUGE_INT), "amax must be exactly representable"),
    ("e8m0_scale 1e39", lambda: oracle.e8m0_scale(1e39), "amax must be exactly representable"),
    ("e2m1 int not float32", lambda: oracle.encode_e2m1(2**60 + 1), "x must be exactly representable"),
    ("ceil_log2f", lambda: scales.ceil_log2f(HUGE_INT), "s must be exactly representable"),
    ("ue8m0_round", lambda: scales.ue8m0_round(HUGE_INT), "s must be exactly representable"),
    ("fp8_token_scale fp8_max", lambda: scales.fp8_token_scale(np.ones(2, np.float32), HUGE_INT,
                                                             arithmetic="divide", amax_floor=1e-4),
     "fp8_max must be finite"),
    ("fp8_token_scale amax_floor", lambda: scales.fp8_token_scale(np.ones(2, np.float32), 448.0,
                                                                 arithmetic="divide", amax_floor=HUGE_INT),
     "amax_floor must be finite"),
    ("fp8_token_scale fp8_max 0", lambda: scales.fp8_token_scale(np.ones(2, np.float32), 0,
                                                                arithmetic="divide", amax_floor=1e-4),
     "fp8_max must be > 0"),
    ("exact fl32_of_float", lambda: exact.fl32_of_float(HUGE_INT), "value must be finite"),
    ("exact fp8_token_scale", lambda: exact.fp8_token_scale(0, 448, "divide", HUGE_INT), "amax_floor must be finite"),
    ("exact fp8_token_scale 1e39", lambda: exact.fp8_token_scale(0, 448, "divide", 1e39), "amax_floor must be finite"),
]


@pytest.mark.parametrize("label, call, message", SCALAR_CALLS, ids=[c[0] for c in SCALAR_CALLS])
def test_numbers_out_of_range_are_value_errors(label: str, call: Callable, message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning on the way
        with pytest.raises(ValueError, match=message):
            call()


def test_python_ints_that_are_float32_values_still_work() -> None:
    assert int(oracle.encode_e2m1(2**60, "gfx950")) == 0x7  # 2^60 is a float32: saturates to 6
    assert int(oracle.bf16_bits(-(2**100))) == int(oracle.bf16_bits(np.float32(-(2.0**100))))
    assert oracle.e8m0_scale(0).tolist() == oracle.e8m0_scale(np.float32(0)).tolist()


def _first_dim(layout: layouts.Layout) -> str:
    return next(k for k, v in layout.dim_defaults.items() if v is None)


def _dims(layout: layouts.Layout, **override: int) -> dict[str, int]:
    dims = {k: 16 for k, v in layout.dim_defaults.items() if v is None}
    dims.update(override)
    return dims


@pytest.mark.parametrize("huge", [10**13, 2**62, 10**30, HUGE_INT], ids=["1e13", "2^62", "1e30", "1e400"])
@pytest.mark.parametrize("name", layouts.names())
def test_layout_sizes_beyond_the_address_space_are_value_errors(name: str, huge: int) -> None:
    layout = layouts.get(name)
    dims = _dims(layout, **{_first_dim(layout): huge})
    for method in (layout.new_buffer, layout.buffer_shape, layout.dims, layout.num_slots, layout.describe,
                   layout.index_map, layout.regions):
        with pytest.raises(ValueError, match=f"{_first_dim(layout)}=") as info:
            method(**dims)
        assert "2^47" in str(info.value), f"{name}.{method.__name__}: {info.value}"


@pytest.mark.parametrize("name, count", [("aiter-fp4-kv", 2**33), ("aiter-fp8-kv", 2**34), ("sglang-page68", 2**32)])
def test_index_maps_beyond_the_address_space_are_value_errors(name: str, count: int) -> None:
    # the buffer itself would fit (2^45 bytes or less), its int64 index map (8 bytes per
    # byte or nibble: 2^48 bytes or more) would not; nothing is allocated on the way
    layout = layouts.get(name)
    dims = _dims(layout, **{_first_dim(layout): count})
    assert layout.buffer_shape(**dims)  # the buffer alone is within range
    with pytest.raises(ValueError, match="int64 index_map"):
        layout.index_map(**dims)
    with pytest.raises(ValueError, match="int64 field_bytes"):
        layout.regions(**dims)


def test_describe_byte_offset_out_of_range() -> None:
    kv = layouts.get("aiter-fp4-kv")
    with pytest.raises(ValueError, match=r"offset must be in \[0, 4096\)"):
        kv.describe_byte(HUGE_INT, num_blocks=1)
    with pytest.raises(ValueError, match=r"offset must be in \[0, 4096\)"):
        kv.describe_byte(4096, num_blocks=1)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        kv.describe_byte(-1, num_blocks=1)
    with pytest.raises(TypeError, match="offset must be an int"):
        kv.describe_byte(3.0, num_blocks=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nibble must be <= 1"):
        kv.describe_byte(3, 2, num_blocks=1)
    with pytest.raises(ValueError, match="nibble must be 0 .low. or 1 .high."):
        kv.locate([3], nibble=2, num_blocks=1)
    with pytest.raises(TypeError, match="nibble must be 0 or 1"):
        kv.locate([3], nibble=0.5, num_blocks=1)
    assert kv.describe_byte(3, 1, num_blocks=1) == kv.describe_byte(np.int64(3), np.int64(1), num_blocks=1)


def _with(build: Callable[[], dict[str, Any]], **changes: object) -> dict[str, Any]:
    kwargs = build()
    kwargs.update(changes)
    return kwargs


def _indexer_fresh_fp8(**changes: object) -> dict[str, Any]:
    kwargs = _indexer_fp8()
    kwargs.update(kv_cache=None, **changes)
    return kwargs


OP_SIZE_CALLS: list[tuple[str, Callable[[], object], str]] = [
    ("indexer num_blocks", lambda: ops.indexer_qk_rope_quant_and_cache(**_indexer_fresh_fp8(num_blocks=10**12)),
     "num_blocks=1000000000000, kv_block_size=64 is too large: a fresh kv_cache"),
    ("indexer num_blocks 1e400", lambda: ops.indexer_qk_rope_quant_and_cache(**_indexer_fresh_fp8(num_blocks=HUGE_INT)),
     "num_blocks=an int of 1329 bits, kv_block_size=64 is too large"),
    ("indexer kv_block_size", lambda: ops.indexer_qk_rope_quant_and_cache(**_indexer_fresh_fp8(kv_block_size=2**60)),
     r"num_blocks=1 \(from slot_mapping\), kv_block_size=1152921504606846976 is too large"),
    ("indexer fp4 num_blocks", lambda: ops.indexer_qk_rope_quant_and_cache(
        **_with(_indexer_fp4, kv_cache=None, kv_cache_scale=None, mode="fp4", num_blocks=2**50)),
     "num_blocks=1125899906842624 is too large"),
    ("fp4 decode max_seq_len", lambda: ops.pa_mqa_logits_fp4(**_with(_fp4_decode, max_seq_len=10**15)),
     "max_seq_len=1000000000000000 is too large"),
    ("fp4 prefill max_seq_len", lambda: ops.pa_mqa_logits_fp4_prefill(**_with(_fp4_prefill, max_seq_len=HUGE_INT)),
     "max_seq_len=an int of 1329 bits is too large"),
    ("fp8 max_seq_len", lambda: ops.pa_mqa_logits_fp8(**_with(_fp8_decode, max_seq_len=10**15)),
     "max_seq_len=1000000000000000 is too large"),
    ("topk k", lambda: ops.topk_indices(np.zeros((2, 3)), 10**15), "k=1000000000000000 is too large"),
    ("paged capacity", lambda: logits_sglang.paged_slots(np.zeros(1, np.int64), np.zeros((1, 4), np.int64),
                                                         np.ones(1, np.int64), 10**15),
     "capacity=1000000000000000 is too large"),
    ("fp4 decode weight_scale", lambda: ops.pa_mqa_logits_fp4(**_with(_fp4_decode, weight_scale=HUGE_INT)),
     "weight_scale must be finite in float32"),
    ("indexer epsilon", lambda: ops.indexer_qk_rope_quant_and_cache(**_with(_indexer_fp8, epsilon=HUGE_INT)),
     "epsilon must be finite in float32"),
    ("indexer weights_scale", lambda: ops.indexer_qk_rope_quant_and_cache(**_with(_indexer_fp8, weights_scale=-HUGE_INT)),
     "weights_scale must be finite in float32"),
    ("compare_logits fill", lambda: compare_logits(_scored(), _scored().emulated, fill=HUGE_INT),
     "fill must be within the float64 range"),
]


def _scored() -> ops.ScoredLogits:
    return ops.pa_mqa_logits_fp4_scored(**_fp4_decode())


@pytest.mark.parametrize("label, call, message", OP_SIZE_CALLS, ids=[c[0] for c in OP_SIZE_CALLS])
def test_op_sizes_and_numbers_out_of_range_are_value_errors(label: str, call: Callable, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_a_refused_fresh_cache_size_writes_nothing() -> None:
    kwargs = _indexer_fresh_fp8(num_blocks=10**12)
    before = {k: v.copy() for k, v in kwargs.items() if k in ("q_out", "weights_out")}
    with pytest.raises(ValueError):
        ops.indexer_qk_rope_quant_and_cache(**kwargs)
    for name, buffer in before.items():
        assert np.array_equal(buffer.view(np.uint8), kwargs[name].view(np.uint8)), name


# ---- scalar arguments of the ops: one check, one message ---------------------------------------


SCALAR_OPS: list[tuple[str, Callable[[dict[str, Any]], Any], Callable[[], dict[str, Any]]]] = [
    ("epsilon", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp8),
    ("weights_scale", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp8),
    ("weights_scale", lambda k: ops.indexer_qk_rope_quant_and_cache(**k), _indexer_fp4),
    ("weight_scale", lambda k: ops.pa_mqa_logits_fp4(**k), _fp4_decode),
    ("weight_scale", lambda k: ops.pa_mqa_logits_fp4_prefill(**k), _fp4_prefill),
]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e39, np.float64(-1e300), HUGE_INT],
                         ids=["nan", "inf", "-inf", "1e39", "-1e300", "1e400"])
@pytest.mark.parametrize("name, call, build", SCALAR_OPS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCALAR_OPS)])
def test_op_scalars_must_be_finite_with_one_message(name: str, call: Callable, build: Callable, value: object) -> None:
    kwargs = build()
    kwargs[name] = value
    with pytest.raises(ValueError, match=f"^{name} must be finite in float32, got "):
        call(kwargs)


@pytest.mark.parametrize("value", [True, np.True_, "1e-6", None, 1j], ids=repr)
@pytest.mark.parametrize("name, call, build", SCALAR_OPS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCALAR_OPS)])
def test_op_scalars_must_be_real_numbers_with_one_message(name: str, call: Callable, build: Callable,
                                                          value: object) -> None:
    kwargs = build()
    kwargs[name] = value
    with pytest.raises(TypeError, match=f"^{name} must be a real number, got "):
        call(kwargs)


@pytest.mark.parametrize("name, call, build", SCALAR_OPS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCALAR_OPS)])
def test_op_scalars_accept_every_real_spelling_alike(name: str, call: Callable, build: Callable) -> None:
    """A Python float, a NumPy float64 and a NumPy float32 of the same value give the same
    bytes (the C float the kernel receives), and so do 1, 1.0 and numpy.int32(1)."""
    kwargs = build()
    value = float(kwargs.get(name, 1.0))
    results = []
    for spelling in (value, np.float64(value), np.float32(value)):
        results.append(_bytes(call({**build(), name: spelling})))
    assert len(set(results)) == 1, name
    ones = {_bytes(call({**build(), name: spelling})) for spelling in (1, 1.0, np.int32(1))}
    assert len(ones) == 1, name


def test_the_validation_modules_share_the_scalar_checks() -> None:
    """logits_validate and the indexer's validation answer a bad scalar as oracle.arguments does."""
    from mxgate.oracle.ops import indexer_checks as validation
    from mxgate.oracle.scorers import common as logits_validate

    for bad in (float("nan"), HUGE_INT):
        with pytest.raises(ValueError) as shared:
            arguments.real(bad, "x")
        with pytest.raises(ValueError) as scorer:
            logits_validate.real_f32(bad, "x")
        assert str(shared.value) == str(scorer.value)
    with pytest.raises(TypeError) as shared_int:
        arguments.integer(2.0, "n")
    with pytest.raises(TypeError) as scorer_int:
        logits_validate.positive_int(2.0, "n")
    assert str(shared_int.value) == str(scorer_int.value)
    assert not any(hasattr(validation, name) for name in ("_flag", "_real", "_int"))


# ---- layouts: fill and unknown keywords ---------------------------------------------------------


@pytest.mark.parametrize("fill, error", [(2.7, TypeError), (2.0, TypeError), (True, TypeError), ("1", TypeError),
                                         (-1, ValueError), (256, ValueError), (HUGE_INT, ValueError)],
                         ids=repr)
def test_new_buffer_fill_is_a_byte_value(fill: object, error: type) -> None:
    with pytest.raises(error, match="fill must be"):
        layouts.get("aiter-fp4-kv").new_buffer(fill=fill, num_blocks=1)


@pytest.mark.parametrize("fill", [0, 165, 255, np.uint8(7), np.int64(200)], ids=repr)
def test_new_buffer_fill_fills_every_byte(fill: object) -> None:
    buf = layouts.get("aiter-fp4-kv").new_buffer(fill=fill, num_blocks=2)
    assert buf.dtype == np.uint8 and buf.shape == (2, 1, 4, 64, 16)
    assert np.all(buf == int(fill))  # type: ignore[call-overload]


@pytest.mark.parametrize("name", layouts.names())
def test_describe_refuses_unknown_keywords(name: str) -> None:
    layout = layouts.get(name)
    with pytest.raises(TypeError, match="unknown dims keyword.*bogus"):
        layout.describe(bogus=3)
    with pytest.raises(TypeError, match="unknown dims keyword.*bogus"):
        layout.describe(bogus=3, **_dims(layout))
    with pytest.raises(TypeError, match=f"{_first_dim(layout)} must be an int"):
        layout.describe(**{_first_dim(layout): "4"})
    generic = layout.describe()  # without dims: the generic description, as before
    assert generic.startswith(f"{name}: ") and "dims:" not in generic
    assert "dims:" in layout.describe(**_dims(layout))


# ---- the shared checks themselves ---------------------------------------------------------------


def test_choice_returns_the_canonical_member() -> None:
    modes = (False, True, "satfinite")
    got = arguments.choice(np.str_("satfinite"), "saturate", modes)
    assert got == "satfinite" and type(got) is str
    assert arguments.choice(False, "saturate", modes) is False
    assert arguments.choice(None, "mode", (None, "fp8")) is None
    with pytest.raises(TypeError, match="got int 0"):
        arguments.choice(0, "saturate", modes)
    with pytest.raises(TypeError, match="got numpy.bool"):
        arguments.choice(np.False_, "saturate", modes)


def test_scalar_checks_canonicalise() -> None:
    assert arguments.flag(True, "f") is True
    assert type(arguments.integer(np.int16(5), "n")) is int
    assert arguments.integer(2**70, "n") == 2**70  # big ints stay exact for the range checks
    with pytest.raises(TypeError, match="n must be an int, got numpy.bool"):
        arguments.integer(np.True_, "n")
    assert arguments.real(1, "s") == np.float32(1.0) and isinstance(arguments.real(1, "s"), np.float32)
    assert np.isnan(arguments.real(float("nan"), "fill", finite=False))
    assert arguments.real(0.1, "s") == np.float32(0.1)  # rounded to nearest, as a C float
    with pytest.raises(ValueError, match="s must be > 0, got 0.0"):
        arguments.real(0.0, "s", positive=True)
    with pytest.raises(ValueError, match="an int of 1329 bits"):
        arguments.integer(HUGE_INT, "n", maximum=10)


def test_ml_dtypes_arrays_are_accepted_by_dtype_name() -> None:
    """The oracle never imports ml_dtypes; its bf16 and float8 arrays are still taken."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from mxgate import oracle
    from mxgate.oracle.arguments import ONE_BYTE_FLOAT_NAMES, as_float32

    x = np.array([1.5, -0.0, 3.0], dtype=ml_dtypes.bfloat16)
    assert as_float32(x, "x").tobytes() == np.array([1.5, -0.0, 3.0], np.float32).tobytes()
    assert oracle.encode_e2m1(x, "gfx950").tolist() == [3, 8, 5]
    assert {n for n in ONE_BYTE_FLOAT_NAMES if hasattr(ml_dtypes, n)} == {
        np.dtype(getattr(ml_dtypes, n)).name for n in ONE_BYTE_FLOAT_NAMES if hasattr(ml_dtypes, n)}


def test_registering_an_equal_profile_keeps_the_registered_object() -> None:
    """A loaded backend registers its worker's copy of a profile: the registered object stays,
    so the module's own handle keeps its identity."""
    shipped = profiles.get("vllm-rocm")
    copy = dataclasses.replace(shipped)
    assert copy == shipped and copy is not shipped
    assert profiles.register(copy) is shipped
    assert profiles.get("vllm-rocm") is shipped
    with pytest.raises(ValueError, match="is taken"):
        profiles.register(dataclasses.replace(shipped, tie="zero"))
