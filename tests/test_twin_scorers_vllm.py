"""One function, two namespaces: vLLM PR #42908's ROCm Triton scorers (mxgate.oracle.scorers.vllm)
on torch tensors against the same functions on NumPy arrays, byte for byte: emulated float32,
value and bound float64 and the window, NaN payloads included.

CPU part (CI): the conformance configs of the FP4 paged scorer (its launch-knob and top-k
cases too), the FP4 ragged scorer and the FP8 paged scorer with the conformance tests' builders
and seeds, under the ops' profiles and the profile that reads e8m0 byte 0 as zero; a specials
case under every profile; every head_order, bound model and emulate setting (FP8: both e4m3
variants); seeded cases with planted specials (0xFF / 0x00 / extreme scale bytes, NaN, Inf,
subnormal and -0 weights, overflowing products, far-apart group scales on the oracle's
exact path, empty and clipped windows); Hypothesis draws from the conformance strategies;
the oracle's errors, type and message. GPU part (``--device cuda``, marked ``gpu``): the same
comparisons with the tensors on the card, and production-size calls.
"""

from __future__ import annotations

from collections import Counter
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

torch = pytest.importorskip("torch")

from mxgate.conformance import test_vllm_conformance as conformance  # noqa: E402
from mxgate.inputs import vllm as vc  # noqa: E402
from mxgate.inputs.strategies import vllm_paged_params, vllm_ragged_params  # noqa: E402
from mxgate.kernels.vllm_triton import FNUZ_PROFILE, SCORER_PROFILE  # noqa: E402
from mxgate.oracle import layouts, profiles  # noqa: E402
from mxgate.oracle.ops import quant_vllm as qv  # noqa: E402
from mxgate.oracle.scorers import ScoredLogits  # noqa: E402
from mxgate.oracle.scorers import vllm as oracle_vllm  # noqa: E402
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS  # noqa: E402
from mxgate.oracle.scorers.common import QK_MODELS  # noqa: E402
from mxgate.twin import reference  # noqa: E402
from mxgate.twin.reference import to_device  # noqa: E402

# the oracle's float32 cast of an overflowing qk (planted on purpose) warns
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

SEED = 20261201
FIELDS = ("emulated", "value", "bound", "window")
BYTE0_ZERO = "triton-dot-scaled"  # the one profile that reads e8m0 byte 0 as 0.0
FP4_PROFILES = (SCORER_PROFILE, BYTE0_ZERO)
GPU = "cuda"
LAYOUT = layouts.get("vllm-fp4-indexer-k")
FP8_LAYOUT = layouts.get("aiter-fp8-kv")


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


# ---- comparing -------------------------------------------------------------------------------


def _np(a):
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view({8: np.uint64, 4: np.uint32, 1: np.uint8}[a.dtype.itemsize])


def compare(expected: ScoredLogits, actual: ScoredLogits, note: str, counts: Counter) -> None:
    """Every field byte for byte (NaN payloads included), the tags too; adds the cells and the
    window cells compared to ``counts``."""
    assert isinstance(actual, ScoredLogits), f"{note}: the tensor call gives {type(actual).__name__}"
    for field in FIELDS:
        e, a = getattr(expected, field), getattr(actual, field)
        if e is None:
            assert a is None, f"{note}: {field} given, the oracle gives None"
            continue
        assert isinstance(a, torch.Tensor), f"{note}: {field} is {type(a).__name__}, not a tensor"
        a = _np(a)
        assert a.dtype == e.dtype and a.shape == e.shape, (
            f"{note}: {field} {a.dtype}{list(a.shape)}, oracle {e.dtype}{list(e.shape)}")
        differ = _bits(e) != _bits(a)
        if differ.any():
            r, t = np.argwhere(differ)[0]
            raise AssertionError(f"{note}: {field} differs in {int(differ.sum())} cells, first row {r} token {t}: "
                                 f"tensors {a[r, t]!r} (0x{int(_bits(a)[r, t]):x}), oracle {e[r, t]!r} "
                                 f"(0x{int(_bits(e)[r, t]):x})")
        counts[f"{field} cells"] += e.size
    assert (actual.qk_accum, actual.bound_model) == (expected.qk_accum, expected.bound_model), note
    counts["in-window cells"] += int(expected.window.sum())
    counts["calls"] += 1


