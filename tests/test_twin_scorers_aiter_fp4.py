"""AITER's pa_mqa_logits_fp4 decode and prefill (mxgate.oracle.scorers.aiter_fp4): one function,
two namespaces. The oracle run on NumPy arrays and on torch tensors gives the same bytes in
every field (emulated float32, value and bound float64, window), NaN payloads and zero signs
included, and the tensor call's fields are tensors on the inputs' device.

CPU part (CI): the conformance configs of both ops under every profile, every qk_accum and
bound model (fast and exact paths), the 5-D and 4-D q forms, ragged decode (cu_seq_q), a
caller's ``out``, head_dim 256, planted special scale bytes (0xFF, 0x00), non-finite and
subnormal weights, far-apart group scales (the exact path), overflowing products (NaN cells),
and the errors (same type, same message).
GPU part (``--device cuda``): the same configs on the card and one production-size call.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

torch = pytest.importorskip("torch")

from mxgate import oracle  # noqa: E402
from mxgate.conformance.test_logits_conformance import AITER_CONFIGS, PREFILL_CONFIGS  # noqa: E402
from mxgate.inputs import logits as lc  # noqa: E402
from mxgate.inputs.strategies import decode_ragged_params  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.oracle import scorers  # noqa: E402
from mxgate.oracle.scorers.common import QK_ACCUM, QK_MODELS  # noqa: E402

from namespaces import assert_same, profiles_by_behaviour, tt  # noqa: E402

SEED = 20261201
FIELDS = ("emulated", "value", "bound", "window")
FUNCTIONS = (scorers.pa_mqa_logits_fp4, scorers.pa_mqa_logits_fp4_scored, scorers.pa_mqa_logits_fp4_prefill,
             scorers.pa_mqa_logits_fp4_prefill_scored)


def on(kwargs: dict, device: str) -> dict:
    """The call's arrays as tensors with the same bytes on ``device`` (bf16 as uint16 bits)."""
    return {k: tt(a, device) if isinstance(a, np.ndarray) else a for k, a in kwargs.items()}


def compare(expected: scorers.ScoredLogits, actual: scorers.ScoredLogits, note: str, device: str = "cpu") -> int:
    """Every field byte for byte, each a tensor on ``device``; returns the window cells compared."""
    for field in FIELDS:
        e, a = getattr(expected, field), getattr(actual, field)
        if e is None:
            assert a is None, f"{note}: {field} given, NumPy gives None"
            continue
        assert isinstance(a, torch.Tensor) and a.device.type == device, f"{note}: {field} is {type(a)}"
        assert_same(e, a, f"{note}: {field}")
    assert (actual.qk_accum, actual.bound_model) == (expected.qk_accum, expected.bound_model), note
    return int(expected.window.sum())


def decode_cfgs() -> list[tuple[int, tuple]]:
    return [(5000 + c[0] * 7 + c[1] + c[2] * 13 + c[3], c) for c in AITER_CONFIGS]


def prefill_cfgs() -> list[tuple[int, tuple]]:
    return [(6000 + c[0] + c[1] + c[2] + c[3] + int(c[4]), c) for c in PREFILL_CONFIGS]


def plant_specials(kwargs: dict, seed: int) -> dict:
    """0xFF and 0x00 bytes in the K and Q scales, a NaN, an Inf, a subnormal and a huge weight."""
    rng = np.random.Generator(np.random.PCG64(seed))
    kw = dict(kwargs)
    ks = kw["kv_scale"].copy()
    flat = ks.reshape(-1)
    for byte in (0xFF, 0x00, 0xFE, 0x01):
        flat[rng.integers(0, flat.size, 3)] = byte
    qs = kw["q_scale"].copy()
    qflat = qs.reshape(-1)
    qflat[rng.integers(0, qflat.size, 2)] = 0xFF
    qflat[rng.integers(0, qflat.size, 2)] = 0x00
    w = kw["weights"].copy()
    wf = w.reshape(-1)
    for bits in (0x7FC1, 0x7F80, 0x0001, 0x7F7F, 0xFF80):
        wf[int(rng.integers(0, wf.size))] = bits
    kw.update(kv_scale=ks, q_scale=qs, weights=w)
    return kw


