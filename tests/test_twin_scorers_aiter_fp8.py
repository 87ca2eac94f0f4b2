"""One function, two namespaces: AITER's FP8 paged scorer (mxgate.oracle.scorers.aiter_fp8) on
torch tensors against the same function on NumPy arrays, byte for byte.

CPU part (CI): the conformance configs of ``test_fp8_decode`` (planar and preshuffle K cache,
the same case builder and seeds) under both e4m3 variants and every qk_accum, head_order and
bound_model; the oracle calls of the AITER ``fp8_mqa_logits`` reference test, captured as that
test makes them; seeded random cases with special values planted (NaN, Inf, zero, subnormal
and 0xFF / 0x00 scale bytes, NaN / Inf / subnormal weights and exponent spans over the whole
float32 range, NaN and -0 codes in Q and K, float32 overflow in the head sum, empty windows and
ragged lengths, every call form); bad calls give the oracle's exception type and message.
Every comparison is of raw bytes (emulated float32, value and bound float64, the window) and
counts its cells; a mismatch names the seed, the config, the options and the first differing
cell.

GPU part (``--device cuda``, marked ``gpu``): the same comparisons with tensors on the card, and
one production-size call (64 rows, 64 heads, 2^15 tokens) against NumPy on the host.
"""

from __future__ import annotations

import itertools
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate.conformance import test_aiter_conformance as aiter_conformance  # noqa: E402
from mxgate.conformance.test_logits_conformance import AITER_CONFIGS  # noqa: E402
from mxgate.inputs import logits as lc  # noqa: E402
from mxgate.oracle import layouts  # noqa: E402
from mxgate.oracle import scorers as oracle_scorers  # noqa: E402
from mxgate.oracle.scorers import aiter_fp8 as oracle_fp8  # noqa: E402
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS  # noqa: E402
from mxgate.oracle.scorers.common import QK_ACCUM, QK_MODELS, ScoredLogits  # noqa: E402
from mxgate.twin import reference  # noqa: E402

SEED = 20261215
FP8_CONFIGS = AITER_CONFIGS[:3]  # test_fp8_decode's configs
VARIANTS = ("fn", "fnuz")
# every (qk_accum, head_order) pair, each with a bound model in turn: every bound model meets
# both qk_accum values, and each call's emulated and bound parts are independent of each other
OPTION_SETS = [dict(qk_accum=qa, head_order=ho, bound_model=QK_MODELS[i % len(QK_MODELS)])
               for i, (qa, ho) in enumerate(itertools.product(QK_ACCUM, HEAD_ORDERS))]
SPECIAL_SEEDS = [SEED + i for i in range(48)]
POISON_BITS = 0x7FA5A5A5
NAN_CODES = {"fn": (0x7F, 0xFF), "fnuz": (0x80,)}
SCALE_SPECIALS = np.array([0xFFFFFFFF, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFA00001,
                           0x7FA00001, 0x00000001, 0x00400000, 0x807FFFFF, 0x7F7FFFFF, 0xBF800000, 0x0C000000,
                           0x4E6E6B28], dtype=np.uint32)
WEIGHT_SPECIALS = np.array([0x7FC00000, 0xFFC00123, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001,
                            0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x3F800000], dtype=np.uint32)
FLOAT8 = {"fn": (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn), "fnuz": (torch.float8_e4m3fnuz, ml_dtypes.float8_e4m3fnuz)}


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


# ---- NumPy <-> torch with the same bytes, comparison of raw bytes ------------------------------


def to_torch(a: object, device: str) -> object:
    """NumPy arrays as tensors with the same bytes (ml_dtypes float8 as torch float8)."""
    if not isinstance(a, np.ndarray):
        return a
    if a.ndim and not a.flags.c_contiguous:  # a strided view stays strided: every other column
        wide = torch.empty(a.shape[:-1] + (2 * a.shape[-1],), dtype=to_torch(a[..., :0], "cpu").dtype, device=device)
        view = wide[..., ::2]
        view.copy_(to_torch(np.ascontiguousarray(a), device))
        return view
    for torch_dtype, np_dtype in FLOAT8.values():
        if a.dtype == np.dtype(np_dtype):
            return torch.from_numpy(a.view(np.uint8).copy()).to(device).view(torch_dtype)
    return torch.from_numpy(np.ascontiguousarray(a).copy()).to(device)


def to_host(t: object) -> object:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t