def on(kwargs: dict, device: str) -> dict:
    return {k: to_device(v, device) for k, v in kwargs.items()}


OPS = {
    "paged": oracle_vllm.fp4_paged_logits_scored,
    "ragged": oracle_vllm.fp4_ragged_logits_scored,
    "fp8": oracle_vllm.fp8_paged_logits_scored,
}


def check(op: str, kwargs: dict, note: str, counts: Counter, device: str = "cpu", **options) -> None:
    """The function on NumPy arrays and on tensors (on ``device``), same inputs and options, compared."""
    fn = OPS[op]
    expected = fn(**kwargs, **options)
    compare(expected, fn(**on(kwargs, device), **options), f"{op} {note} {options}", counts)


def report(counts: Counter, what: str) -> None:
    assert counts["calls"] and counts["value cells"], f"{what}: nothing compared"
    print(f"\n{what}: " + ", ".join(f"{v:,} {k}" for k, v in sorted(counts.items())) + " identical")


# ---- the conformance configs (mxgate/conformance/test_vllm_conformance.py's builders and seeds)


def paged_configs() -> list[tuple[str, int, dict, dict]]:
    """(id, seed, kwargs, options) of every FP4 paged call the conformance tests make."""
    out = []
    for cfg in conformance.PAGED_CONFIGS:
        B, nn, H, ctx, bs, ctx2d, spread, pb = cfg
        seed = 42900 + B * 101 + nn * 13 + H + ctx + bs + spread + int(ctx2d)
        case = vc.fp4_paged_case(seed, B, nn, H, ctx, block_size=bs, ctx2d=ctx2d, spread=spread, page_bytes=pb)
        out.append((f"{conformance._paged_id(cfg)}_seed{seed}", seed, case.kwargs, {}))
    for knobs in conformance.KNOBS:
        seed = 42990 + len(next(iter(knobs)))
        out.append((f"knobs_seed{seed}", seed, vc.fp4_paged_case(seed, 3, 2, 64, 700, block_size=64).kwargs, {}))
    for B, nn, H, ctx, bs, k in conformance.TOPK_CONFIGS:
        seed = 43500 + B + nn + H + ctx + bs + k
        out.append((f"topk_b{B}_n{nn}_h{H}_ctx{ctx}_blk{bs}_k{k}_seed{seed}", seed,
                    vc.fp4_paged_case(seed, B, nn, H, ctx, block_size=bs).kwargs, {"emulate": False}))
    return out


def ragged_configs() -> list[tuple[str, int, dict, dict]]:
    out = []
    for cfg in conformance.RAGGED_CONFIGS:
        S, N, H, spread, windows = cfg
        seed = 43100 + S * 7 + N + H + spread + len(windows)
        case = vc.fp4_ragged_case(seed, S, N, H, spread=spread, windows=windows)
        out.append((f"{conformance._ragged_id(cfg)}_seed{seed}", seed, case.kwargs, {}))
    seed = 43190
    out.append((f"knobs_persistent2_seed{seed}", seed, vc.fp4_ragged_case(seed, 10, 600, 32, windows="random").kwargs,
                {}))
    return out


def fp8_configs() -> list[tuple[str, int, dict, dict]]:
    out = []
    for prof in (SCORER_PROFILE, FNUZ_PROFILE):  # the FP8 op's profiles: fn and fnuz
        variant = qv.profile(prof).fp8_variant
        for B, nn, H, ctx, bs, ctx2d in conformance.FP8_CONFIGS:
            seed = 43300 + B + nn * 11 + H + ctx + bs + int(ctx2d)
            case = vc.fp8_paged_case(seed, B, nn, H, ctx, block_size=bs, ctx2d=ctx2d, variant=variant)
            out.append((f"b{B}_n{nn}_h{H}_ctx{ctx}_blk{bs}_{'varlen' if ctx2d else 'dense'}_{variant}_seed{seed}",
                        seed, case.kwargs, {"variant": variant}))
    return out


PAGED = paged_configs()
RAGGED = ragged_configs()
FP8 = fp8_configs()