def overflowing(kwargs: dict) -> dict:
    """Weights near the bf16 maximum with both signs: the float32 products overflow on the
    fast path and the head sums meet inf - inf (NaN cells made by the arithmetic itself)."""
    kw = dict(kwargs)
    w = kw["weights"].copy()
    w[:] = 0x7F70
    w[:, 1::2] |= 0x8000
    kw["weights"] = w
    return kw


def huge_scales(kwargs: dict) -> dict:
    """Every Q and K scale byte 0xFE (2^127): no span, so the fast path, and each qk overflows
    float32 to +-inf (relu(-inf) = 0; two 128-dim steps meet inf - inf in the K-step sum)."""
    return {**kwargs, "q_scale": np.full_like(kwargs["q_scale"], 0xFE), "kv_scale": np.full_like(kwargs["kv_scale"], 0xFE)}


# ---- CPU: every conformance config, every profile and option ---------------------------------------


@pytest.mark.parametrize("seed,cfg", decode_cfgs(), ids=[f"b{c[0]}_ctx{c[1]}_n{c[2]}_h{c[3]}_seed{s}" for s, c in decode_cfgs()])
def test_decode_configs_every_profile(seed: int, cfg: tuple) -> None:
    case = lc.fp4_decode_case(seed, *cfg)
    cells = 0
    host = on(case.kwargs, "cpu")
    for name, (want, got) in profiles_by_behaviour(lambda p: (scorers.pa_mqa_logits_fp4_scored(**case.kwargs, profile=p),
                                                              scorers.pa_mqa_logits_fp4_scored(**host, profile=p))):
        cells += compare(want, got, f"decode seed {seed} {cfg} {name}")
    assert cells > 0


@pytest.mark.parametrize("seed,cfg", prefill_cfgs(), ids=[f"b{c[0]}_ctx{c[1]}_rows{c[2]}_h{c[3]}_seed{s}" for s, c in prefill_cfgs()])
def test_prefill_configs_every_profile(seed: int, cfg: tuple) -> None:
    B, ctx, rows, heads, random_windows = cfg
    case = lc.fp4_prefill_case(seed, B, ctx, rows, heads, random_windows=random_windows)
    cells = 0
    host = on(case.kwargs, "cpu")
    for name, (want, got) in profiles_by_behaviour(
            lambda p: (scorers.pa_mqa_logits_fp4_prefill_scored(**case.kwargs, profile=p),
                       scorers.pa_mqa_logits_fp4_prefill_scored(**host, profile=p))):
        cells += compare(want, got, f"prefill seed {seed} {cfg} {name}")
    assert cells > 0


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_every_qk_accum_and_bound_model(mode: str) -> None:
    seed = SEED + 1
    if mode == "decode":
        case = lc.fp4_decode_case(seed, 2, 200, 2, 32, head_dim=256, spread=6)
        fn = scorers.pa_mqa_logits_fp4_scored
    else:
        case = lc.fp4_prefill_case(seed, 2, 200, 3, 32, head_dim=256, spread=6, random_windows=True)
        fn = scorers.pa_mqa_logits_fp4_prefill_scored
    for acc in QK_ACCUM:
        for model in QK_MODELS:
            for slow in (False, True):
                for emulate in (True, False):
                    kw = dict(qk_accum=acc, bound_model=model, _force_slow=slow, emulate=emulate)
                    compare(fn(**case.kwargs, **kw), fn(**on(case.kwargs, "cpu"), **kw), f"{mode} seed {seed} {kw}")


