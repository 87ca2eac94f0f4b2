"""One function, two namespaces: the oracle's indexer op on torch tensors against itself on
NumPy arrays, byte for byte: configs, envelope members, special values, scalar kinds, fresh
outputs, errors (CPU in CI, the card with ``--device cuda``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate import oracle  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.inputs import indexer as cases  # noqa: E402
from mxgate.oracle.ops import frontend as ofrontend  # noqa: E402

from array_api_compat import torch as xt  # noqa: E402

from mxgate.oracle.ops import f32math  # noqa: E402
from mxgate.oracle.xp import floats  # noqa: E402

from namespaces import assert_same, element_inputs, raw_bytes, rng_of, tt  # noqa: E402

OP = oracle.ops.indexer_qk_rope_quant_and_cache
SEED = 20261201
PROFILES = profiles.names()
GPU_DEVICE = "cuda"


# ---- f32math: the front end's arithmetic ------------------------------------------------------


def test_float16_rounding_and_decoding() -> None:
    """NumPy's float16 round trip (its astype) and the integer algorithm off NumPy, every input
    class; every float16 pattern decoded."""
    x = floats(element_inputs(SEED))
    assert_same(f32math.round_f16(x), f32math.round_f16(tt(x)), "round_f16", x)
    assert_same(f32math.round_f16(x), f32math.f16_bits_to_f32(f32math.f32_to_f16_bits(x)), "f16 bits on NumPy", x)
    every = np.arange(1 << 16, dtype=np.int32)
    assert_same(every.astype(np.uint16).view(np.float16).astype(np.float32), f32math.f16_bits_to_f32(tt(every)),
                "f16 -> f32")


def test_fma_rsqrt_nextafter_and_nan_arithmetic() -> None:
    """fma32 (midpoints, subnormal sums, specials), rsqrt32 and nextafter on both namespaces;
    Arith's NaN bits off NumPy are x86 NumPy's."""
    rng = rng_of(SEED)
    x = floats(element_inputs(SEED))
    picks = [rng.permutation(x) for _ in range(3)]
    a, b, c = picks
    with np.errstate(all="ignore"):
        assert_same(f32math.rsqrt32(x), f32math.rsqrt32(tt(x)), "rsqrt32", x)
        for toward in (0.0, float("inf")):
            assert_same(f32math.nextafter(x, toward), f32math.nextafter(tt(x), toward), f"nextafter {toward}", x)
        # fma: NaN bits through Arith (the bare fma32 keeps the device's own NaN)
        ar = f32math.Arith(xt)
        assert_same(f32math.fma32(a, b, c), ar.fma(tt(a), tt(b), tt(c)), "fma32", a)
        half = np.float32(2.0**-24) * (1 + 2 * rng.integers(0, 1 << 20, 4096)).astype(np.float32)
        ones = np.ones_like(half)
        assert_same(f32math.fma32(ones, ones, half), f32math.fma32(tt(ones), tt(ones), tt(half)), "fma32 midpoints")
        for name in ("add", "sub", "mul", "div"):
            want = getattr(f32math.Arith(np), name)(a, b)
            assert_same(want, getattr(ar, name)(tt(a), tt(b)), f"Arith.{name}", a)
        assert_same(-a, ar.neg(tt(a)), "Arith.neg", a)


def op_inputs(args: dict, device: str = "cpu") -> dict:
    return {k: (tt(v, device) if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def compare_op(args: dict, note: str, device: str = "cpu", general: bool = False, **options) -> int:
    """The op on tensors vs on NumPy, every output; general: NumPy's general path too (its bf16
    fast path off; tensors always take the general path)."""
    from mxgate.oracle.ops import indexer as oracle_indexer

    saved = oracle_indexer._FAST_PATH
    oracle_indexer._FAST_PATH = saved and not general
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            want = OP(**cases.copy_case(args), **options)
    finally:
        oracle_indexer._FAST_PATH = saved
    tensors = op_inputs(cases.copy_case(args), device)
    got = OP(**tensors, **options)
    compared = 0
    for field, w, g in zip(want._fields, want, got):
        if w is None:
            assert g is None, f"{note}: {field} should be absent"
            continue
        assert isinstance(g, torch.Tensor) and g.device.type == torch.device(device).type, f"{note}: {field} on {device}"
        if tensors.get(field) is not None:
            assert g is tensors[field], f"{note}: {field} is the caller's tensor, written in place"
        compared += assert_same(w, g, f"{note} {field}")
    return compared


FP8_PROFILES = ["gfx950", "aiter-gfx942", "torch-cpu", "cuda-satfinite"]


@pytest.mark.parametrize("config", cases.PR_FP4_CONFIGS, ids=[c.id for c in cases.PR_FP4_CONFIGS])
def test_indexer_fp4_configs_every_profile(config) -> None:
    args = cases.make_case(config)
    for name in PROFILES:
        compare_op(args, f"seed {config.seed} {config.id} {name}", profile=name)


def test_indexer_fp8_configs() -> None:
    """All 192 FP8 configs under gfx950, every eighth under the other FP8 rules."""
    for i, config in enumerate(cases.PR_FP8_CONFIGS):
        args = cases.make_case(config)
        for name in FP8_PROFILES if i % 8 == 0 else ["gfx950"]:
            compare_op(args, f"seed {config.seed} {config.id} {name}", profile=name)


@pytest.mark.parametrize("mode", ["fp4", "fp8"])
def test_indexer_every_envelope_member(mode: str) -> None:
    """The envelope probe, built so that each member gives different bytes, for every member."""
    args = cases.envelope_probe_case(mode)
    seen = set()
    for variant in ofrontend.VARIANT_NAMES:
        compare_op(args, f"probe {mode} {variant}", variant=variant)
        out = OP(**op_inputs(cases.copy_case(args)), variant=variant)
        seen.add(raw_bytes(out.kv_cache).tobytes())
    assert len(seen) > 1, "the probe should tell the members apart"
    config = cases.IndexerConfig(mode, 9, 16, False, True, "ue8m0", False, 16 if mode == "fp8" else 64)
    for variant in ofrontend.VARIANT_NAMES:
        compare_op(cases.make_case(config), f"{config.id} {variant}", variant=variant)


_SPECIAL_BF16 = np.array([0x7F80, 0xFF80, 0xFFC0, 0x7FC1, 0x7F81, 0x0001, 0x8001, 0x7F7F, 0xFF7F,
                          0x0080, 0x0000, 0x8000, 0x3F80, 0x1F80, 0x5F80], np.uint16)


def _plant_specials(args: dict, rng: np.random.Generator) -> None:
    """At most one special value per Q row (token, head), K row and cos/sin token row: where
    two different NaNs meet, the oracle's pick follows NumPy's loop choice (see docs/twin.md)."""
    q, k = args["q"], args["k"]
    t, h, _ = q.shape
    for rows, width in ((q.reshape(t * h, 128), 128), (k, 128)):
        chosen = rng.random(rows.shape[0]) < 0.4
        idx = np.flatnonzero(chosen)
        rows[idx, rng.integers(0, width, idx.size)] = rng.choice(_SPECIAL_BF16, idx.size)
    pos = np.clip(args["positions"], 0, args["cos_cache"].shape[0] - 1)
    for token in rng.choice(t, size=max(1, t // 3), replace=False):
        table = args["cos_cache"] if rng.random() < 0.5 else args["sin_cache"]
        table[pos[token], rng.integers(0, 32)] = rng.choice(_SPECIAL_BF16)


@pytest.mark.parametrize("seed", range(SEED, SEED + 12))
def test_indexer_special_values_and_scalar_kinds(seed: int) -> None:
    rng = rng_of(seed)
    mode = "fp4" if seed % 2 else "fp8"
    config = cases.IndexerConfig(mode, int(rng.integers(1, 12)), 16 * int(rng.integers(1, 3)), bool(rng.integers(2)),
                                 bool(rng.integers(2)), "ue8m0" if mode == "fp4" or rng.integers(2) else None,
                                 mode == "fp8" and bool(rng.integers(2)), 64 if mode == "fp4" else 16)
    args = cases.make_case(config, seed=seed, max_pos=64)
    _plant_specials(args, rng)
    kind = ("bf16", "fp16", "fp32")[seed % 3]
    if kind != "bf16":
        dtype = np.float16 if kind == "fp16" else np.float32
        for name in ("q", "k", "weights", "cos_cache", "sin_cache"):
            with np.errstate(over="ignore"):
                args[name] = ofrontend.to_f32(args[name], "bf16").astype(dtype)
        if mode == "fp4":
            args["weights_out"] = np.zeros(args["weights_out"].shape, dtype)
    variant = ofrontend.VARIANT_NAMES[seed % 6]
    # the general path: the oracle's bf16 fast path takes a NaN's bit pattern as a group's amax,
    # which is wrong for profiles whose reductions skip NaN (threshold, sglang-rne)
    for name in ("gfx950", "aiter-py", "argmin", "aiter-gfx942", "threshold", "cuda-satfinite"):
        compare_op(args, f"seed {seed} {config.id} {kind} {variant} {name}", general=True, profile=name, variant=variant)


def test_indexer_fresh_outputs_and_errors_are_the_oracles() -> None:
    config = cases.IndexerConfig("fp4", 5, 16, True, False)
    args = cases.make_case(config, seed=SEED)
    fresh = dict(args, q_out=None, weights_out=None, kv_cache=None, q_scale_out=None, kv_cache_scale=None)
    compare_op(fresh, "fresh outputs", mode="fp4", num_blocks=int(args["slot_mapping"].max()) // 64 + 2)
    for key, value in (("quant_block_size", 64), ("scale_fmt", None), ("positions", np.full(5, 10**6, np.int64))):
        bad = dict(cases.copy_case(args), **{key: value})
        if key == "positions":
            bad["slot_mapping"] = np.arange(5, dtype=np.int64)
        with pytest.raises(ValueError) as want:
            OP(**bad)
        with pytest.raises(ValueError) as got:
            OP(**op_inputs(bad))
        assert str(got.value) == str(want.value)


def _bad_calls(args: dict) -> list[tuple[str, dict]]:
    """One broken argument each: dtypes, shapes, layouts, slot and position values."""
    t = args["k"].shape[0]
    repeated = args["slot_mapping"].copy()
    repeated[1] = repeated[0] = 3
    return [
        ("slot_mapping int32", {"slot_mapping": args["slot_mapping"].astype(np.int32)}),
        ("weights float32", {"weights": args["weights"].astype(np.float32)}),
        ("q float64", {"q": args["q"].astype(np.float64)}),
        ("norm_weight float16", {"norm_weight": args["norm_weight"].astype(np.float16)}),
        ("q_out int8", {"q_out": args["q_out"].view(np.int8)}),
        ("q_out strided", {"q_out": np.zeros(args["q_out"].shape[:-1] + (2 * args["q_out"].shape[-1],), np.uint8)[..., ::2]}),
        ("q_out short", {"q_out": args["q_out"][:, :, :-1].copy()}),
        ("k 3-d", {"k": args["k"][:, None]}),
        ("cos_cache wide", {"cos_cache": np.zeros((8, 33), np.uint16), "sin_cache": np.zeros((8, 33), np.uint16)}),
        ("kv_cache 4-d", {"kv_cache": args["kv_cache"][..., 0].copy()}),
        ("repeated slot", {"slot_mapping": repeated}),
        ("slot past the cache", {"slot_mapping": np.full(t, 10**6, np.int64)}),
        ("heads not 16", {"q": args["q"][:, :8].copy(), "weights": args["weights"][:, :8].copy(),
                          "q_out": args["q_out"][:, :8].copy()}),
    ]


@pytest.mark.parametrize("mode", ["fp4", "fp8"])
def test_indexer_errors_are_the_same_for_tensors(mode: str) -> None:
    """Every refusal: the same exception type and message for tensors as for NumPy arrays."""
    args = cases.make_case(cases.IndexerConfig(mode, 6, 16, True, False, "ue8m0" if mode == "fp4" else None), seed=SEED)
    for note, change in _bad_calls(args):
        bad = dict(cases.copy_case(args), **change)
        with pytest.raises((TypeError, ValueError)) as want:
            OP(**bad)
        tensors = op_inputs(bad)
        if note == "q_out strided":  # tt() makes arrays contiguous: the same view of a tensor
            tensors["q_out"] = tt(bad["q_out"].base)[..., ::2]
        with pytest.raises(want.type) as got:
            OP(**tensors)
        assert str(got.value) == str(want.value), note


def test_indexer_tensors_on_one_device_of_one_kind() -> None:
    args = cases.make_case(cases.IndexerConfig("fp4", 4, 16, True, False), seed=SEED)
    mixed = dict(op_inputs(cases.copy_case(args)), k=args["k"].copy())
    with pytest.raises(TypeError, match="k must be an array of the kind of q"):
        OP(**mixed)
    elsewhere = dict(op_inputs(cases.copy_case(args)), kv_cache=torch.empty(args["kv_cache"].shape, dtype=torch.uint8,
                                                                          device="meta"))
    with pytest.raises(ValueError, match=r"kv_cache must be on the device of q \(cpu\), got meta"):
        OP(**elsewhere)


@pytest.mark.parametrize("mode", ["fp4", "fp8"])
def test_indexer_bf16_as_torch_bfloat16_and_fresh_outputs(mode: str) -> None:
    """bf16 as torch.bfloat16 (the NumPy side: uint16 patterns) and every output left None."""
    config = cases.IndexerConfig(mode, 7, 16, False, True, "ue8m0", False, 64 if mode == "fp4" else 16)
    args = cases.make_case(config, seed=SEED + 1)
    fresh = dict(args, q_out=None, weights_out=None, kv_cache=None, q_scale_out=None, kv_cache_scale=None)
    want = OP(**cases.copy_case(fresh), mode=mode, kv_block_size=config.block_size)
    tensors = op_inputs(cases.copy_case(fresh))
    for name in ("q", "k", "weights", "cos_cache", "sin_cache"):
        tensors[name] = tensors[name].view(torch.bfloat16)
    got = OP(**tensors, mode=mode, kv_block_size=config.block_size)
    for field, w, g in zip(want._fields, want, got):
        if w is not None:
            assert_same(w, g, f"{mode} fresh {field}")


@pytest.mark.parametrize("seed", [SEED, SEED + 1])
def test_frontend_values_on_tensors(seed: int) -> None:
    """The values the quantizers see (every variant, special values planted), both namespaces."""
    rng = rng_of(seed)
    config = cases.IndexerConfig("fp4" if seed % 2 else "fp8", 9, 16, bool(seed % 2), False, "ue8m0", False,
                                 64 if seed % 2 else 16)
    args = cases.make_case(config, seed=seed, max_pos=64)
    _plant_specials(args, rng)
    for variant in ofrontend.VARIANT_NAMES:
        with np.errstate(over="ignore", invalid="ignore"):
            want = oracle.ops.frontend_values(variant, **cases.copy_case(args))
        got = oracle.ops.frontend_values(variant, **op_inputs(cases.copy_case(args)))
        for name, w, g in zip(("q", "k"), want, got):
            assert_same(w, g, f"seed {seed} {variant} {name} values")


@pytest.mark.gpu
def test_gpu_indexer_configs() -> None:
    compared = 0
    for config in cases.PR_FP4_CONFIGS:
        for name in PROFILES:
            compared += compare_op(cases.make_case(config), f"{config.id} {name}", GPU_DEVICE, profile=name)
    for i, config in enumerate(cases.PR_FP8_CONFIGS):
        for name in FP8_PROFILES if i % 8 == 0 else ["gfx950"]:
            compared += compare_op(cases.make_case(config), f"{config.id} {name}", GPU_DEVICE, profile=name)
    for mode in ("fp4", "fp8"):
        for variant in ofrontend.VARIANT_NAMES:
            compared += compare_op(cases.envelope_probe_case(mode), f"probe {mode} {variant}", GPU_DEVICE, variant=variant)
    print(f"indexer op on {GPU_DEVICE}: {compared:,} output elements identical")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(SEED, SEED + 12))
def test_gpu_indexer_special_values(seed: int) -> None:
    rng = rng_of(seed)
    config = cases.IndexerConfig("fp4" if seed % 2 else "fp8", 40, 32, bool(seed % 3), bool(seed % 5), "ue8m0", False,
                                 64 if seed % 2 else 16)
    args = cases.make_case(config, seed=seed, max_pos=64)
    _plant_specials(args, rng)
    variant = ofrontend.VARIANT_NAMES[seed % 6]
    for name in ("gfx950", "aiter-py", "argmin", "aiter-gfx942", "threshold", "cuda-satfinite"):
        compare_op(args, f"seed {seed} {config.id} {variant} {name}", GPU_DEVICE, general=True, profile=name, variant=variant)