@pytest.mark.parametrize("index", range(len(PAGED)), ids=[c[0] for c in PAGED])
def test_fp4_paged_conformance_configs(index: int) -> None:
    cid, seed, kwargs, options = PAGED[index]
    counts = Counter()
    for prof in FP4_PROFILES:
        check("paged", kwargs, f"{cid} (seed {seed}) profile {prof}", counts, profile=qv.profile(prof), **options)
    report(counts, cid)


@pytest.mark.parametrize("index", range(len(RAGGED)), ids=[c[0] for c in RAGGED])
def test_fp4_ragged_conformance_configs(index: int) -> None:
    cid, seed, kwargs, options = RAGGED[index]
    counts = Counter()
    for prof in FP4_PROFILES:
        check("ragged", kwargs, f"{cid} (seed {seed}) profile {prof}", counts, profile=qv.profile(prof), **options)
    report(counts, cid)


@pytest.mark.parametrize("index", range(len(FP8)), ids=[c[0] for c in FP8])
def test_fp8_paged_conformance_configs(index: int) -> None:
    cid, seed, kwargs, options = FP8[index]
    counts = Counter()
    check("fp8", kwargs, f"{cid} (seed {seed})", counts, **options)
    report(counts, cid)


# ---- planted specials --------------------------------------------------------------------------

SPECIAL_WEIGHTS = np.array([np.nan, np.inf, -np.inf, 1e-45, -1e-45, -0.0, 0.0, 3e38, -3e38, 1e-38, 2.0**100],
                           np.float32)
EXTREME_BYTES = np.array([0x00, 0xFF, 0x01, 0xFE, 0x7F, 0x20, 0xE0], np.uint8)


def _plant_bytes(rng: np.random.Generator, e8m0: np.ndarray, fraction: float) -> None:
    """Scale bytes 0x00, 0xFF, 1, 254 and far-apart exponents at a fraction of the positions."""
    flat = e8m0.reshape(-1)
    at = rng.random(flat.size) < fraction
    flat[at] = rng.choice(EXTREME_BYTES, int(at.sum()))


def _plant_weights(rng: np.random.Generator, w: np.ndarray, rows: int) -> None:
    """A few rows with non-finite, subnormal, signed-zero and huge weights."""
    for r in rng.choice(w.shape[0], min(rows, w.shape[0]), replace=False):
        h = rng.choice(w.shape[1], min(3, w.shape[1]), replace=False)
        w[r, h] = rng.choice(SPECIAL_WEIGHTS, h.size)


def special_ragged(seed: int, rows: int = 6, tokens: int = 48, heads: int = 16) -> dict:
    rng = rng_of(seed)
    case = vc.fp4_ragged_case(seed, rows, tokens, heads, spread=int(rng.choice([0, 3, 16, 40])))
    k = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in case.kwargs.items()}
    _plant_bytes(rng, k["q_e8m0"], 0.03)
    _plant_bytes(rng, k["k_e8m0"], 0.03)
    _plant_weights(rng, k["weights"], 2)
    if seed % 2:  # overflowing qk: both scales at 2^127, so fl32(qk) is Inf and Inf * w meets 0 or -Inf
        k["q_e8m0"][0, :2] = 254
        k["k_e8m0"][: tokens // 3] = 254
        k["weights"][0, :2] = np.float32([2.0, -3.0])
    k["cu_seqlen_ks"][-1], k["cu_seqlen_ke"][-1] = -5, tokens + 7  # past both ends: clipped
    k["cu_seqlen_ks"][0] = k["cu_seqlen_ke"][0] = 3  # empty
    return k


def special_paged(seed: int, batch: int = 2, next_n: int = 3, heads: int = 16, max_ctx: int = 40,
                  block_size: int = 16) -> dict:
    rng = rng_of(seed)
    ctx2d = bool(seed % 2)
    lens = rng.integers(-3, max_ctx + 6, size=(batch, next_n) if ctx2d else batch)  # < 0 and > max: clipped
    lens.reshape(-1)[0] = 0
    case = vc.fp4_paged_case(seed, batch, next_n, heads, max_ctx + 6, block_size=block_size, ctx2d=ctx2d,
                             spread=int(rng.choice([0, 3, 40])), context_lens=np.maximum(lens, 0))
    k = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in case.kwargs.items()}
    k["context_lens"] = lens.astype(np.int32)
    k["max_context_len"] = max_ctx
    _plant_bytes(rng, k["q_e8m0"], 0.03)
    _plant_weights(rng, k["weights"], 2)
    packed, e8m0 = LAYOUT.gather(k["kv_cache"], block_size=block_size)  # every slot of the pool
    _plant_bytes(rng, e8m0, 0.03)
    if seed % 3 == 0:
        e8m0[:: 5] = 254
        k["q_e8m0"][0, 0, :, :2] = 254
    k["kv_cache"] = LAYOUT.scatter(k["kv_cache"], packed, e8m0, block_size=block_size)
    return k