@pytest.mark.parametrize("seed", range(SEED, SEED + 6))
def test_special_values_and_wide_spans(seed: int) -> None:
    """Specials go through the exact path on the host; the NaN cells are the same bytes."""
    spread = (0, 24, 60)[seed % 3]
    case = lc.fp4_decode_case(seed, 2, 130, 1 + seed % 2, 32, spread=spread, weight_std=(0.1, 1e30)[seed % 2])
    kw = plant_specials(case.kwargs, seed)
    compared = 0
    for name in ("gfx950", "ocp", "aiter-gfx942", "argmin"):
        want = scorers.pa_mqa_logits_fp4_scored(**kw, profile=name)
        got = scorers.pa_mqa_logits_fp4_scored(**on(kw, "cpu"), profile=name)
        compared += compare(want, got, f"specials seed {seed} spread {spread} {name}")
        assert np.isnan(want.emulated).any(), f"seed {seed}: the planted specials give no NaN cell"
    pcase = lc.fp4_prefill_case(seed, 2, 130, 3, 32, spread=spread, random_windows=True)
    pkw = plant_specials(pcase.kwargs, seed)
    compare(scorers.pa_mqa_logits_fp4_prefill_scored(**pkw), scorers.pa_mqa_logits_fp4_prefill_scored(**on(pkw, "cpu")),
            f"prefill specials seed {seed}")
    assert compared > 0


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_overflowing_products(mode: str) -> None:
    """NaN and Inf cells that the fast path's own float32 arithmetic makes (products, qk): same bytes."""
    seed = SEED + 12
    if mode == "decode":
        case = lc.fp4_decode_case(seed, 2, 130, 2, 32, head_dim=256)
        fn = scorers.pa_mqa_logits_fp4_scored
    else:
        case = lc.fp4_prefill_case(seed, 2, 130, 3, 32, head_dim=256, random_windows=True)
        fn = scorers.pa_mqa_logits_fp4_prefill_scored
    for name, kw in (("products", overflowing(case.kwargs)), ("qk", huge_scales(case.kwargs))):
        for acc in QK_ACCUM:
            want = fn(**kw, qk_accum=acc)
            assert not np.isfinite(want.emulated[want.window]).all(), f"{mode}: no cell overflows"
            compare(want, fn(**on(kw, "cpu"), qk_accum=acc), f"{mode} overflowing {name} {acc}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decode_ragged_params())
def test_decode_ragged_hypothesis_examples(params) -> None:
    """The conformance suite's Hypothesis examples of the decode scorer (same strategy, same
    case builder): ragged lengths at block boundaries, next_n 1..4, spread group scales."""
    seed, next_n, heads, lens, spread = params
    case = lc.fp4_decode_case(seed, len(lens), 300, next_n, heads, context_lens=np.array(lens), spread=spread)
    compare(scorers.pa_mqa_logits_fp4_scored(**case.kwargs),
            scorers.pa_mqa_logits_fp4_scored(**on(case.kwargs, "cpu")), f"hypothesis {params} seed {seed}")


def test_emulated_forms_write_only_the_window_of_out() -> None:
    seed = SEED + 7
    case = lc.fp4_decode_case(seed, 3, 300, 2, 64, shape4d=False)
    fill = np.full((6, case.kwargs["max_seq_len"]), np.float32(1234.5), np.float32)
    want = fill.copy()
    scorers.pa_mqa_logits_fp4(**case.kwargs, out=want)
    got = tt(fill)
    returned = scorers.pa_mqa_logits_fp4(**on(case.kwargs, "cpu"), out=got)
    assert returned is got, "the emulated form returns the caller's out"
    assert_same(want, got, f"seed {seed}: out")
    assert_same(scorers.pa_mqa_logits_fp4(**case.kwargs), scorers.pa_mqa_logits_fp4(**on(case.kwargs, "cpu")),
                f"seed {seed}: fresh")
    pcase = lc.fp4_prefill_case(seed, 2, 300, 4, 64, random_windows=True)
    assert_same(scorers.pa_mqa_logits_fp4_prefill(**pcase.kwargs),
                scorers.pa_mqa_logits_fp4_prefill(**on(pcase.kwargs, "cpu")), f"seed {seed}: prefill")
    pwant = np.full((pcase.kwargs["q_fp4"].shape[0], pcase.kwargs["max_seq_len"]), np.float32(-7.0), np.float32)
    pout = tt(pwant)
    scorers.pa_mqa_logits_fp4_prefill(**pcase.kwargs, out=pwant)
    scorers.pa_mqa_logits_fp4_prefill(**on(pcase.kwargs, "cpu"), out=pout)
    assert_same(pwant, pout, f"seed {seed}: prefill out")


def test_ragged_decode_cu_seq_q() -> None:
    seed = SEED + 8
    case = lc.fp4_decode_case(seed, 3, 200, 3, 32, shape4d=False, context_lens=np.array([200, 7, 64]))
    cu = np.array([0, 3, 4, 6], np.int32)
    kw = {**case.kwargs, "cu_seq_q": cu}
    kw.pop("next_n")
    compare(scorers.pa_mqa_logits_fp4_scored(**kw, next_n_max=3),
            scorers.pa_mqa_logits_fp4_scored(**on(kw, "cpu"), next_n_max=3), f"ragged seed {seed}")


def test_errors_are_the_same() -> None:
    seed = SEED + 9
    case = lc.fp4_decode_case(seed, 2, 100, 1, 16)
    k = case.kwargs
    bad = [
        {**k, "weights": k["weights"][:, :8]},
        {**k, "context_lens": np.array([10, 101], np.int32)},
        {**k, "context_lens": np.array([10, 11], np.float32)},
        {**k, "block_tables": np.full_like(k["block_tables"], 999)},
        {**k, "kv_scale": k["kv_scale"][:, :, :, :32]},
        {**k, "weight_scale": float("nan")},
        {**k, "q_fp4": k["q_fp4"].astype(np.int16)},
        {**k, "q_scale": k["q_scale"][..., :2]},
    ]
    for i, kw in enumerate(bad):
        with pytest.raises((TypeError, ValueError)) as expected:
            scorers.pa_mqa_logits_fp4_scored(**kw)
        with pytest.raises(expected.type) as got:
            scorers.pa_mqa_logits_fp4_scored(**on(kw, "cpu"))
        assert str(got.value) == str(expected.value), f"case {i}"
    with pytest.raises(TypeError) as expected:
        scorers.pa_mqa_logits_fp4_scored(**k, bogus=1)
    with pytest.raises(TypeError) as got:
        scorers.pa_mqa_logits_fp4_scored(**on(k, "cpu"), bogus=1)
    assert str(got.value) == str(expected.value)
    pcase = lc.fp4_prefill_case(seed, 2, 100, 3, 16)
    pk = pcase.kwargs
    for kw in ({**pk, "q_fp4": pk["q_fp4"][None]}, {**pk, "row_info": pk["row_info"][:, :3]}):
        with pytest.raises((TypeError, ValueError)) as expected:
            scorers.pa_mqa_logits_fp4_prefill_scored(**kw)
        with pytest.raises(expected.type) as got:
            scorers.pa_mqa_logits_fp4_prefill_scored(**on(kw, "cpu"))
        assert str(got.value) == str(expected.value)


def test_a_tensor_call_computes_on_tensors_only() -> None:
    """Once a large argument is a tensor every large one must be (the small ones may stay NumPy)."""
    case = lc.fp4_decode_case(SEED + 13, 2, 100, 1, 16)
    kw = on(case.kwargs, "cpu")
    with pytest.raises(TypeError, match="kv_cache must be a torch tensor"):
        scorers.pa_mqa_logits_fp4_scored(**{**kw, "kv_cache": case.kwargs["kv_cache"]})
    with pytest.raises(TypeError, match="q_fp4 must be a torch tensor"):
        scorers.pa_mqa_logits_fp4_scored(**{**case.kwargs, "weights": kw["weights"]})
    with pytest.raises(TypeError, match="out must be a torch tensor"):
        scorers.pa_mqa_logits_fp4(**kw, out=np.zeros((2, 100), np.float32))
    small = {**kw, "block_tables": case.kwargs["block_tables"], "context_lens": case.kwargs["context_lens"]}
    compare(scorers.pa_mqa_logits_fp4_scored(**case.kwargs), scorers.pa_mqa_logits_fp4_scored(**small),
            "host block tables and lengths")


def test_the_gate_reference_is_the_oracle_itself() -> None:
    """No separate torch counterpart is left: the gate's device reference runs the oracle's own
    function on the tensors, NumPy in and out."""
    from mxgate.twin import reference

    assert oracle.ops.pa_mqa_logits_fp4 is scorers.pa_mqa_logits_fp4
    case = lc.fp4_decode_case(SEED + 10, 2, 150, 2, 32)
    want = scorers.pa_mqa_logits_fp4_scored(**case.kwargs)
    got = reference.on_device(scorers.pa_mqa_logits_fp4_scored, "cpu")(**case.kwargs)
    for field in FIELDS:
        assert isinstance(getattr(got, field), np.ndarray), field
        assert_same(getattr(want, field), getattr(got, field), f"reference {field}")


# ---- GPU -------------------------------------------------------------------------------------------

GPU = "cuda"


@pytest.mark.gpu
def test_gpu_configs_every_profile() -> None:
    cells = 0
    for seed, cfg in decode_cfgs():
        case = lc.fp4_decode_case(seed, *cfg)
        card = on(case.kwargs, GPU)
        for name, (want, got) in profiles_by_behaviour(
                lambda p: (scorers.pa_mqa_logits_fp4_scored(**case.kwargs, profile=p),
                           scorers.pa_mqa_logits_fp4_scored(**card, profile=p))):
            cells += compare(want, got, f"gpu decode seed {seed} {cfg} {name}", GPU)
    for seed, cfg in prefill_cfgs():
        B, ctx, rows, heads, rw = cfg
        case = lc.fp4_prefill_case(seed, B, ctx, rows, heads, random_windows=rw)
        card = on(case.kwargs, GPU)
        for name, (want, got) in profiles_by_behaviour(
                lambda p: (scorers.pa_mqa_logits_fp4_prefill_scored(**case.kwargs, profile=p),
                           scorers.pa_mqa_logits_fp4_prefill_scored(**card, profile=p))):
            cells += compare(want, got, f"gpu prefill seed {seed} {cfg} {name}", GPU)
    print(f"pa_mqa_logits_fp4 on {GPU}: {cells:,} window cells identical (emulated, value, bound)")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(SEED, SEED + 6))
