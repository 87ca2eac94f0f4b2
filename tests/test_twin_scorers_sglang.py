"""sglang's FP4 index scorer (mxgate.oracle.scorers.sglang), one function on two namespaces: the
oracle on torch tensors against the oracle on NumPy arrays, byte for byte: emulated float32,
value and bound float64 and the window (tensors on the inputs' device), NaN payloads included.

CPU part (CI): the conformance configs of ``test_sglang_decode`` and ``test_sglang_paged`` (their
case builder and seeds) under every profile, every qk_accum, head order and bound model, the
plain (emulated-only) forms, ``emulate=False``, bf16 / uint16 / float32 argument dtypes; seeded
random cases with planted specials (0xFF and 0x00 scale bytes, bytes whose k overflows float32,
NaN / Inf / subnormal / zero q and weights, wide exponent spans, empty windows, ragged and
over-long lengths, slots outside the window that are no slots at all) under one profile per
distinct value of the fields the scorer reads, small chunks (several passes and host patches
away from position 0); the same errors for bad calls, tensors on one device.
GPU part (``--device cuda``): the same comparisons on the card, and production-size calls (64
heads, thousands and 2^16 positions) against the oracle on the host.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate import oracle  # noqa: E402
from mxgate.conformance import test_logits_conformance as conformance  # noqa: E402
from mxgate.inputs import logits as lc  # noqa: E402
from mxgate.inputs.samples import bf16_values, spread_groups  # noqa: E402
from mxgate.oracle import layouts, profiles  # noqa: E402
from mxgate.oracle.geometry import HEAD_DIM  # noqa: E402
from mxgate.oracle.scorers import ScoredLogits  # noqa: E402
from mxgate.oracle.scorers import sglang as osg  # noqa: E402
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS  # noqa: E402
from mxgate.oracle.scorers.common import QK_MODELS  # noqa: E402
from mxgate.twin import reference  # noqa: E402

FIELDS = ("emulated", "value", "bound", "window")
PROFILES = profiles.names()
# the Profile fields the scorer itself reads: e8m0 decoding (dequantized k, the byte-0 exact
# path) and the bf16 NaN rule; one profile per distinct combination covers its special cases
SCORER_READS = ("byte0", "byte255", "bf16_nan")
GPU = "cuda"
# the oracle's NumPy steps warn on 0 * inf and overflow (0xFF bytes, huge k): planted on purpose
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def distinct_profiles() -> list[str]:
    seen: dict[tuple, str] = {}
    for name in PROFILES:
        p = profiles.get(name)
        seen.setdefault(tuple(getattr(p, f) for f in SCORER_READS), name)
    return list(seen.values())


def _parametrized(test, argname: str) -> list:
    """The values a conformance test is parametrized with (one source for the configs)."""
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize" and mark.args[0] == argname:
            return list(mark.args[1])
    raise LookupError(f"{test.__name__} has no parametrize mark for {argname!r}")


DECODE_SHAPES = _parametrized(conformance.test_sglang_decode, "shape")
PAGED_RATIOS = _parametrized(conformance.test_sglang_paged, "ratio")
PAGED_SHAPE = (3, 256, 64)  # test_sglang_paged's B, L, H


# ---- tensors in, bytes out ---------------------------------------------------------------------


def to_torch(a: object, device: str, bf16: str = "uint16") -> object:
    """A NumPy array as a tensor with the same bytes on ``device``; uint16 (bf16 bits) as
    torch.uint16, or as torch.bfloat16 with ``bf16="bfloat16"``."""
    if not isinstance(a, np.ndarray):
        return a
    a = np.ascontiguousarray(a)
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16).copy()).view(getattr(torch, bf16)).to(device)
    return torch.from_numpy(a.copy()).to(device)


def to_host(t: object) -> object:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t


def same_bytes(want: np.ndarray | None, got: object, label: str) -> int:
    """The NumPy answer and the tensor one, byte for byte (shape and dtype too); -> cells compared.
    A mismatch names the first differing cell with both bit patterns."""
    if want is None or got is None:
        assert want is None and got is None, f"{label}: numpy {type(want).__name__}, torch {type(got).__name__}"
        return 0
    assert isinstance(got, torch.Tensor), f"{label}: tensors in give {type(got).__name__}, not a tensor"
    got = to_host(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), \
        f"{label}: torch {got.dtype}{got.shape}, numpy {want.dtype}{want.shape}"
    w = np.ascontiguousarray(want).view(np.uint8).reshape(want.shape + (want.itemsize,))
    g = np.ascontiguousarray(got).view(np.uint8).reshape(got.shape + (got.itemsize,))
    differ = (w != g).any(axis=-1)
    if differ.any():
        cell = tuple(int(i) for i in np.argwhere(differ)[0])
        raise AssertionError(f"{label}: {int(differ.sum())} cells differ, first {cell}: numpy {want[cell]!r} "
                             f"(0x{w[cell][::-1].tobytes().hex()}), torch {got[cell]!r} (0x{g[cell][::-1].tobytes().hex()})")
    return int(want.size)


def on_device(got: object, device: str, label: str) -> object:
    """The answer on tensors, checked to lie on the asked device (every tensor field)."""
    fields = [getattr(got, f) for f in FIELDS] if isinstance(got, ScoredLogits) else [got]
    for t in fields:
        if isinstance(t, torch.Tensor):
            assert t.device.type == torch.device(device).type, f"{label}: a result on {t.device}, asked {device}"
    return got


def same_scored(want: ScoredLogits, got: ScoredLogits, label: str, counts: Counter) -> None:
    assert isinstance(got, ScoredLogits), f"{label}: tensors in give {type(got).__name__}"
    for field in FIELDS:
        counts[field] += same_bytes(getattr(want, field), getattr(got, field), f"{label} {field}")
    assert (got.qk_accum, got.bound_model) == (want.qk_accum, want.bound_model), label
    counts["calls"] += 1


def check_decode(k: dict, device: str, label: str, counts: Counter, bf16: str = "uint16", **options) -> None:
    """The scored form (all four fields) and, without bound options, the plain form."""
    want = osg.fp4_index_logits_decode_scored(**k, **options)
    got = osg.fp4_index_logits_decode_scored(**{n: to_torch(a, device, bf16) for n, a in k.items()}, **options)
    same_scored(want, on_device(got, device, label), label, counts)


def check_plain_decode(k: dict, device: str, label: str, counts: Counter, **options) -> None:
    want = osg.fp4_index_logits_decode(**k, **options)
    got = osg.fp4_index_logits_decode(**{n: to_torch(a, device) for n, a in k.items()}, **options)
    counts["plain"] += same_bytes(want, on_device(got, device, label), f"{label} plain emulated")


def paged_case(ratio: int, profile: str) -> tuple[int, dict, tuple]:
    """test_sglang_paged's inputs: -> (seed, decode kwargs, paged positional args)."""
    B, L, H = PAGED_SHAPE
    seed = 8100 + ratio
    k = lc.sglang_decode_case(seed, B, L, H, profile=profile).kwargs
    rng = lc.rng_for(seed)
    req = rng.permutation(B + 1)[:B]
    req_table = np.zeros((B + 1, L * ratio), np.int32)
    req_table[req, ::ratio] = k["slots"] * ratio
    return seed, k, (k["q"], k["weights"], req, req_table, k["lens"], k["table"], 64, L, ratio)