SPECIAL_SEEDS = range(SEED, SEED + 10)


@pytest.mark.parametrize("seed", SPECIAL_SEEDS)
def test_fp4_planted_specials(seed: int) -> None:
    """Special scale bytes, weights and windows; the options drawn with the seed."""
    rng = rng_of(seed + 1)
    counts = Counter()
    options = dict(head_order=str(rng.choice(HEAD_ORDERS)), bound_model=str(rng.choice(QK_MODELS)),
                   profile=FP4_PROFILES[seed % 2])
    check("ragged", special_ragged(seed), f"specials seed {seed}", counts, **options)
    check("paged", special_paged(seed), f"specials seed {seed}", counts, **options)
    assert counts["in-window cells"]
    report(counts, f"specials seed {seed}")


def test_fp4_specials_reach_every_path() -> None:
    """The planted cases hold what they are for: NaN emulated cells, NaN and Inf values,
    infinite bounds, cells on the oracle's exact path, rows with non-finite weights, empty
    windows."""
    found = Counter()
    exact_cells, nonfinite = oracle_vllm.exact_cells, oracle_vllm.nonfinite_weight_values

    def counted_exact(I, *rest):
        found["exact-path cells"] += I.shape[0]
        return exact_cells(I, *rest)

    def counted_nonfinite(qk, w):
        found["non-finite weight rows"] += qk.shape[0]
        return nonfinite(qk, w)

    for seed in SPECIAL_SEEDS:
        for op, kwargs in (("ragged", special_ragged(seed)), ("paged", special_paged(seed))):
            with mock.patch.object(oracle_vllm, "exact_cells", counted_exact), \
                    mock.patch.object(oracle_vllm, "nonfinite_weight_values", counted_nonfinite):
                s = OPS[op](**kwargs)
            w = s.window
            found["nan emulated"] += int(np.isnan(s.emulated[w]).sum())
            found["inf emulated"] += int(np.isinf(s.emulated[w]).sum())
            found["nan value"] += int(np.isnan(s.value[w]).sum())
            found["inf value"] += int(np.isinf(s.value[w]).sum())
            found["inf bound"] += int(np.isinf(s.bound[w]).sum())
            found["empty rows"] += int((~w.any(axis=1)).sum())
    assert all(found[k] for k in ("nan emulated", "inf emulated", "nan value", "inf value", "inf bound",
                                  "empty rows", "exact-path cells", "non-finite weight rows")), found
    print(f"\nplanted specials reach: {dict(found)}")


@pytest.mark.parametrize("profile", profiles.names())
def test_fp4_every_profile(profile: str) -> None:
    """Both FP4 scorers under every registered profile, by name, on a specials case."""
    counts = Counter()
    check("ragged", special_ragged(SEED + 100, rows=4, tokens=24, heads=16), f"seed {SEED + 100}", counts,
          profile=profile)
    check("paged", special_paged(SEED + 101, batch=2, next_n=2, max_ctx=24), f"seed {SEED + 101}", counts,
          profile=profile)
    report(counts, profile)


@pytest.mark.parametrize("head_order", HEAD_ORDERS)
@pytest.mark.parametrize("bound_model", QK_MODELS)
def test_fp4_every_option(head_order: str, bound_model: str) -> None:
    seed = SEED + 200 + HEAD_ORDERS.index(head_order) * 3 + QK_MODELS.index(bound_model)
    counts = Counter()
    ragged = vc.fp4_ragged_case(seed, 5, 70, 32, spread=3).kwargs
    paged = vc.fp4_paged_case(seed, 2, 2, 32, 90, block_size=32, ctx2d=True).kwargs
    for emulate in (True, False):
        options = dict(head_order=head_order, bound_model=bound_model, emulate=emulate)
        check("ragged", ragged, f"seed {seed}", counts, **options)
        check("paged", paged, f"seed {seed}", counts, **options)
    report(counts, f"{head_order} {bound_model}")