def same_bytes(field: str, want: np.ndarray | None, got: object, note: str, device: str) -> int:
    """Assert got (a tensor on device) holds want's bytes; -> the number of cells compared."""
    if want is None:
        assert got is None, f"{note}: {field}: the oracle gives None, the tensor call {type(got).__name__}"
        return 0
    assert isinstance(got, torch.Tensor), f"{note}: {field}: the tensor call gives {type(got).__name__}, not a tensor"
    assert got.device.type == torch.device(device).type, f"{note}: {field} is on {got.device}, not {device}"
    g = to_host(got)
    assert g.dtype == want.dtype and g.shape == want.shape, \
        f"{note}: {field}: oracle {want.dtype}{want.shape}, tensors {g.dtype}{g.shape}"
    if want.dtype == np.bool_:
        wb, gb = want, g
    else:
        unsigned = {4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
        wb, gb = want.view(unsigned), g.view(unsigned)
    bad = np.argwhere(wb != gb)
    if bad.size:
        r, t = (int(i) for i in bad[0])
        show = (lambda x: str(bool(x))) if want.dtype == np.bool_ else (lambda x: hex(int(x)))
        raise AssertionError(f"{note}: {field} differs in {len(bad)} cells, first (row {r}, token {t}): "
                             f"oracle {show(wb[r, t])} ({want[r, t]}), tensors {show(gb[r, t])} ({g[r, t]})")
    return want.size


def compare_scored(args: tuple, kwargs: dict, note: str, device: str) -> Counter:
    """pa_mqa_logits_fp8_scored on NumPy arrays and on tensors -> cells compared per field."""
    want = oracle_fp8.pa_mqa_logits_fp8_scored(*args, **kwargs)
    got = oracle_fp8.pa_mqa_logits_fp8_scored(*(to_torch(a, device) for a in args),
                                              **{k: to_torch(v, device) for k, v in kwargs.items()})
    assert isinstance(got, ScoredLogits), f"{note}: the tensor call gives {type(got).__name__}"
    assert (got.qk_accum, got.bound_model) == (want.qk_accum, want.bound_model), note
    counts = Counter()
    for field in ("value", "bound", "window", "emulated"):
        counts[field] += same_bytes(field, getattr(want, field), getattr(got, field), note, device)
    # cells a device takes from NumPy on the host (a NaN result), and cells of no finite bound
    counts["no finite bound"] += int((np.isinf(want.bound) & want.window).sum())
    if want.emulated is not None:
        counts["NaN emulated"] += int((np.isnan(want.emulated) & want.window).sum())
    return counts


def compare_emulated(args: tuple, kwargs: dict, note: str, device: str, with_out: bool) -> Counter:
    """pa_mqa_logits_fp8 through both, fresh or into a poisoned out (kept outside the window)."""
    kwargs = dict(kwargs)
    if with_out:
        rows = (args[2] if len(args) > 2 else kwargs["weights"]).shape[0]
        width = args[5] if len(args) > 5 else kwargs["max_seq_len"]
        kwargs["out"] = np.full((rows, width), POISON_BITS, np.uint32).view(np.float32)
    want = oracle_fp8.pa_mqa_logits_fp8(*args, **kwargs)
    tkw = {k: to_torch(v, device) for k, v in kwargs.items()}
    got = oracle_fp8.pa_mqa_logits_fp8(*(to_torch(a, device) for a in args), **tkw)
    if with_out:
        assert want is kwargs["out"], "the oracle returns its out"
        assert got is tkw["out"], f"{note}: a tensor call must return the out tensor it wrote"
    return Counter(emulated=same_bytes("emulated", want, got, note, device))


# ---- the conformance tests' calls -----------------------------------------------------------


def fp8_decode_configs() -> list[tuple]:
    return [(cfg, pre, variant) for cfg in FP8_CONFIGS for pre in (False, True) for variant in VARIANTS]


def fp8_decode_id(c: tuple) -> str:
    cfg, pre, variant = c
    seed = 7000 + sum(cfg) + int(pre)
    return "b{}_ctx{}_n{}_h{}".format(*cfg) + ("_preshuffle" if pre else "_planar") + f"_{variant}_seed{seed}"


def check_fp8_decode(c: tuple, device: str) -> Counter:
    """test_fp8_decode's case (its seed and builder), both variants, every option value."""
    cfg, pre, variant = c
    seed = 7000 + sum(cfg) + int(pre)
    case = lc.fp8_decode_case(seed, *cfg, preshuffle=pre, variant=variant)
    counts = Counter()
    for opts in OPTION_SETS:
        note = f"seed {seed} {fp8_decode_id(c)} {opts}"
        counts += compare_scored((), {**case.kwargs, **opts}, note, device)
    for head_order, with_out in zip(HEAD_ORDERS, (False, True, False)):
        note = f"seed {seed} {fp8_decode_id(c)} emulated head_order={head_order} out={with_out}"
        counts += compare_emulated((), {**case.kwargs, "head_order": head_order, "qk_accum": QK_ACCUM[1]}, note,
                                   device, with_out)
    return counts


RAGGED_CONFIGS = [(24, 300, 32), (16, 512, 64), (9, 70, 16)]  # test_fp8_mqa_logits's configs


def ragged_calls(cfg: tuple) -> tuple[int, tuple, dict]:
    """The oracle call the AITER fp8_mqa_logits reference test judges with, captured as
    fp8_ragged_case makes it (its seed, its arguments)."""
    seed = 9500 + sum(cfg)
    seen = []

    def oracle_on_device(function):  # the conformance fixture's role, recording the call
        def run(*args, **kwargs):
            seen.append((function, args, kwargs))
            return function(*args, **kwargs)
        return run

    aiter_conformance.fp8_ragged_case(seed, *cfg, oracle_on_device)
    assert len(seen) == 1 and seen[0][0] is oracle_fp8.pa_mqa_logits_fp8_scored, seen
    return seed, seen[0][1], seen[0][2]


def check_ragged(cfg: tuple, device: str) -> Counter:
    seed, args, kwargs = ragged_calls(cfg)
    note = f"seed {seed} fp8_mqa_logits s{cfg[0]}_kv{cfg[1]}_h{cfg[2]} {kwargs}"
    counts = compare_scored(args, kwargs, note, device)
    for opts in OPTION_SETS[1:4]:
        counts += compare_scored(args, {**kwargs, **opts, "variant": "fn"}, f"{note} {opts}", device)
    return counts


# ---- seeded cases with special values planted -------------------------------------------------


def special_case(seed: int) -> tuple[tuple, dict, dict, str]:
    """A random FP8 scorer call with special values planted -> (args, kwargs, scored options,
    a description). Each kind of special value is planted with probability 1/2, sparsely, so
    most cells stay on the device and some go to the host."""
    rng = rng_of(seed)
    variant = VARIANTS[seed % 2]
    B, nn = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    H = int(rng.choice([16, 32, 48]))
    D = int(rng.choice([32, 96, 128, 256], p=[0.15, 0.15, 0.5, 0.2]))
    pre = bool(rng.integers(0, 2))
    bsz = int(rng.choice([16, 32, 64]))
    max_ctx = int(rng.integers(1, 160))
    lens = rng.integers(0, max_ctx + 1, size=B)
    lens[int(rng.integers(0, B))] = int(rng.choice([0, min(nn - 1, max_ctx), max_ctx]))  # empty / short / full
    case = lc.fp8_decode_case(seed, B, max_ctx, nn, H, D, block_size=bsz, preshuffle=pre, variant=variant,
                              context_lens=lens)
    k = dict(case.kwargs)
    q, w, kv = k["q_fp8"].copy(), k["weights"].copy(), k["kv_cache"].copy()
    planted = []
    if rng.random() < 0.5:  # NaN and -0 / +0 codes in Q
        flat = q.reshape(-1)
        codes = NAN_CODES[variant] + (0x80, 0x00) if variant == "fn" else NAN_CODES[variant] + (0x00,)
        idx = rng.choice(flat.size, size=int(rng.integers(1, 4)), replace=False)
        flat[idx] = rng.choice(codes, size=idx.size)
        planted.append("q codes")
    lay = layouts.get("aiter-fp8-kv-preshuffle" if pre else "aiter-fp8-kv")
    slots = np.arange(kv.shape[0] * bsz)
    data, ks = lay.gather(kv, slots=slots, num_blocks=kv.shape[0], block_size=bsz, head_dim=D)
    if rng.random() < 0.5:  # NaN and zero codes in K
        idx = rng.choice(data.size, size=int(rng.integers(1, 5)), replace=False)
        data.reshape(-1)[idx] = rng.choice(NAN_CODES[variant] + (0x00,), size=idx.size)
        planted.append("k codes")
    if rng.random() < 0.5:  # special K scales: 0xFF / 0x00 bytes, NaN payloads, Inf, zeros, subnormals
        idx = rng.choice(ks.size, size=int(rng.integers(1, 8)), replace=False)
        ks.view(np.uint32)[idx] = rng.choice(SCALE_SPECIALS, size=idx.size)
        planted.append("k scales")
    if rng.random() < 0.5:  # special weights
        idx = rng.choice(w.size, size=int(rng.integers(1, 4)), replace=False)
        w.view(np.uint32).reshape(-1)[idx] = rng.choice(WEIGHT_SPECIALS, size=idx.size)
        planted.append("weights")
    if rng.random() < 0.5:  # a row of weights over the whole finite float32 range (subnormals too)
        r = int(rng.integers(0, w.shape[0]))
        expo = rng.integers(0, 255, size=H).astype(np.uint32)
        frac = rng.integers(0, 1 << 23, size=H).astype(np.uint32)
        sign = rng.integers(0, 2, size=H).astype(np.uint32)
        w[r] = ((sign << 31) | (expo << 23) | frac).view(np.float32)
        planted.append("wide weights")
    if rng.random() < 0.5:  # float32 overflow in relu * w and in the head sum: +Inf, -Inf, NaN
        r = int(rng.integers(0, w.shape[0]))
        w[r, : H // 2] = np.float32(3.0e38)
        w[r, H // 2:] = np.float32(-3.0e38)
        planted.append("overflow")
    lay.scatter(kv, np.ascontiguousarray(data), np.ascontiguousarray(ks), slots=slots)
    # the call's form: 3-D or float8 Q, 4-D K cache, the kernel's launch keywords
    form = []
    if rng.random() < 0.3:
        k["q_fp8"] = q.reshape(B * nn, H, D)
        k["next_n"] = nn
        form.append("3-D q")
    elif rng.random() < 0.3:
        k["q_fp8"] = q.view(FLOAT8[variant][1])
        form.append("float8 q")
    else:
        k["q_fp8"] = q
    k["kv_cache"] = kv
    if rng.random() < 0.3:
        k["kv_cache"] = kv.reshape(kv.shape[0], bsz, 1, D + 4)
        form.append("4-D kv_cache")
    if rng.random() < 0.3:
        k["KVBlockSize"] = bsz
        k["Preshuffle"] = k.pop("preshuffle")
        k["ChunkK"] = 256
        form.append("launch keywords")
    k["weights"] = w
    opts = dict(qk_accum=str(rng.choice(QK_ACCUM)), head_order=str(rng.choice(HEAD_ORDERS)),
                bound_model=str(rng.choice(QK_MODELS)))
    note = (f"seed {seed} special B{B}_n{nn}_h{H}_d{D}_bs{bsz}_{'preshuffle' if pre else 'planar'}_{variant} "
            f"lens={lens.tolist()} planted={planted or 'none'} form={form or 'plain'} {opts}")
    return (), k, opts, note


def check_special(seed: int, device: str) -> Counter:
    args, kwargs, opts, note = special_case(seed)
    counts = compare_scored(args, {**kwargs, **opts}, note, device)
    counts += compare_scored(args, {**kwargs, **opts, "emulate": False}, f"{note} emulate=False", device)
    em = {k: v for k, v in opts.items() if k != "bound_model"}
    counts += compare_emulated(args, {**kwargs, **em}, f"{note} emulated", device, with_out=bool(seed % 3 == 0))
    return counts


# ---- bad calls --------------------------------------------------------------------------------


def _base_call() -> dict:
    return dict(lc.fp8_decode_case(SEED, 2, 100, 2, 16, block_size=32).kwargs)


def _with(**changes):
    def make() -> dict:
        k = _base_call()
        for name, change in changes.items():
            k[name] = change(k) if callable(change) else change
        return k
    return make


def _strided_out(k: dict) -> np.ndarray:
    rows = k["q_fp8"].shape[0] * k["q_fp8"].shape[1]
    return np.zeros((rows, 2 * k["max_seq_len"]), np.float32)[:, ::2]


def _bad_table(k: dict) -> np.ndarray:
    bt = k["block_tables"].copy()
    bt[1, 0] = 10_000
    return bt


BAD_CALLS = [
    ("q float32", _with(q_fp8=lambda k: k["q_fp8"].astype(np.float32))),
    ("q 2-D", _with(q_fp8=lambda k: k["q_fp8"].reshape(4, -1))),
    ("3-D q without next_n", _with(q_fp8=lambda k: k["q_fp8"].reshape(4, 16, 128))),
    ("next_n mismatch", _with(next_n=3)),
    ("kv_cache row width", _with(kv_cache=lambda k: k["kv_cache"][:, :, :-1])),
    ("kv_cache dtype", _with(kv_cache=lambda k: k["kv_cache"].view(np.int8))),
    ("weights float64", _with(weights=lambda k: k["weights"].astype(np.float64))),
    ("weights shape", _with(weights=lambda k: k["weights"][:, :8])),
    ("context_lens float", _with(context_lens=lambda k: k["context_lens"].astype(np.float32))),
    ("context_lens past max_seq_len", _with(max_seq_len=lambda k: int(k["context_lens"].max()) - 1)),
    ("block index", _with(block_tables=_bad_table)),
    ("block table columns", _with(block_tables=lambda k: k["block_tables"][:, :1], context_lens=np.array([100, 100], np.int32))),
    ("variant", _with(variant="e5m2")),
    ("head_order", _with(head_order="reverse")),
    ("qk_accum", _with(qk_accum="exact")),
    ("preshuffle flag", _with(preshuffle=1)),
    ("launch keyword", _with(Waves=4)),
    ("KVBlockSize", _with(KVBlockSize=64)),
    ("preshuffle block size", lambda: dict(lc.fp8_decode_case(SEED, 2, 100, 1, 16, block_size=24).kwargs,
                                           preshuffle=True)),
    ("head_dim 48", _with(q_fp8=lambda k: np.ascontiguousarray(k["q_fp8"][..., :48]),
                          kv_cache=lambda k: np.ascontiguousarray(k["kv_cache"][:, :, :52]))),
    ("aiter-fp4 order, 24 heads", lambda: dict(lc.fp8_decode_case(SEED, 2, 100, 1, 24).kwargs, head_order="aiter-fp4")),
    ("out dtype", _with(out=lambda k: np.zeros((4, k["max_seq_len"]), np.float64))),
    ("out shape", _with(out=lambda k: np.zeros((3, k["max_seq_len"]), np.float32))),
    ("out strided", _with(out=_strided_out)),
    ("max_seq_len missing", _with(max_seq_len=None)),
]
BAD_SCORED = [
    ("bound_model", _with(bound_model="exact")),
    ("emulate flag", _with(emulate="yes")),
]


def check_bad_call(make, scored: bool, device: str) -> str:
    k = make()
    fn = oracle_fp8.pa_mqa_logits_fp8_scored if scored else oracle_fp8.pa_mqa_logits_fp8
    with pytest.raises((TypeError, ValueError)) as want:
        fn(**k)
    with pytest.raises(want.type) as got:
        fn(**{name: to_torch(v, device) for name, v in k.items()})
    assert str(got.value) == str(want.value), f"tensors: {got.value!r}; NumPy: {want.value!r}"
    return str(want.value)


# =============================================================================================
# CPU
# =============================================================================================


@pytest.mark.parametrize("c", fp8_decode_configs(), ids=fp8_decode_id)
def test_fp8_decode_configs(c: tuple) -> None:
    counts = check_fp8_decode(c, "cpu")
    cfg = c[0]
    width = cfg[1]
    rows = cfg[0] * cfg[2]
    per_call = rows * width
    n_scored = len(OPTION_SETS)
    assert counts == Counter(value=n_scored * per_call, bound=n_scored * per_call, window=n_scored * per_call,
                             emulated=(n_scored + len(HEAD_ORDERS)) * per_call), counts


@pytest.mark.parametrize("cfg", RAGGED_CONFIGS, ids=lambda c: "s{}_kv{}_h{}".format(*c))
def test_fp8_mqa_logits_reference_calls(cfg: tuple) -> None:
    counts = check_ragged(cfg, "cpu")
    cells = cfg[0] * cfg[1]
    assert counts == Counter(value=4 * cells, bound=4 * cells, window=4 * cells, emulated=4 * cells), counts


def test_special_values() -> None:
    """Seeded cases with special values planted, both variants, each with the scored form
    (emulated and not) and the emulated form; every planted kind occurs in some case."""
    total = Counter()
    kinds = Counter()
    for seed in SPECIAL_SEEDS:
        total += check_special(seed, "cpu")
        kinds.update(special_case(seed)[3].split("planted=")[1].split(" form=")[0].strip("[]").replace("'", "")
                     .split(", "))
    for kind in ("q codes", "k codes", "k scales", "weights", "wide weights", "overflow"):
        assert kinds[kind] > 0, f"no case plants {kind}: {kinds}"
    assert total["no finite bound"] > 0 and total["NaN emulated"] > 0, total
    assert total["value"] > total["no finite bound"] and total["emulated"] == total["value"], total
    print(f"special cases: {dict(total)} cells compared; planted {dict(kinds)}")


@pytest.mark.parametrize("name,make", BAD_CALLS, ids=[n for n, _ in BAD_CALLS])
def test_bad_calls_raise_the_oracles_error(name: str, make) -> None:
    """Both forms (the scored one takes no out: its launch check names it)."""
    messages = {check_bad_call(make, scored, "cpu") for scored in (False, True)}
    assert all(messages), name


@pytest.mark.parametrize("name,make", BAD_SCORED, ids=[n for n, _ in BAD_SCORED])
def test_bad_scored_calls_raise_the_oracles_error(name: str, make) -> None:
    assert check_bad_call(make, scored=True, device="cpu"), name


def test_a_non_tensor_is_refused() -> None:
    k = {name: to_torch(v, "cpu") for name, v in _base_call().items()}
    k["kv_cache"] = k["kv_cache"].numpy()
    with pytest.raises(TypeError, match="kv_cache must be a torch tensor, got ndarray"):
        oracle_fp8.pa_mqa_logits_fp8(**k)


def test_the_gate_runs_the_oracle_itself() -> None:
    """The gate's device reference is the oracle's own function on tensors, NumPy in and out."""
    assert oracle_scorers.pa_mqa_logits_fp8 is oracle_fp8.pa_mqa_logits_fp8
    kwargs = dict(lc.fp8_decode_case(SEED, 2, 100, 2, 16, block_size=32).kwargs)
    want = oracle_fp8.pa_mqa_logits_fp8_scored(**kwargs)
    got = reference.on_device(oracle_fp8.pa_mqa_logits_fp8_scored, "cpu")(**kwargs)
    for field in ("emulated", "value", "bound", "window"):
        assert isinstance(getattr(got, field), np.ndarray), field
        assert np.array_equal(np.asarray(getattr(want, field)).view(np.uint8), np.asarray(getattr(got, field)).view(np.uint8)), field


# =============================================================================================
# GPU
# =============================================================================================

GPU = "cuda"


@pytest.mark.gpu
def test_gpu_fp8_decode_configs() -> None:
    total = Counter()
    for c in fp8_decode_configs():
        total += check_fp8_decode(c, GPU)
    assert total["value"] > 0 and total["emulated"] > total["value"], total
    print(f"fp8_decode configs on {GPU}: {dict(total)} cells compared")


@pytest.mark.gpu
def test_gpu_fp8_mqa_logits_reference_calls() -> None:
    total = Counter()
    for cfg in RAGGED_CONFIGS:
        total += check_ragged(cfg, GPU)
    assert total["value"] == 4 * sum(c[0] * c[1] for c in RAGGED_CONFIGS), total


@pytest.mark.gpu
def test_gpu_special_values() -> None:
    """The CPU part's seeds and as many more: on the card the NaN cells' bits come from NumPy on the host."""
    total = Counter()
    for seed in SPECIAL_SEEDS + [SEED + 1000 + i for i in range(48)]:
        total += check_special(seed, GPU)
    assert total["value"] > 0, total
    print(f"special cases on {GPU}: {dict(total)} cells compared")


@pytest.mark.gpu
def test_gpu_bad_calls() -> None:
    for _, make in BAD_CALLS:
        for scored in (False, True):
            check_bad_call(make, scored, GPU)
    for _, make in BAD_SCORED:
        check_bad_call(make, scored=True, device=GPU)


@pytest.mark.gpu
def test_gpu_production_size() -> None:
    """64 rows (16 batches x next_n 4), 64 heads, up to 2^15 tokens, ragged, with a few special
    cells: tensors on the card against NumPy on the host, every field."""
    seed = SEED + 7
    rng = rng_of(seed)
    lens = rng.integers(1 << 14, (1 << 15) + 1, size=16)
    case = lc.fp8_decode_case(seed, 16, 1 << 15, 4, 64, context_lens=lens)
    k = dict(case.kwargs)
    w = k["weights"].copy()
    w[5, 3] = np.float32(np.inf)  # one row goes to the host
    k["weights"] = w
    note = f"seed {seed} production lens={lens.tolist()}"
    counts = compare_scored((), {**k, "bound_model": "any-order", "head_order": "pairwise"}, note, GPU)
    counts += compare_emulated((), k, f"{note} emulated", GPU, with_out=True)
    assert counts["value"] == 64 * (1 << 15) and counts["emulated"] == 2 * 64 * (1 << 15), counts
    print(f"production size on {GPU}: {dict(counts)} cells compared")