def check_paged(args: tuple, device: str, label: str, counts: Counter, plain: bool = False, **options) -> None:
    targs = tuple(to_torch(a, device) for a in args)
    want = osg.fp4_index_logits_paged_scored(*args, **options)
    same_scored(want, on_device(osg.fp4_index_logits_paged_scored(*targs, **options), device, label), label, counts)
    slots = osg.paged_slots(args[2], args[3], args[4], args[7], args[8])
    got = on_device(osg.paged_slots(*targs[2:5], args[7], args[8]), device, label)
    counts["paged_slots"] += same_bytes(slots, got, f"{label} paged_slots")
    if plain:
        options = {n: v for n, v in options.items() if n not in ("bound_model", "emulate")}
        want = osg.fp4_index_logits_paged(*args, **options)
        got = on_device(osg.fp4_index_logits_paged(*targs, **options), device, label)
        counts["plain"] += same_bytes(want, got, f"{label} plain emulated")


def option_grid() -> list[dict]:
    """Every qk_accum x head_order pair (what the emulated order reads), the bound models in
    turn (what the bound reads): each option value, each emulated combination."""
    pairs = list(itertools.product(osg.QK_ACCUM, HEAD_ORDERS))
    return [dict(qk_accum=qa, head_order=ho, bound_model=QK_MODELS[i % len(QK_MODELS)])
            for i, (qa, ho) in enumerate(pairs)]