@pytest.mark.parametrize("emulated_only", [True, False])
def test_emulated_forms(emulated_only: bool) -> None:
    """fp4_paged_logits / fp4_ragged_logits: the emulated tensor alone, as the oracle's."""
    seed = SEED + 300 + int(emulated_only)
    counts = Counter()
    for op, kwargs in (("paged", special_paged(seed)), ("ragged", special_ragged(seed))):
        fn = oracle_vllm.fp4_paged_logits if op == "paged" else oracle_vllm.fp4_ragged_logits
        options = {} if emulated_only else dict(head_order="pairwise", profile=BYTE0_ZERO)
        want, got = fn(**kwargs, **options), fn(**on(kwargs, "cpu"), **options)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
        assert np.array_equal(_bits(want), _bits(_np(got))), f"{op} seed {seed} {options}: emulated differs"
        counts["emulated cells"] += want.size
    assert counts["emulated cells"]


def test_paged_limits() -> None:
    rng = rng_of(SEED + 400)
    for trial in range(6):
        B, nn = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        lens = rng.integers(-4, 40, size=(B, nn) if trial % 2 else B).astype(np.int32)
        want = oracle_vllm.paged_limits(lens, B, nn, 30)
        got = oracle_vllm.paged_limits(to_device(lens, "cpu"), B, nn, 30)
        assert isinstance(got, torch.Tensor)
        assert np.array_equal(want, _np(got)), f"seed {SEED + 400} trial {trial}: {_np(got)} != {want}"


def test_no_live_rows_and_zero_width() -> None:
    """Calls that score nothing (no live row, width 0, no heads): the oracle's answer, its
    unchecked options included."""
    counts = Counter()
    paged = vc.fp4_paged_case(SEED + 500, 2, 2, 16, 30, block_size=16, context_lens=np.zeros(2, np.int64)).kwargs
    check("paged", paged, f"no live rows seed {SEED + 500}", counts, head_order="not-an-order", profile="no-profile")
    check("paged", {**paged, "max_context_len": 0}, f"width 0 seed {SEED + 500}", counts)
    ragged = vc.fp4_ragged_case(SEED + 501, 3, 20, 16).kwargs
    ragged = {**ragged, "cu_seqlen_ks": np.full(3, 25, np.int32), "cu_seqlen_ke": np.full(3, 30, np.int32)}
    check("ragged", ragged, f"no live rows seed {SEED + 501}", counts, bound_model="not-a-model")
    fp8 = vc.fp8_paged_case(SEED + 502, 2, 2, 16, 40, block_size=16).kwargs
    check("fp8", {**fp8, "max_context_len": 0}, f"width 0 seed {SEED + 502}", counts, variant="not-a-variant")
    headless = vc.fp4_ragged_case(SEED + 503, 3, 20, 16).kwargs
    headless = {**headless, "q_fp4": headless["q_fp4"][:, :0], "q_e8m0": headless["q_e8m0"][:, :0],
                "weights": headless["weights"][:, :0]}
    check("ragged", headless, f"no heads seed {SEED + 503}", counts, emulate=False)
    check("ragged", headless, f"no heads, emulated seed {SEED + 503}", counts)
    assert counts["calls"] == 6


# ---- FP8 -----------------------------------------------------------------------------------


def special_fp8(seed: int, variant: str) -> dict:
    """NaN codes in Q and K, non-finite and huge K scales, non-finite weights, clipped windows."""
    rng = rng_of(seed)
    case = vc.fp8_paged_case(seed, 2, 2, 16, 60, block_size=16, ctx2d=bool(seed % 2), variant=variant)
    k = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in case.kwargs.items()}
    nan_codes = np.array([0x7F, 0xFF] if variant == "fn" else [0x80], np.uint8)
    q = k["q_fp8"].reshape(-1)
    q[rng.choice(q.size, 3, replace=False)] = rng.choice(nan_codes, 3)
    num_blocks, block_size, width = k["kv_cache"].shape
    dims = dict(num_blocks=num_blocks, block_size=block_size, head_dim=width - 4)
    data, scale = FP8_LAYOUT.gather(k["kv_cache"], **dims)  # every slot of the pool
    slots = rng.choice(data.shape[0], 3, replace=False)
    data[slots, rng.integers(0, width - 4, 3)] = rng.choice(nan_codes, 3)
    scale[rng.choice(data.shape[0], 4, replace=False)] = np.float32([np.nan, np.inf, 3e38, -2.0])
    k["kv_cache"] = FP8_LAYOUT.scatter(k["kv_cache"], data, scale, **dims)
    _plant_weights(rng, k["weights"], 1)
    k["context_lens"] = k["context_lens"].copy()
    k["context_lens"].reshape(-1)[-1] = k["max_context_len"] + 9  # past max_context_len: clipped
    return k