def test_gpu_options_and_specials(seed: int) -> None:
    spread = (0, 24, 60)[seed % 3]
    case = lc.fp4_decode_case(seed, 2, 130, 2, 32, head_dim=256, spread=spread, weight_std=(0.1, 1e30)[seed % 2])
    kw = plant_specials(case.kwargs, seed)
    for acc in QK_ACCUM:
        for model in QK_MODELS:
            opts = dict(qk_accum=acc, bound_model=model)
            compare(scorers.pa_mqa_logits_fp4_scored(**kw, **opts), scorers.pa_mqa_logits_fp4_scored(**on(kw, GPU), **opts),
                    f"gpu specials seed {seed} {opts}", GPU)
        for over in (overflowing(case.kwargs), huge_scales(case.kwargs)):
            compare(scorers.pa_mqa_logits_fp4_scored(**over, qk_accum=acc),
                    scorers.pa_mqa_logits_fp4_scored(**on(over, GPU), qk_accum=acc), f"gpu overflow seed {seed} {acc}",
                    GPU)


@pytest.mark.gpu
def test_gpu_production_size() -> None:
    """64 heads, 8 query rows over 16384 and 12345 tokens: 114,904 (row, token) cells."""
    seed = SEED + 11
    case = lc.fp4_decode_case(seed, 2, 16384, 4, 64, context_lens=np.array([16384, 12345]), spread=4)
    want = scorers.pa_mqa_logits_fp4_scored(**case.kwargs)
    got = scorers.pa_mqa_logits_fp4_scored(**on(case.kwargs, GPU))
    cells = compare(want, got, f"gpu production seed {seed}", GPU)
    print(f"pa_mqa_logits_fp4 production size on {GPU}: {cells:,} window cells identical")