# ---- the conformance configs -------------------------------------------------------------------


def run_conformance_profiles(device: str) -> Counter:
    """Every conformance config, every profile (the case built under it, as the gate does), the
    default options."""
    counts: Counter = Counter()
    for (B, L, H), name in itertools.product(DECODE_SHAPES, PROFILES):
        seed = 8000 + B + L + H
        k = lc.sglang_decode_case(seed, B, L, H, profile=name).kwargs
        check_decode(k, device, f"decode b{B}_L{L}_h{H} seed {seed} profile {name}", counts, profile=name)
    for ratio, name in itertools.product(PAGED_RATIOS, PROFILES):
        seed, _, args = paged_case(ratio, name)
        check_paged(args, device, f"paged ratio {ratio} seed {seed} profile {name}", counts, profile=name)
    return counts


def run_conformance_options(device: str) -> Counter:
    """Every conformance config under every option value (the default profile's case), the plain
    forms, emulate=False, bf16 tensors and a Profile object for the name."""
    counts: Counter = Counter()
    for B, L, H in DECODE_SHAPES:
        seed = 8000 + B + L + H
        k = lc.sglang_decode_case(seed, B, L, H).kwargs
        label = f"decode b{B}_L{L}_h{H} seed {seed}"
        for opts in option_grid():
            check_decode(k, device, f"{label} {opts}", counts, **opts)
            check_plain_decode(k, device, f"{label} {opts}", counts, qk_accum=opts["qk_accum"],
                               head_order=opts["head_order"])
        check_decode(k, device, f"{label} emulate=False", counts, emulate=False)
        check_decode(k, device, f"{label} torch.bfloat16", counts, bf16="bfloat16", profile=profiles.get("gfx950"))
        k32 = dict(k, weights=oracle.bf16_to_f32(k["weights"]))  # float32 weights: the wrapper's bf16 cast
        check_decode(k32, device, f"{label} float32 weights", counts)
    for ratio in PAGED_RATIOS:
        seed, _, args = paged_case(ratio, "sglang-rne")
        for opts in option_grid():
            check_paged(args, device, f"paged ratio {ratio} seed {seed} {opts}", counts, plain=True, **opts)
    return counts


def test_conformance_configs_every_profile() -> None:
    counts = run_conformance_profiles("cpu")
    calls = (len(DECODE_SHAPES) + len(PAGED_RATIOS)) * len(PROFILES)
    assert counts["calls"] == calls and counts["emulated"] == counts["value"] == counts["bound"] > 0
    print(f"\n{calls} calls identical: {dict(counts)}")


def test_conformance_configs_every_option() -> None:
    counts = run_conformance_options("cpu")
    grid = len(option_grid())
    assert counts["calls"] == len(DECODE_SHAPES) * (grid + 3) + len(PAGED_RATIOS) * grid
    assert counts["plain"] > 0 and counts["paged_slots"] > 0 and counts["bound"] > 0
    assert {o["bound_model"] for o in option_grid()} == set(QK_MODELS)
    print(f"\n{dict(counts)} identical")


# ---- planted specials --------------------------------------------------------------------------