@pytest.mark.parametrize("variant", ["fn", "fnuz"])
def test_fp8_every_option_and_specials(variant: str) -> None:
    counts = Counter()
    seed = SEED + 600 + (variant == "fnuz")
    plain = vc.fp8_paged_case(seed, 2, 2, 16, 50, block_size=16, variant=variant).kwargs
    for head_order in HEAD_ORDERS:
        for bound_model in QK_MODELS:
            check("fp8", plain, f"seed {seed}", counts, variant=variant, head_order=head_order, bound_model=bound_model)
    check("fp8", plain, f"seed {seed}", counts, variant=variant, emulate=False)
    for s in range(seed, seed + 4):
        check("fp8", special_fp8(s, variant), f"specials seed {s}", counts, variant=variant,
              head_order=HEAD_ORDERS[s % 3])
    report(counts, f"fp8 {variant}")


# ---- Hypothesis: the conformance tests' strategies ----------------------------------------------

HYPOTHESIS = settings(max_examples=6, derandomize=True, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(vllm_paged_params())
def test_fp4_paged_hypothesis(params) -> None:
    seed, B, nn, H, bs, ctx2d, ctx, spread = params
    lens = np.array(ctx, np.int64).reshape((B, nn) if ctx2d else (B,))
    case = vc.fp4_paged_case(seed, B, nn, H, 200, block_size=bs, ctx2d=ctx2d, spread=spread, context_lens=lens)
    counts = Counter()
    check("paged", case.kwargs, f"hypothesis {params} seed {seed}", counts, profile=qv.profile(SCORER_PROFILE))
    assert counts["calls"] == 1


@HYPOTHESIS
@given(vllm_ragged_params())
def test_fp4_ragged_hypothesis(params) -> None:
    seed, S, N, H, spread, windows = params
    if windows == "causal" and S > N:
        windows = "random"
    case = vc.fp4_ragged_case(seed, S, N, H, spread=spread, windows=windows)
    counts = Counter()
    check("ragged", case.kwargs, f"hypothesis {params} seed {seed}", counts, profile=qv.profile(SCORER_PROFILE))
    assert counts["calls"] == 1


# ---- errors ----------------------------------------------------------------------------------


def _bad_calls() -> list[tuple[str, str, dict, dict]]:
    """(label, op, kwargs, options) that the oracle refuses."""
    paged = vc.fp4_paged_case(SEED + 700, 2, 2, 16, 40, block_size=16).kwargs
    ragged = vc.fp4_ragged_case(SEED + 701, 3, 20, 16).kwargs
    fp8 = vc.fp8_paged_case(SEED + 702, 2, 2, 16, 40, block_size=16).kwargs
    full = vc.fp4_paged_case(SEED + 704, 2, 1, 16, 40, block_size=16, context_lens=np.array([40, 40])).kwargs
    short = full["block_tables"][:, :2].copy()  # 40 tokens need 3 blocks of 16
    out_of_pool = paged["block_tables"].copy()
    out_of_pool[1, 0] = paged["kv_cache"].shape[0]
    return [
        ("q dtype", "paged", {**paged, "q_fp4": paged["q_fp4"].astype(np.float32)}, {}),
        ("q shape", "paged", {**paged, "q_fp4": paged["q_fp4"][..., :32]}, {}),
        ("q_e8m0 shape", "paged", {**paged, "q_e8m0": paged["q_e8m0"][:, :1]}, {}),
        ("weights shape", "paged", {**paged, "weights": paged["weights"][:, :8]}, {}),
        ("weights dtype", "paged", {**paged, "weights": paged["weights"].astype(np.float64)}, {}),
        ("kv_cache ndim", "paged", {**paged, "kv_cache": paged["kv_cache"].reshape(-1)}, {}),
        ("page too small", "paged", {**paged, "kv_cache": paged["kv_cache"][:, :100]}, {}),
        ("max_context_len", "paged", {**paged, "max_context_len": -1}, {}),
        ("context_lens shape", "paged", {**paged, "context_lens": np.zeros((2, 5), np.int32)}, {}),
        ("block_tables columns", "paged", {**full, "block_tables": short}, {}),
        ("block_tables index", "paged", {**paged, "block_tables": out_of_pool}, {}),
        ("head_order", "paged", paged, {"head_order": "backwards"}),
        ("bound_model", "paged", paged, {"bound_model": "exact"}),
        ("profile", "paged", paged, {"profile": "no-such-profile"}),
        ("aiter-fp4 order, 8 heads", "ragged", vc.fp4_ragged_case(SEED + 703, 3, 20, 8).kwargs,
         {"head_order": "aiter-fp4"}),
        ("k shape", "ragged", {**ragged, "k_fp4": ragged["k_fp4"][:, :10]}, {}),
        ("ks shape", "ragged", {**ragged, "cu_seqlen_ks": ragged["cu_seqlen_ks"][:2]}, {}),
        ("ks dtype", "ragged", {**ragged, "cu_seqlen_ks": ragged["cu_seqlen_ks"].astype(np.float32)}, {}),
        ("fp8 q ndim", "fp8", {**fp8, "q_fp8": fp8["q_fp8"][0]}, {}),
        ("fp8 variant", "fp8", fp8, {"variant": "e5m2"}),
        ("fp8 kv_cache width", "fp8", {**fp8, "kv_cache": fp8["kv_cache"][:, :, :100]}, {}),
        ("fp8 block_tables rows", "fp8", {**fp8, "block_tables": fp8["block_tables"][:1]}, {}),
    ]


BAD = _bad_calls()


@pytest.mark.parametrize("index", range(len(BAD)), ids=[b[0] for b in BAD])
def test_errors_are_the_oracles(index: int) -> None:
    label, op, kwargs, options = BAD[index]
    fn = OPS[op]
    with pytest.raises((TypeError, ValueError)) as want:
        fn(**kwargs, **options)
    with pytest.raises(want.type) as got:
        fn(**on(kwargs, "cpu"), **options)
    assert str(got.value) == str(want.value), f"{label} (seed {SEED + 700}): on tensors {got.value!r}"


def test_tensors_all_on_one_device() -> None:
    kwargs = vc.fp4_ragged_case(SEED + 800, 3, 20, 16).kwargs
    with pytest.raises(TypeError, match="k_fp4 must be a torch tensor"):
        oracle_vllm.fp4_ragged_logits_scored(**{**on(kwargs, "cpu"), "k_fp4": kwargs["k_fp4"]})


def test_the_gate_runs_the_oracle_itself() -> None:
    """The gate's device reference is the oracle's own function on tensors, NumPy in and out."""
    kwargs = vc.fp4_ragged_case(SEED + 800, 3, 20, 16).kwargs
    want = oracle_vllm.fp4_ragged_logits_scored(**kwargs)
    got = reference.on_device(oracle_vllm.fp4_ragged_logits_scored, "cpu")(**kwargs)
    for field in FIELDS:
        assert isinstance(getattr(got, field), np.ndarray), field
        assert np.array_equal(np.asarray(getattr(want, field)).view(np.uint8), np.asarray(getattr(got, field)).view(np.uint8)), field


# ---- GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_conformance_configs() -> None:
    counts = Counter()
    for cid, seed, kwargs, options in PAGED:
        for prof in FP4_PROFILES:
            check("paged", kwargs, f"{cid} (seed {seed}) profile {prof}", counts, GPU, profile=qv.profile(prof),
                  **options)
    for cid, seed, kwargs, options in RAGGED:
        for prof in FP4_PROFILES:
            check("ragged", kwargs, f"{cid} (seed {seed}) profile {prof}", counts, GPU, profile=qv.profile(prof),
                  **options)
    for cid, seed, kwargs, options in FP8:
        check("fp8", kwargs, f"{cid} (seed {seed})", counts, GPU, **options)
    report(counts, f"conformance configs on {GPU}")


@pytest.mark.gpu
def test_gpu_specials_profiles_and_options() -> None:
    counts = Counter()
    for seed in SPECIAL_SEEDS:
        rng = rng_of(seed + 1)
        options = dict(head_order=str(rng.choice(HEAD_ORDERS)), bound_model=str(rng.choice(QK_MODELS)),
                       profile=FP4_PROFILES[seed % 2])
        check("ragged", special_ragged(seed), f"specials seed {seed}", counts, GPU, **options)
        check("paged", special_paged(seed), f"specials seed {seed}", counts, GPU, **options)
    for profile in profiles.names():
        check("ragged", special_ragged(SEED + 100, rows=4, tokens=24, heads=16), f"seed {SEED + 100}", counts, GPU,
              profile=profile)
        check("paged", special_paged(SEED + 101, batch=2, next_n=2, max_ctx=24), f"seed {SEED + 101}", counts, GPU,
              profile=profile)
    paged = vc.fp4_paged_case(SEED + 900, 2, 2, 32, 90, block_size=32, ctx2d=True).kwargs
    for head_order in HEAD_ORDERS:
        for bound_model in QK_MODELS:
            check("paged", paged, f"seed {SEED + 900}", counts, GPU, head_order=head_order, bound_model=bound_model)
    for variant in ("fn", "fnuz"):
        for s in range(SEED + 600, SEED + 604):
            check("fp8", special_fp8(s, variant), f"specials seed {s}", counts, GPU, variant=variant,
                  head_order=HEAD_ORDERS[s % 3])
    report(counts, f"specials, profiles and options on {GPU}")


@pytest.mark.gpu
def test_gpu_production_size() -> None:
    """Thousands of tokens, 64 heads: each scorer once, the ragged one at 64 rows x 64 heads x
    2^16 tokens (the size the device passes are for); NumPy on the host."""
    import time

    counts = Counter()
    seed = SEED + 1000
    cases = [("paged", vc.fp4_paged_case(seed, 8, 4, 64, 8192, block_size=64), {"profile": qv.profile(SCORER_PROFILE)}),
             ("ragged", vc.fp4_ragged_case(seed + 1, 64, 1 << 16, 64, windows="causal"),
              {"profile": qv.profile(SCORER_PROFILE)}),
             ("fp8", vc.fp8_paged_case(seed + 2, 8, 4, 64, 8192, block_size=64), {})]
    for op, case, options in cases:
        fn = OPS[op]
        start = time.perf_counter()
        expected = fn(**case.kwargs, **options)
        host_s = time.perf_counter() - start
        inputs = on(case.kwargs, GPU)
        start = time.perf_counter()
        actual = fn(**inputs, **options)
        torch.cuda.synchronize()
        device_s = time.perf_counter() - start
        compare(expected, actual, f"{op} production seed {case.seed}", counts)
        print(f"\n{op} seed {case.seed}: {int(expected.window.sum()):,} in-window cells, oracle {host_s:.1f} s on the "
              f"host, {device_s:.1f} s on {GPU}")
    report(counts, f"production size on {GPU}")


def test_add_round_f32_leaves_a_sum_that_is_not_finite_as_it_is() -> None:
    """fl32(x + y) of an overflowed operand: +-Inf stays +-Inf and NaN stays NaN on both
    namespaces. The TwoSum error of such a sum is a NaN whose sign bit is the host's (x86 sets
    it, CUDA clears it); before, it moved -Inf to a NaN on x86 and +Inf to a NaN on CUDA."""
    from mxgate.oracle.scorers.arithmetic import add_round_f32

    x = np.array([np.inf, -np.inf, np.nan, 1.0, 2.0**100, -(2.0**-140)])
    y = np.array([1.0, 1.0, 1.0, 2.0**-60, 1.0, 2.0**-149])
    with np.errstate(invalid="ignore"):
        host = add_round_f32(x, y)
    assert host[:2].tolist() == [np.inf, -np.inf] and np.isnan(host[2])  # before: -Inf gave a NaN here
    assert host[3] == np.float32(1.0) and host[4] == np.float32(2.0**100)
    tensors = add_round_f32(torch.from_numpy(x), torch.from_numpy(y))
    assert np.array_equal(host.view(np.uint32), tensors.numpy().view(np.uint32))