Q_SPECIALS = np.array([0x7F80, 0xFF80, 0x7FC1, 0xFFC0, 0x7F81, 0x0001, 0x807F, 0x0000, 0x8000], np.uint16)
W_SPECIALS = np.array([0x7FC3, 0xFF80, 0x7F80, 0x0001, 0x8002, 0x0000, 0x8000], np.uint16)


def special_case(seed: int) -> tuple[dict, str]:
    """Seeded raw inputs with specials planted; -> (decode kwargs, a description for the id).

    k rows: random codes, scale bytes near 127 with some rows far apart (wide spans), and
    planted 0xFF, 0x00 and 253 / 254 (6 * 2^126 overflows float32) bytes. q: bf16 values with
    wide group spans, zero heads, and (every other seed, in one request) non-finite, subnormal
    and signed-zero elements. Weights: planted NaN / Inf / subnormal / zeros in every third seed,
    float32 weights (with a NaN payload) in every fourth. Lengths ragged, some 0, some past L;
    slots outside the window are -1 or far past the table.
    """
    rng = rng_of(seed)
    B = int(rng.integers(1, 5))
    H = int(rng.choice([8, 16, 32]))
    L = int(rng.integers(1, 96))
    page_size = int(rng.choice([16, 64]))
    pages = -(-(L + 8) // page_size)
    pool = pages * page_size
    codes = rng.integers(0, 16, size=(pool, HEAD_DIM), dtype=np.uint8)
    e8m0 = rng.integers(118, 136, size=(pool, 4))
    wide = rng.random(pool) < 0.2
    e8m0[wide] = rng.integers(1, 255, size=(int(wide.sum()), 4))
    for byte, share in ((0xFF, 0.04), (0x00, 0.05), (253, 0.03), (254, 0.03)):
        hit = rng.random((pool, 4)) < share
        e8m0[hit] = byte
    table = layouts.get("sglang-page68").new_buffer(num_pages=pages, page_size=page_size)
    layouts.get("sglang-page68").scatter(table, oracle.pack_nibbles(codes), e8m0.astype(np.uint8),
                                         page_size=page_size)
    spread = int(rng.choice([0, 6, 30]))
    q = oracle.bf16_bits(spread_groups(rng, bf16_values(rng, (B, H, HEAD_DIM)), spread))
    q[rng.random((B, H)) < 0.1] = 0  # heads without a nonzero element
    notes = [f"b{B}_L{L}_h{H}_page{page_size}_spread{spread}"]
    if seed % 2 == 0:
        hit = rng.random((H, HEAD_DIM)) < 0.004
        q[0][hit] = rng.choice(Q_SPECIALS, size=int(hit.sum()))
        notes.append("q-specials")
    w = oracle.bf16_bits(bf16_values(rng, (B, H), 0.1))
    if seed % 3 == 0:
        hit = rng.random((B, H)) < 0.15
        w[hit] = rng.choice(W_SPECIALS, size=int(hit.sum()))
        notes.append("w-specials")
    weights: np.ndarray = w
    if seed % 4 == 1:
        weights = oracle.bf16_to_f32(w).copy()
        weights.view(np.uint32)[0, 0] = 0x7FA00001  # a NaN the wrapper's bf16 cast must round
        notes.append("w-float32")
    lens = rng.integers(0, L + 6, size=B)
    if seed % 7 == 3:
        lens[:] = 0
        notes.append("empty")
    slots = np.stack([rng.permutation(pool)[:L] for _ in range(B)]).astype(np.int64)
    outside = np.arange(L)[None, :] >= np.minimum(lens, L)[:, None]
    slots[outside] = rng.choice(np.array([-1, 10**9], np.int64), size=int(outside.sum()))
    return dict(q=q, weights=weights, slots=slots, lens=lens, table=table, page_size=page_size), "_".join(notes)


SPECIAL_SEEDS = range(9100, 9116)


def run_specials(device: str, seeds) -> Counter:
    counts: Counter = Counter()
    grid = option_grid()
    names = distinct_profiles()
    for i, seed in enumerate(seeds):
        k, note = special_case(seed)
        for j, name in enumerate(names):
            opts = dict(grid[(i + j) % len(grid)])
            if k["q"].shape[1] % 16:
                opts["head_order"] = "pairwise" if opts["head_order"] == "aiter-fp4" else opts["head_order"]
            check_decode(k, device, f"special seed {seed} {note} profile {name} {opts}", counts, profile=name, **opts)
        counts["cases"] += 1
    return counts


def test_special_values() -> None:
    counts = run_specials("cpu", SPECIAL_SEEDS)
    assert counts["cases"] == len(SPECIAL_SEEDS) and counts["calls"] == len(SPECIAL_SEEDS) * len(distinct_profiles())
    assert len(distinct_profiles()) >= 5
    print(f"\n{dict(counts)} identical")


def test_special_values_reach_every_host_path() -> None:
    """The planted cases do reach what tensors hand to the host's NumPy code: exact-path positions,
    NaN head sums, non-finite values, infinite bounds, empty windows."""
    reached = Counter()
    for seed in SPECIAL_SEEDS:
        k, _ = special_case(seed)
        s = osg.fp4_index_logits_decode_scored(**k, profile="sglang-rne")
        w = s.window
        reached["nan emulated"] += int(np.isnan(s.emulated[w]).sum())
        reached["non-finite value"] += int((~np.isfinite(s.value[w])).sum())
        reached["inf bound"] += int(np.isinf(s.bound[w]).sum())
        reached["finite bound"] += int(np.isfinite(s.bound[w]).sum())
        reached["empty window"] += int(not w.any())
        reached["slow"] += int(_slow_positions(k, "sglang-rne"))
    assert all(reached[key] > 0 for key in ("nan emulated", "non-finite value", "inf bound", "finite bound",
                                            "empty window", "slow")), dict(reached)


def _slow_positions(k: dict, profile: str) -> int:
    """Window positions the oracle sends to its exact path (a 0xFF byte or a span past SPAN_FAST)."""
    window = np.arange(k["slots"].shape[1])[None, :] < np.minimum(k["lens"], k["slots"].shape[1])[:, None]
    _, e8m0 = layouts.get("sglang-page68").gather(k["table"], slots=np.where(window, k["slots"], -1).reshape(-1),
                                                  page_size=k["page_size"])
    e = e8m0.astype(np.int64)[window.reshape(-1)]
    return int(((e == 0xFF).any(axis=1) | (e.max(axis=1) - e.min(axis=1) > osg.SPAN_FAST)).sum())


def test_small_chunks_several_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 64 positions and tensor passes of a few requests: host patches land at
    positions and requests away from 0."""
    monkeypatch.setattr(osg, "CELLS_PER_CHUNK", 1 << 9)
    monkeypatch.setattr(osg, "CELLS_PER_PASS", 1 << 12)
    counts: Counter = Counter()
    seed = 9200
    rng = rng_of(seed)
    B, L, H = 6, 200, 16
    k = dict(lc.sglang_decode_case(seed, B, L, H, spread=12).kwargs)
    k["lens"] = np.array([200, 0, 137, 64, 65, 199])
    k["q"] = k["q"].copy()
    k["q"][4, 3, 77] = 0x7FC5  # a NaN in request 4: all its positions on the exact path
    tab = k["table"].copy()
    lay = layouts.get("sglang-page68")
    packed, e8m0 = lay.gather(tab, page_size=64)
    hit = rng.random(e8m0.shape) < 0.02
    e8m0[hit] = 0xFF
    lay.scatter(tab, packed, e8m0, page_size=64)
    k["table"] = tab
    grid = option_grid()[::2]  # every qk_accum, head order and bound model once
    assert {o["bound_model"] for o in grid} == set(QK_MODELS) and {o["head_order"] for o in grid} == set(HEAD_ORDERS)
    for opts in grid:
        check_decode(k, "cpu", f"small chunks seed {seed} {opts}", counts, **opts)
    assert counts["calls"] == len(grid) and counts["emulated"] == len(grid) * B * L


def test_degenerate_shapes() -> None:
    """No requests, no positions, heads whose window is empty: the same empty answers."""
    counts: Counter = Counter()
    k = lc.sglang_decode_case(9400, 2, 16, 16).kwargs
    cases = {
        "no requests": dict(k, q=k["q"][:0], weights=k["weights"][:0], slots=k["slots"][:0], lens=k["lens"][:0]),
        "no positions": dict(k, slots=k["slots"][:, :0]),
        "empty windows": dict(k, lens=np.zeros(2, np.int64)),
        "one position": dict(k, slots=k["slots"][:, :1], lens=np.array([1, 5])),
    }
    for name, case in cases.items():
        check_decode(case, "cpu", f"degenerate seed 9400 {name}", counts)
        check_plain_decode(case, "cpu", f"degenerate seed 9400 {name}", counts)
    assert counts["calls"] == len(cases) and counts["emulated"] == 0 + 0 + 2 * 16 + 2 * 1
    print(f"\n{dict(counts)} identical")


# ---- errors ------------------------------------------------------------------------------------


def _bad_calls() -> list[tuple[str, str, dict, dict]]:
    """(label, op, decode or paged kwargs, options): calls the scorer refuses."""
    _, k, args = paged_case(1, "sglang-rne")
    k = dict(k)
    q, w, req, req_table, lens, table, page_size, L, ratio = args
    paged = dict(q=q, weights=w, req=req, req_table=req_table, lens=lens, table=table, page_size=page_size,
                 capacity=L, ratio=ratio)
    bad_slots = k["slots"].copy()
    bad_slots[1, 0] = 10**6
    return [
        ("qk_accum", "decode", k, dict(qk_accum="fp32-groups")),
        ("head_order", "decode", k, dict(head_order="tree")),
        ("bound_model", "scored", k, dict(bound_model="exact")),
        ("emulate", "scored", k, dict(emulate=1)),
        ("profile", "decode", k, dict(profile="no-such-profile")),
        ("q shape", "decode", dict(k, q=k["q"][:, :, :64]), {}),
        ("q dtype", "decode", dict(k, q=k["q"].astype(np.float32)), {}),
        ("weights shape", "scored", dict(k, weights=k["weights"][:, :-1]), {}),
        ("weights dtype", "decode", dict(k, weights=k["weights"].astype(np.int16)), {}),
        ("slots ndim", "decode", dict(k, slots=k["slots"][0]), {}),
        ("slots dtype", "decode", dict(k, slots=k["slots"].astype(np.float32)), {}),
        ("slot outside the table", "scored", dict(k, slots=bad_slots), {}),
        ("lens shape", "decode", dict(k, lens=k["lens"][:-1]), {}),
        ("page_size", "decode", dict(k, page_size=0), {}),
        ("table width", "decode", dict(k, page_size=16), {}),
        ("table dtype", "decode", dict(k, table=k["table"].view(np.int16)), {}),
        ("paged req", "paged", dict(paged, req=np.array([0, 1, 9])), {}),
        ("paged req_table width", "paged", dict(paged, req_table=req_table[:, :10]), {}),
        ("paged ratio", "paged_scored", dict(paged, ratio=0), {}),
        ("paged unknown option", "paged", paged, dict(bogus=1)),
        ("paged scored unknown option", "paged_scored", paged, dict(bogus=1)),
    ]


OPS = {
    "decode": osg.fp4_index_logits_decode,
    "scored": osg.fp4_index_logits_decode_scored,
    "paged": osg.fp4_index_logits_paged,
    "paged_scored": osg.fp4_index_logits_paged_scored,
}


@pytest.mark.parametrize("label, op, kwargs, options", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_bad_calls_raise_the_same_error(label: str, op: str, kwargs: dict, options: dict) -> None:
    fn = OPS[op]
    with pytest.raises((TypeError, ValueError)) as want:
        fn(**kwargs, **options)
    with pytest.raises(want.type) as got:
        fn(**{n: to_torch(a, "cpu") for n, a in kwargs.items()}, **options)
    assert str(got.value) == str(want.value), label


def test_tensors_on_one_device() -> None:
    """A NumPy array among q, weights and table is refused, and so is a tensor on another
    device; the integer arguments may stay on the host (their values plan the passes)."""
    k = lc.sglang_decode_case(1, 1, 8, 16).kwargs
    args = {n: to_torch(a, "cpu") for n, a in k.items()}
    with pytest.raises(TypeError, match="table must be a torch tensor, got ndarray"):
        osg.fp4_index_logits_decode(**dict(args, table=k["table"]))
    with pytest.raises(ValueError, match=r"weights must be on the device of q \(cpu\), got meta"):
        osg.fp4_index_logits_decode(**dict(args, weights=args["weights"].to("meta")))
    counts: Counter = Counter()
    host_ints = dict(args, slots=k["slots"], lens=k["lens"])
    want = osg.fp4_index_logits_decode_scored(**k)
    same_scored(want, on_device(osg.fp4_index_logits_decode_scored(**host_ints), "cpu", "host slots"), "host slots",
                counts)
    assert counts["calls"] == 1


def test_the_device_reference_is_the_oracle_itself() -> None:
    """The gate's device reference has no separate counterpart for these: it runs the oracle."""
    k = lc.sglang_decode_case(2, 2, 16, 16).kwargs
    want = osg.fp4_index_logits_decode_scored(**k)
    got = reference.on_device(osg.fp4_index_logits_decode_scored, "cpu")(**k)
    for field in FIELDS:
        assert np.array_equal(np.ascontiguousarray(getattr(want, field)).view(np.uint8),
                              np.ascontiguousarray(getattr(got, field)).view(np.uint8)), field


# ---- GPU ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_conformance_configs() -> None:
    counts = run_conformance_profiles(GPU) + run_conformance_options(GPU)
    assert counts["calls"] > 0 and counts["bound"] > 0
    print(f"\n{dict(counts)} identical on {GPU}")


@pytest.mark.gpu
def test_gpu_special_values() -> None:
    counts = run_specials(GPU, range(9100, 9124))
    assert counts["cases"] == 24
    print(f"\n{dict(counts)} identical on {GPU}")


@pytest.mark.gpu
def test_gpu_production_size() -> None:
    """16 requests x 4096 positions x 64 heads, every field against NumPy; then 64 x 2^16 x 64
    on the card, three requests of it against NumPy on the host (requests are independent)."""
    counts: Counter = Counter()
    seed = 9300
    k = lc.sglang_decode_case(seed, 16, 4096, 64).kwargs
    k = dict(k, lens=np.full(16, 4096))
    for opts in (dict(), dict(qk_accum="two-dots", head_order="sequential", bound_model="fp32-groups")):
        check_decode(k, GPU, f"production seed {seed} b16_L4096_h64 {opts}", counts, **opts)
    assert counts["emulated"] == 2 * 16 * 4096
    seed = 9301
    big = dict(lc.sglang_decode_case(seed, 64, 1 << 16, 64).kwargs)
    big["lens"] = np.full(64, 1 << 16)
    torch.cuda.reset_peak_memory_stats()
    got = osg.fp4_index_logits_decode_scored(**{n: to_torch(a, GPU) for n, a in big.items()})
    peak = torch.cuda.max_memory_allocated() / 2**30
    for b in (0, 31, 63):
        part = dict(big, q=big["q"][b:b + 1], weights=big["weights"][b:b + 1], slots=big["slots"][b:b + 1],
                    lens=big["lens"][b:b + 1])
        want = osg.fp4_index_logits_decode_scored(**part)
        for field in FIELDS:
            counts[f"2^16 {field}"] += same_bytes(getattr(want, field), getattr(got, field)[b:b + 1],
                                                  f"production seed {seed} b64_L65536_h64 request {b} {field}")
    assert counts["2^16 bound"] == 3 << 16
    print(f"\n{dict(counts)} identical on {GPU}; the 2^16 call's peak device memory {peak:.1f} GiB")
