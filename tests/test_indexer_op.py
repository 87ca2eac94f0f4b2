"""The oracle of ``indexer_qk_rope_quant_and_cache`` (SPEC section 6).

* the float32 building blocks (FMA, rsqrt) against exact rational arithmetic, random and
  adversarial;
* the whole op against an independent scalar model (one value at a time, numpy float32
  scalars, Fractions for FMA and rsqrt, the slow ``exact`` codecs), FP4 and FP8, both pairings;
* the fast bf16 path against the general path, bit for bit;
* host rejections: message, and no output byte touched;
* slot and position rules, untouched bytes, idempotence, fresh buffers, input conventions;
* the front-end envelope: every member is recognised, a tampered byte is not;
* properties (Hypothesis): the E2M1 bound against the bf16 front end, poison, idempotence.

Every random input comes from ``numpy.random.Generator(PCG64(seed))``; failures name the seed.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxgate.conformance.judge import match_variants
from mxgate.oracle import exact, layouts, ops, profiles
from mxgate.oracle.formats.bf16 import bf16_bits
from mxgate.oracle.layouts import POISON, UNWRITTEN, ZERO_PAD
from mxgate.inputs import indexer as indexer_cases
from mxgate.inputs.samples import bf16_random
from mxgate.oracle.ops import frontend
from mxgate.oracle.ops import indexer as indexer_module
from mxgate.oracle.ops.f32math import fma32, rsqrt32
from mxgate.inputs.indexer import IndexerConfig, copy_case, make_case

OP = ops.indexer_qk_rope_quant_and_cache
OUTPUTS = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def f32_of_bits(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def bits_of(x: np.float32) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def outputs_of(args) -> dict[str, np.ndarray]:
    """The output arrays of an argument dict or an IndexerOutputs (None ones left out)."""
    found = args._asdict() if hasattr(args, "_asdict") else args
    return {k: found[k] for k in OUTPUTS if found.get(k) is not None}


def assert_same_bytes(a: dict, b: dict, note: str) -> None:
    for name in a:
        x = np.ascontiguousarray(a[name]).view(np.uint8)
        y = np.ascontiguousarray(b[name]).view(np.uint8)
        assert x.shape == y.shape, f"{note}: {name} shape"
        if not np.array_equal(x, y):
            where = tuple(int(i) for i in np.argwhere(x != y)[0])
            raise AssertionError(f"{note}: {name} differs first at byte {where}")


# =============================================================================================
# float32 building blocks
# =============================================================================================


def exact_fma(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """Reference FMA: the exact value rounded once; IEEE signs of zero."""
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    product = Fraction(float(a)) * Fraction(float(b))
    total = product + Fraction(float(c))
    if total == 0:
        product_negative = (np.signbit(a) != np.signbit(b)) if product == 0 else product < 0
        negative = product == 0 and c == 0 and product_negative and bool(np.signbit(c))
        return np.float32(-0.0 if negative else 0.0)
    return f32_of_bits(exact.fraction_to_f32_bits(total))


def exact_rsqrt(x: np.float32) -> np.float32:
    """Reference 1/sqrt: the float32 y whose midpoints with its neighbours bracket 1/sqrt(x)."""
    y = np.float32(1.0 / math.sqrt(float(x)))
    xf = Fraction(float(x))
    for _ in range(4):
        lo = Fraction(float(np.nextafter(y, np.float32(0))))
        hi = Fraction(float(np.nextafter(y, np.float32(np.inf))))
        yf = Fraction(float(y))
        if ((yf + lo) / 2) ** 2 * xf > 1:  # 1/sqrt(x) below the lower midpoint
            y = np.nextafter(y, np.float32(0))
        elif ((yf + hi) / 2) ** 2 * xf < 1:
            y = np.nextafter(y, np.float32(np.inf))
        else:
            return y
    raise AssertionError(f"no convergence for {x!r}")


def test_fma32_random_against_fractions() -> None:
    seed = 11
    rng = rng_of(seed)
    n = 3000
    exps = rng.integers(-60, 60, size=(3, n))
    a, b, c = (rng.standard_normal((3, n)) * 2.0**exps).astype(np.float32)
    c[: n // 3] = -(a[: n // 3].astype(np.float64) * b[: n // 3]).astype(np.float32)  # heavy cancellation
    got = fma32(a, b, c)
    for i in range(n):
        want = exact_fma(a[i], b[i], c[i])
        assert bits_of(got[i]) == bits_of(want), f"seed {seed}: fma({a[i]!r}, {b[i]!r}, {c[i]!r})"


def test_fma32_adversarial_double_rounding() -> None:
    """a*b is exactly a float32 midpoint and c is far below it: float64 then float32 rounding
    would land on the midpoint and tie to even; the single rounding must follow c's sign."""
    seed = 12
    rng = rng_of(seed)
    i = rng.integers(1, 2**11, size=500)
    j = rng.integers(1, 2**11, size=500)
    a = (1.0 + i * 2.0**-12).astype(np.float32)
    b = (1.0 + j * 2.0**-12).astype(np.float32)
    c = (np.where(rng.random(500) < 0.5, -1.0, 1.0) * 2.0 ** rng.integers(-90, -40, size=500)).astype(np.float32)
    got = fma32(a, b, c)
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    differs = 0
    for k in range(500):
        want = exact_fma(a[k], b[k], c[k])
        assert bits_of(got[k]) == bits_of(want), f"seed {seed}: fma({a[k]!r}, {b[k]!r}, {c[k]!r})"
        differs += bits_of(naive[k]) != bits_of(want)
    assert differs > 0, "the adversarial set must contain double-rounding traps"
    # subnormal results and the overflow edge
    tiny = np.float32(2.0**-75)
    assert bits_of(fma32(tiny, tiny, np.float32(2.0**-149))) == bits_of(exact_fma(tiny, tiny, np.float32(2.0**-149)))
    big = np.float32(2.0**127)
    assert np.isinf(fma32(big, np.float32(4), np.float32(0)))
    assert fma32(big, np.float32(4), -np.float32(np.finfo(np.float32).max)) == exact_fma(
        big, np.float32(4), -np.float32(np.finfo(np.float32).max))


def test_fma32_special_values() -> None:
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    assert np.isnan(fma32(inf, np.float32(0), np.float32(1)))
    assert np.isnan(fma32(nan, np.float32(1), np.float32(1)))
    assert fma32(inf, np.float32(2), np.float32(1)) == inf
    assert np.isnan(fma32(inf, np.float32(1), -inf))
    assert np.signbit(fma32(np.float32(-0.0), np.float32(1), np.float32(-0.0)))
    assert not np.signbit(fma32(np.float32(1), np.float32(1), np.float32(-1)))


def test_rsqrt32_correctly_rounded() -> None:
    seed = 13
    rng = rng_of(seed)
    mant = rng.random(3000) + 1.0
    x = (mant * 2.0 ** rng.integers(-149, 127, size=3000)).astype(np.float32)
    x = x[np.isfinite(x) & (x > 0)]
    x = np.concatenate([x, np.float32([2.0**-149, 2.0**-126, 4.0, 0.25, 2.0**126, np.finfo(np.float32).max,
                                        np.nextafter(np.float32(1), np.float32(2)), np.nextafter(np.float32(4), 0)])])
    got = rsqrt32(x)
    for xi, gi in zip(x, got):
        assert bits_of(gi) == bits_of(exact_rsqrt(xi)), f"seed {seed}: rsqrt({xi!r})"
    special = rsqrt32(np.float32([0.0, np.inf, -1.0, np.nan]))
    assert special[0] == np.inf and special[1] == 0 and np.isnan(special[2]) and np.isnan(special[3])


# =============================================================================================
# an independent scalar model of the op
# =============================================================================================


def bf16_round(x: np.float32) -> np.float32:
    return f32_of_bits(exact.round_bf16(bits_of(x)) << 16)


def ln_tree(values: list[np.float32]) -> np.float32:
    while len(values) > 1:
        values = [np.float32(values[i] + values[i + 1]) for i in range(0, len(values), 2)]
    return values[0]


def rope_scalar(x: list[np.float32], cos_row, sin_row, is_neox: bool, fma: bool) -> list[np.float32]:
    out = list(x)
    for d in range(64):
        if is_neox:
            i, lead = d % 32, d < 32
            partner = x[d + 32] if lead else x[d - 32]
        else:
            i, lead = d // 2, d % 2 == 0
            partner = x[d + 1] if lead else x[d - 1]
        c, s = np.float32(cos_row[i]), np.float32(sin_row[i])
        ps = np.float32(partner * s)
        other = -ps if lead else ps
        out[d] = exact_fma(x[d], c, other) if fma else np.float32(np.float32(x[d] * c) + other)
    return out


def k_front_scalar(k_row, w, b, eps, cos_row, sin_row, is_neox, variant) -> list[np.float32]:
    x = [np.float32(v) for v in k_row]
    mean = np.float32(ln_tree(x) / np.float32(128))
    c = [np.float32(v - mean) for v in x]
    var = np.float32(np.float32(ln_tree([np.float32(v * v) for v in c]) / np.float32(128)) + eps)
    inv = exact_rsqrt(var)
    if variant.rsqrt == "down":
        inv = np.nextafter(inv, np.float32(0))
    elif variant.rsqrt == "up":
        inv = np.nextafter(inv, np.float32(np.inf))
    n = []
    for d in range(128):
        scaled = np.float32(c[d] * inv)
        v = exact_fma(scaled, w[d], b[d]) if variant.fma else np.float32(np.float32(scaled * w[d]) + b[d])
        n.append(bf16_round(v))
    rotated = rope_scalar(n, cos_row, sin_row, is_neox, variant.fma)
    return [bf16_round(v) for v in rotated[:64]] + n[64:]


def q_front_scalar(q_row, cos_row, sin_row, is_neox, fma) -> list[np.float32]:
    x = [np.float32(v) for v in q_row]
    rotated = rope_scalar(x, cos_row, sin_row, is_neox, fma)
    return [bf16_round(v) for v in rotated[:64]] + x[64:]


def fp8_scalar(values, *, q_side: bool, profile, ue8m0: bool) -> tuple[list[int], np.float32]:
    variant = profile.fp8_variant
    fp8_max = np.float32(448.0 if variant == "fn" else 240.0)
    amax = max(abs(float(v)) for v in values)
    if q_side:
        s = np.float32(max(np.float32(amax), np.float32(1e-10)) * (np.float32(1) / fp8_max))
    else:
        s = np.float32(max(np.float32(amax), np.float32(1e-4)) / fp8_max)
    if ue8m0:
        s = f32_of_bits(exact.ue8m0_round(bits_of(s), profile.ue8m0_rounding))
    inv = np.float32(np.float32(1) / s)
    codes = [exact.encode_e4m3(bits_of(np.float32(v * inv)), variant, profile.fp8_overflow) for v in values]
    return codes, s


def scalar_model(args: dict, profile, variant, heads: list[int]) -> dict:
    """Logical outputs per token (None where not written): q rows, q scales, weights, K rows;
    Q for the listed heads only (the slow codecs take a while per row)."""
    fp4 = args.get("q_scale_out") is not None
    as_f32 = lambda a: (np.asarray(a).view(np.uint16).astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    q, k, w = as_f32(args["q"]), as_f32(args["k"]), as_f32(args["weights"])
    cos, sin = as_f32(args["cos_cache"]), as_f32(args["sin_cache"])
    slots, positions = args["slot_mapping"], args["positions"]
    t_count = min(len(k), len(slots))
    max_pos = cos.shape[0]
    eps = np.float32(args["epsilon"])
    ws = np.float32(args["weights_scale"])
    allq, neox = args["compute_all_q_rope"], args["is_neox"]
    ue8m0 = args["scale_fmt"] == "ue8m0"
    result: dict[str, dict] = {"q": {}, "k": {}}
    for t in range(t_count):
        pos = int(positions[t])
        if slots[t] < 0:
            pos = min(max(pos, 0), max_pos - 1)
        if slots[t] >= 0 or allq:
            for h in heads:
                vals = q_front_scalar(q[t, h], cos[pos], sin[pos], neox, variant.fma)
                if fp4:
                    packed, scales = exact.quantize_mx_row([bits_of(v) for v in vals], profile.name)
                    wout = int(np.asarray(args["weights"]).view(np.uint16)[t, h])
                    result["q"][(t, h)] = (bytes(packed), bytes(scales), wout)
                else:
                    codes, s = fp8_scalar(vals, q_side=True, profile=profile, ue8m0=ue8m0)
                    wout = bits_of(np.float32(np.float32(w[t, h] * s) * ws))
                    result["q"][(t, h)] = (bytes(codes), wout)
        if slots[t] >= 0:
            vals = k_front_scalar(k[t], args["norm_weight"], args["norm_bias"], eps, cos[pos], sin[pos], neox, variant)
            if fp4:
                packed, scales = exact.quantize_mx_row([bits_of(v) for v in vals], profile.name)
                result["k"][t] = (bytes(packed), bytes(scales))
            else:
                codes, s = fp8_scalar(vals, q_side=False, profile=profile, ue8m0=ue8m0)
                result["k"][t] = (bytes(codes), bits_of(s))
    return result


def check_against_model(args: dict, out, profile, variant, note: str) -> None:
    fp4 = out.q_scale_out is not None
    h_count = args["q"].shape[1]
    heads = sorted({0, h_count // 2 + 1, h_count - 1} & set(range(h_count))) if fp4 else list(range(h_count))
    model = scalar_model(args, profile, variant, heads)
    slots = args["slot_mapping"]
    t_count = min(len(args["k"]), len(slots))
    if fp4:
        (q_packed,) = layouts.get("aiter-fp4-q").gather(out.q_out[:t_count])
        (q_scales,) = layouts.get("aiter-fp4-q-scale").gather(out.q_scale_out[:t_count], num_heads=h_count)
    for t in range(t_count):
        for h in heads:
            want = model["q"].get((t, h))
            if fp4:
                weight = int(np.asarray(out.weights_out).view(np.uint16)[t, h])
                got = (bytes(q_packed[t, h]), bytes(q_scales[t, h]), weight)
            else:
                got = (bytes(out.q_out[t, h]), bits_of(out.weights_out[t, h]))
            if want is None:
                assert np.all(np.asarray(out.q_out[t, h]) == POISON), f"{note}: q_out of padded token {t} written"
            else:
                assert got == want, f"{note}: Q token {t} head {h}"
    k_tokens = np.flatnonzero(slots[:t_count] >= 0)
    if fp4:
        (kp,) = layouts.get("aiter-fp4-kv").gather(out.kv_cache, slots=slots[k_tokens])
        (ks,) = layouts.get("aiter-fp4-kv-scale").gather(out.kv_cache_scale, slots=slots[k_tokens])
        got_k = {int(t): (bytes(kp[i]), bytes(ks[i])) for i, t in enumerate(k_tokens)}
    else:
        name = "aiter-fp8-kv-preshuffle" if args["preshuffle"] else "aiter-fp8-kv"
        data, scale = layouts.get(name).gather(out.kv_cache, slots=slots[k_tokens])
        got_k = {int(t): (bytes(data[i]), bits_of(scale[i])) for i, t in enumerate(k_tokens)}
    assert got_k == model["k"], f"{note}: K rows differ"


MODEL_CASES = [
    (IndexerConfig("fp4", 5, 16, True, False), "gfx950"),
    (IndexerConfig("fp4", 4, 16, False, True), "gfx950"),
    (IndexerConfig("fp4", 3, 32, True, True), "threshold"),
    (IndexerConfig("fp8", 5, 3, True, False, "ue8m0", False, 16), "gfx950"),
    (IndexerConfig("fp8", 4, 2, False, True, None, True, 16), "gfx950"),
    (IndexerConfig("fp8", 4, 2, True, True, "ue8m0", False, 16), "aiter-gfx942"),
    (IndexerConfig("fp8", 3, 2, False, False, "ue8m0", True, 32), "cuda-satfinite"),
]


@pytest.mark.parametrize("config, profile", MODEL_CASES, ids=[f"{c.id}-{p}" for c, p in MODEL_CASES])
def test_op_matches_scalar_model(config: IndexerConfig, profile: str) -> None:
    args = make_case(config, padded_fraction=0.3)
    out = OP(**copy_case(args), profile=profile)
    variant = frontend.default_variant(profile)
    check_against_model(args, out, profiles.get(profile), variant, f"{config.id} seed {config.seed}")


@pytest.mark.parametrize("variant", frontend.VARIANT_NAMES)
def test_every_variant_matches_scalar_model(variant: str) -> None:
    config = IndexerConfig("fp8", 6, 1, True, False, None, False, 16)
    args = make_case(config, seed=21, padded_fraction=0.0)
    out = OP(**copy_case(args), variant=variant)
    check_against_model(args, out, profiles.get("gfx950"), frontend.get_variant(variant), f"{variant} seed 21")


# =============================================================================================
# the front end
# =============================================================================================


def test_variants_and_default() -> None:
    assert len(set(frontend.VARIANT_NAMES)) == 6
    assert frontend.default_variant("gfx950").name == "rsqrt-rn+fma"
    no_fma = dataclasses.replace(profiles.get("gfx950"), name="gfx950-no-fma", fma_contraction=False)
    assert frontend.default_variant(no_fma).name == "rsqrt-rn+mul-add"
    assert frontend.envelope(no_fma)[0].name == "rsqrt-rn+mul-add"
    with pytest.raises(ValueError, match="variant must be one of"):
        frontend.get_variant("rsqrt-fast")


def test_tree_sum_is_the_natural_pairwise_tree() -> None:
    seed = 31
    rng = rng_of(seed)
    x = (rng.standard_normal((200, 128)) * 10.0 ** rng.integers(-3, 4, size=(200, 128))).astype(np.float32)
    got = frontend.tree_sum(x)
    sequential_differs = 0
    for r in range(200):
        row = [np.float32(v) for v in x[r]]
        assert bits_of(got[r]) == bits_of(ln_tree(row)), f"seed {seed}: row {r}"
        acc = np.float32(0)
        for v in row:
            acc = np.float32(acc + v)
        sequential_differs += bits_of(acc) != bits_of(got[r])
    assert sequential_differs > 0, "the order matters on these rows"


def test_rounding_points_matter() -> None:
    """BUGS 13: skipping the bf16 rounding after RoPE changes the quantized Q bytes."""
    config = IndexerConfig("fp8", 16, 8, True, True, None)
    args = make_case(config, seed=32)
    out = OP(**copy_case(args))
    raw = args["q"]
    q32 = frontend.to_f32(raw, "bf16")
    cos = frontend.to_f32(args["cos_cache"][args["positions"].clip(0, indexer_cases.MAX_POS - 1)], "bf16")
    sin = frontend.to_f32(args["sin_cache"][args["positions"].clip(0, indexer_cases.MAX_POS - 1)], "bf16")
    unrounded = q32.copy()
    unrounded[..., :64] = frontend.rope(q32, cos[:, None], sin[:, None], True, True, True)
    from mxgate.oracle.ops import quant

    s = quant.fp8_scale(quant.fmax_amax(unrounded), arithmetic="reciprocal", floor=1e-10,
                        profile=profiles.get("gfx950"), use_ue8m0=False)
    skipped = quant.fp8_encode(unrounded, s, profiles.get("gfx950"))
    assert not np.array_equal(skipped, out.q_out), "seed 32: the rounding step must show"


# =============================================================================================
# fast path == general path
# =============================================================================================


def _plant(args: dict, rng: np.random.Generator) -> None:
    """Zero rows, E2M1 midpoints in dims 64..127, tiny and huge values, an Inf (rarely)."""
    q = args["q"]
    t, h, _ = q.shape
    mids = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0])
    e = rng.integers(-10, 10)
    planted = (rng.choice(mids, size=(t, h, 64)) * np.float32(2.0**e)
               * np.where(rng.random((t, h, 64)) < 0.5, -1, 1)).astype(np.float32)
    q[:, :, 64:] = np.where(rng.random((t, h, 64)) < 0.5, bf16_bits(planted), q[:, :, 64:])
    q[rng.random((t, h)) < 0.1] = 0
    if rng.random() < 0.3:
        q[rng.integers(t), rng.integers(h), rng.integers(128)] = rng.choice([0x0001, 0x8001, 0x7F7F, 0x7F80])
    args["k"][rng.random(args["k"].shape[0]) < 0.1] = 0


@pytest.mark.parametrize("seed", range(6))
def test_fast_path_equals_general_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = rng_of(100 + seed)
    mode = "fp4"
    config = IndexerConfig(mode, int(rng.integers(1, 40)), int(rng.choice([16, 32, 48])),
                           bool(rng.integers(2)), bool(rng.integers(2)))
    args = make_case(config, seed=100 + seed)
    if seed % 2:
        _plant(args, rng)
    from mxgate.oracle.ops import fastq

    taken = []
    original = fastq.q_fp4_chunk

    def counting(*a, **k):
        done = original(*a, **k)
        taken.append(done is not None)
        return done

    monkeypatch.setattr(fastq, "q_fp4_chunk", counting)
    for variant in ("rsqrt-rn+fma", "rsqrt-rn+mul-add"):
        fast = OP(**copy_case(args), variant=variant)
        with monkeypatch.context() as patch:
            patch.setattr(indexer_module, "_FAST_PATH", False)
            general = OP(**copy_case(args), variant=variant)
        assert_same_bytes(outputs_of(fast), outputs_of(general), f"seed {100 + seed} {config.id} {variant}")
    assert any(taken), f"seed {100 + seed}: the fast path never ran"


# =============================================================================================
# host validation
# =============================================================================================


def _fp4_args(seed: int = 41, tokens: int = 6, heads: int = 16) -> dict:
    return make_case(IndexerConfig("fp4", tokens, heads, True, False), seed=seed)


def _fp8_args(seed: int = 42, block: int = 16, preshuffle: bool = False) -> dict:
    return make_case(IndexerConfig("fp8", 6, 2, True, False, "ue8m0", preshuffle, block), seed=seed)


def _set(key, value):
    return lambda a: a.__setitem__(key, value)


REJECTIONS = [
    ("fp4-one-scale", _fp4_args, lambda a: a.__setitem__("kv_cache_scale", None), ValueError,
     "fp4 output needs both q_scale_out and kv_cache_scale"),
    ("head-dim", _fp8_args, lambda a: a.__setitem__("k", a["k"][:, :64].copy()), ValueError,
     "indexer fused qk cache only supports head_dim=128"),
    ("rope-dim", _fp8_args, lambda a: (a.__setitem__("cos_cache", a["cos_cache"][:, :16].copy()),
                                       a.__setitem__("sin_cache", a["sin_cache"][:, :16].copy())), ValueError,
     "indexer fused qk cache only supports rope_dim=64"),
    ("fp8-quant-block", _fp8_args, _set("quant_block_size", 64), ValueError,
     "indexer fused qk cache only supports quant_block_size == head_dim"),
    ("fp4-quant-block", _fp4_args, _set("quant_block_size", 128), ValueError,
     "fp4 indexer fused qk cache only supports quant_block_size == 32"),
    ("fp4-scale-fmt", _fp4_args, _set("scale_fmt", None), ValueError, 'fp4 output requires scale_fmt="ue8m0", got None'),
    ("fp4-scale-fmt-str", _fp4_args, _set("scale_fmt", "fp32"), ValueError, 'fp4 output requires scale_fmt="ue8m0", got fp32'),
    ("fp4-heads", lambda: _fp8_to_fp4_heads(24), lambda a: None, ValueError,
     "fp4 output requires n_heads to be a multiple of 16, got 24"),
    ("fp4-kv-block", _fp4_args, lambda a: a.__setitem__("kv_cache", np.full((2, 1, 4, 32, 16), POISON, np.uint8)),
     ValueError, r"fp4 output only supports kv_block_size=64 \(kv_cache.size\(3\)\), got 32"),
    ("fp4-preshuffle", _fp4_args, _set("preshuffle", True), ValueError,
     "fp4 output always writes the pa_mqa_logits_fp4 preshuffled layout; the fp8-only preshuffle flag must be left unset"),
    ("allq-rows", _fp4_args, lambda a: (a.__setitem__("compute_all_q_rope", True),
                                        a.__setitem__("k", a["k"][:5].copy())), ValueError,
     "compute_all_q_rope requires q to have exactly num_tokens rows"),
    ("fp8-preshuffle-block", lambda: _fp8_args(block=8), _set("preshuffle", True), ValueError,
     "preshuffle requires cache_block_size to be a multiple of 16, got 8"),
    ("q-dtype", _fp8_args, lambda a: a.__setitem__("q", a["q"].astype(np.int32)), TypeError, "q must have dtype bfloat16"),
    ("k-dtype", _fp8_args, lambda a: a.__setitem__("k", a["k"].view(np.float16)), TypeError,
     r"k must have the same dtype as q \(bfloat16\), got float16"),
    ("slots-dtype", _fp8_args, lambda a: a.__setitem__("slot_mapping", a["slot_mapping"].astype(np.int32)), TypeError,
     "slot_mapping must have dtype int64, got int32"),
    ("positions-dtype", _fp8_args, lambda a: a.__setitem__("positions", a["positions"].astype(np.int32)), TypeError,
     "positions must have dtype int64, got int32"),
    ("norm-dtype", _fp8_args, lambda a: a.__setitem__("norm_weight", a["norm_weight"].astype(np.float64)), TypeError,
     "norm_weight must have dtype float32, got float64"),
    ("norm-shape", _fp8_args, lambda a: a.__setitem__("norm_bias", a["norm_bias"][:64].copy()), ValueError,
     r"norm_bias must have shape \[128\]"),
    ("q-out-dtype", _fp8_args, lambda a: a.__setitem__("q_out", a["q_out"].astype(np.float32)), TypeError,
     "q_out must have a 1-byte dtype"),
    ("q-out-shape", _fp4_args, lambda a: a.__setitem__("q_out", np.full((6, 16, 128), POISON, np.uint8)), ValueError,
     r"q_out must have shape \[num_tokens, n_heads=16, 64\]"),
    ("weights-out-dtype-fp8", _fp8_args, lambda a: a.__setitem__("weights_out", np.zeros((6, 2), np.uint16)), TypeError,
     "weights_out must have dtype float32, got uint16"),
    ("weights-out-dtype-fp4", _fp4_args, lambda a: a.__setitem__("weights_out", np.zeros((6, 16), np.float32)), TypeError,
     r"weights_out must have the same dtype as q \(bfloat16\), got float32"),
    ("weights-rows", _fp8_args, lambda a: a.__setitem__("weights", a["weights"][:3].copy()), ValueError,
     "weights must have shape .* with at least 6 rows"),
    ("fp8-cache-stride", _fp8_args, lambda a: a.__setitem__("kv_cache", np.full((2, 16, 144), POISON, np.uint8)),
     ValueError, r"kv_cache must have shape \[num_blocks, cache_block_size, 132\]"),
    ("fp4-q-scale-shape", _fp4_args, lambda a: a.__setitem__("q_scale_out", np.full((6, 1, 4, 16, 1), POISON, np.uint8)),
     ValueError, r"q_scale_out must have shape \[num_tokens, 1, 4, 16, 4\]"),
    ("fp4-kv-scale-shape", _fp4_args, lambda a: a.__setitem__("kv_cache_scale", np.full((9, 1, 4, 64), POISON, np.uint8)),
     ValueError, "kv_cache_scale must have shape"),
    ("not-contiguous", _fp8_args, lambda a: a.__setitem__("q_out", np.full((6, 2, 256), POISON, np.uint8)[:, :, ::2]),
     ValueError, "q_out must be C-contiguous and writeable"),
    ("repeated-slot", _fp8_args, lambda a: a["slot_mapping"].__setitem__(slice(0, 2), 3), ValueError,
     "slot_mapping must not repeat a slot >= 0"),
    ("slot-range", _fp8_args, lambda a: a["slot_mapping"].__setitem__(0, 10_000), ValueError,
     r"slot_mapping must be < 32 \(kv_cache holds 2 blocks of 16\), got 10000 at token 0"),
    ("position-range", _fp8_args, lambda a: (a["slot_mapping"].__setitem__(0, 5), a["positions"].__setitem__(0, -1)),
     ValueError, r"positions must lie in \[0, 4096\) for tokens with slot_mapping >= 0"),
    ("epsilon-type", _fp8_args, _set("epsilon", "1e-6"), TypeError, "epsilon must be a real number, got str"),
    ("flag-type", _fp8_args, _set("is_neox", 1), TypeError, "is_neox must be a bool, got int"),
    ("scale-fmt-type", _fp8_args, _set("scale_fmt", 8), TypeError, "scale_fmt must be a str or None, got int"),
    ("mode", _fp8_args, lambda a: a.__setitem__("mode", "fp6"), ValueError, "mode must be one of"),
]


def _fp8_to_fp4_heads(heads: int) -> dict:
    args = make_case(IndexerConfig("fp4", 4, 16, True, False), seed=43)
    rng = rng_of(43)
    args["q"] = bf16_random(rng, (4, heads, 128))
    args["weights"] = bf16_random(rng, (4, heads))
    return args


@pytest.mark.parametrize("name, build, mutate, error, message", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_host_rejection_touches_nothing(name, build, mutate, error, message) -> None:
    args = build()
    mutate(args)
    before = {k: v.copy() for k, v in outputs_of(args).items()}
    with pytest.raises(error, match=message):
        OP(**args)
    after = outputs_of(args)
    assert before.keys() == after.keys()
    assert_same_bytes(before, after, f"{name}: an output byte changed before the rejection")


def test_rejection_messages_are_the_spec_messages() -> None:
    """The SPEC section 6 messages appear verbatim among the rejection tests."""
    spec = [
        "indexer fused qk cache only supports head_dim=128",
        "indexer fused qk cache only supports rope_dim=64",
        "indexer fused qk cache only supports quant_block_size == head_dim",
        "fp4 output needs both q_scale_out and kv_cache_scale",
        "fp4 indexer fused qk cache only supports quant_block_size == 32",
        'fp4 output requires scale_fmt="ue8m0", got',
        "fp4 output requires n_heads to be a multiple of 16, got",
        "fp4 output only supports kv_block_size=64",
        "fp4 output always writes the pa_mqa_logits_fp4 preshuffled layout; the fp8-only preshuffle flag must be left unset",
        "compute_all_q_rope requires q to have exactly num_tokens rows",
        "preshuffle requires cache_block_size to be a multiple of 16, got",
    ]
    tested = " ".join(r[4].replace("\\", "") for r in REJECTIONS)
    for message in spec:
        assert message in tested, message


# =============================================================================================
# slots, positions, untouched bytes, fresh buffers, conventions
# =============================================================================================


def test_padded_tokens_and_compute_all_q_rope() -> None:
    for allq in (False, True):
        config = IndexerConfig("fp4", 12, 16, True, allq)
        args = make_case(config, seed=51, padded_fraction=0.5)
        out = OP(**copy_case(args))
        slots = args["slot_mapping"]
        padded = slots < 0
        assert padded.any() and (~padded).any()
        q_untouched = np.all(out.q_out == POISON, axis=(1, 2))
        w_untouched = np.all(np.asarray(out.weights_out).view(np.uint8).reshape(12, -1) == POISON, axis=1)
        s_untouched = np.all(out.q_scale_out.reshape(12, -1) == POISON, axis=1)
        expect = padded if not allq else np.zeros(12, bool)
        for arr in (q_untouched, w_untouched, s_untouched):
            assert np.array_equal(arr, expect), f"seed 51 allq={allq}"
        kv_regions = layouts.get("aiter-fp4-kv").regions(slots=slots, num_blocks=out.kv_cache.shape[0])
        assert np.all(out.kv_cache[kv_regions == UNWRITTEN] == POISON)
        ks_regions = layouts.get("aiter-fp4-kv-scale").regions(slots=slots, num_blocks=out.kv_cache.shape[0])
        assert np.all(out.kv_cache_scale[ks_regions == UNWRITTEN] == POISON)


def test_padded_positions_are_clamped_others_are_not() -> None:
    config = IndexerConfig("fp8", 4, 2, False, True, "ue8m0", False, 16)
    args = make_case(config, seed=52, padded_fraction=0.0)
    args["slot_mapping"][1] = -1
    for wild_position, clamped_position in ((-7, 0), (indexer_cases.MAX_POS + 3, indexer_cases.MAX_POS - 1)):
        wild, clamped = copy_case(args), copy_case(args)
        wild["positions"][1] = wild_position
        clamped["positions"][1] = clamped_position
        assert_same_bytes(outputs_of(OP(**wild)), outputs_of(OP(**clamped)), f"seed 52 clamp {wild_position}")
    args["positions"][0] = indexer_cases.MAX_POS  # token 0 has a slot: its position is not clamped
    with pytest.raises(ValueError, match="positions must lie in"):
        OP(**args)


def test_tokens_beyond_num_tokens_are_untouched() -> None:
    config = IndexerConfig("fp8", 8, 2, True, False, None, False, 16)
    args = make_case(config, seed=53, padded_fraction=0.0)
    args["k"] = args["k"][:5].copy()  # T = min(len(k), len(slot_mapping)) = 5
    out = OP(**copy_case(args))
    assert np.all(out.q_out[5:] == POISON)
    assert np.all(np.asarray(out.weights_out[5:]).view(np.uint8) == POISON)
    assert not np.any(np.all(out.q_out[:5] == POISON, axis=(1, 2)))
    layout = layouts.get("aiter-fp8-kv")
    regions = layout.regions(slots=args["slot_mapping"][:5], num_blocks=out.kv_cache.shape[0], block_size=16)
    assert np.all(out.kv_cache[regions == UNWRITTEN] == POISON)
    assert not np.all(out.kv_cache[regions != UNWRITTEN] == POISON)


def test_q_scale_padding_is_zero() -> None:
    """BUGS 21/22: QS_PAD heads are written 0 (not 127) for written tokens only."""
    for heads in (16, 32, 48, 80):
        args = make_case(IndexerConfig("fp4", 6, heads, True, False), seed=54, padded_fraction=0.3)
        out = OP(**copy_case(args))
        regions = layouts.get("aiter-fp4-q-scale").regions(slots=np.where(args["slot_mapping"] >= 0, 0, -1),
                                                           num_tokens=6, num_heads=heads)
        assert np.all(out.q_scale_out[regions == ZERO_PAD] == 0), f"heads {heads}"
        assert np.all(out.q_scale_out[regions == UNWRITTEN] == POISON), f"heads {heads}"
        if heads % 64:
            assert np.any(regions == ZERO_PAD)


def test_fresh_buffers_equal_in_place_results() -> None:
    for config in (IndexerConfig("fp4", 7, 32, False, True),
                   IndexerConfig("fp8", 7, 3, True, False, "ue8m0", True, 16)):
        args = make_case(config, seed=55)
        in_place = OP(**copy_case(args))
        fresh_args = {k: v for k, v in args.items() if k not in OUTPUTS}
        fresh_args.update(num_blocks=args["kv_cache"].shape[0], kv_block_size=config.block_size)
        if config.mode == "fp4":
            fresh_args["mode"] = "fp4"
        fresh = OP(**fresh_args, q_out=None, weights_out=None, kv_cache=None)
        assert fresh.weights_out.dtype == (np.uint16 if config.mode == "fp4" else np.float32)
        assert_same_bytes(outputs_of(in_place), outputs_of(fresh), f"{config.id} seed 55")


def test_in_place_returns_the_callers_arrays_and_is_idempotent() -> None:
    args = make_case(IndexerConfig("fp4", 9, 16, True, False), seed=56)
    out = OP(**args)
    assert out.q_out is args["q_out"] and out.kv_cache_scale is args["kv_cache_scale"]
    first = {k: v.copy() for k, v in outputs_of(args).items()}
    OP(**args)  # writing the same tokens again gives the same bytes
    assert_same_bytes(first, outputs_of(args), "seed 56 second write")


def test_bf16_conventions_and_other_scalar_types() -> None:
    config = IndexerConfig("fp4", 5, 16, True, True)
    args = make_case(config, seed=57)
    raw = OP(**copy_case(args))
    typed = copy_case(args)
    for name in ("q", "k", "weights", "cos_cache", "sin_cache"):
        typed[name] = typed[name].view(ml_dtypes.bfloat16)
    typed["weights_out"] = typed["weights_out"].view(ml_dtypes.bfloat16)
    typed_out = OP(**typed)
    assert typed_out.weights_out.dtype == ml_dtypes.bfloat16
    assert_same_bytes(outputs_of(raw), outputs_of(typed_out), "seed 57 ml_dtypes vs uint16")
    for dtype in (np.float16, np.float32):
        other = copy_case(args)
        for name in ("q", "k", "weights", "cos_cache", "sin_cache"):
            other[name] = frontend.to_f32(args[name], "bf16").astype(dtype)
        other["weights_out"] = np.zeros(args["weights_out"].shape, dtype)
        out = OP(**other)
        assert np.array_equal(out.weights_out, other["weights"][:5])  # a plain copy in q's dtype
        assert out.q_out.shape == raw.q_out.shape


def test_weights_out_rules() -> None:
    fp4 = make_case(IndexerConfig("fp4", 6, 16, True, True), seed=58)
    out = OP(**copy_case(fp4))
    assert np.array_equal(out.weights_out, fp4["weights"])  # neither q_scale nor weights_scale folded
    fp8 = make_case(IndexerConfig("fp8", 6, 4, True, True, None), seed=58)
    out8 = OP(**copy_case(fp8))
    q32, _ = ops.frontend_values(**fp8)
    s = np.maximum(np.max(np.abs(q32), axis=-1), np.float32(1e-10)) * (np.float32(1) / np.float32(448))
    w = frontend.to_f32(fp8["weights"], "bf16")
    assert np.array_equal(out8.weights_out, (w * s.astype(np.float32)) * np.float32(fp8["weights_scale"]))


def test_fp8_variants_and_ue8m0_rules() -> None:
    args = make_case(IndexerConfig("fp8", 16, 4, True, True, "ue8m0"), seed=59, padded_fraction=0.0)
    fn = OP(**copy_case(args), profile="gfx950")
    fnuz = OP(**copy_case(args), profile="aiter-gfx942")
    assert not np.array_equal(fn.q_out, fnuz.q_out)
    _, scale = layouts.get("aiter-fp8-kv").gather(fn.kv_cache, slots=args["slot_mapping"])
    mant = scale.view(np.uint32) & np.uint32(0x7FFFFF)
    assert np.all(mant == 0), "ue8m0 scales are powers of two (BUGS 29)"
    q32, k32 = ops.frontend_values(**args)
    for out, variant, top in ((fn, "fn", 448.0), (fnuz, "fnuz", 240.0)):
        from mxgate.oracle import decode_e4m3

        decoded = decode_e4m3(out.q_out, variant)
        assert np.all(np.isfinite(decoded)) and np.all(np.abs(decoded) <= top)
    cont = OP(**(copy_case(args) | {"scale_fmt": "anything-else"}))
    none = OP(**(copy_case(args) | {"scale_fmt": None}))
    assert_same_bytes(outputs_of(cont), outputs_of(none), "seed 59: any other scale_fmt is continuous")


# =============================================================================================
# the envelope
# =============================================================================================


@pytest.mark.parametrize("mode", ["fp8", "fp4"])
def test_envelope_names_the_member(mode: str) -> None:
    """The probe rows: row 0 moves only with rsqrt one ulp above, row 1 only one ulp below,
    row 2 only without contraction; each member's output is recognised row by row."""
    args = indexer_cases.envelope_probe_case(mode)
    singled_out = {"rsqrt-up+fma": 0, "rsqrt-down+fma": 1, "rsqrt-rn+mul-add": 2}
    for name in frontend.VARIANT_NAMES:
        actual = OP(**copy_case(args), variant=name)
        match = match_variants(actual, **args)
        if name == "rsqrt-rn+fma":
            assert match.status == "exact", match.reason
            continue
        assert match.status == "acceptable", f"{mode} {name}: {match.reason}"
        assert set(match.q_variant.reshape(-1)) == {"rsqrt-rn+fma"}
        if name in singled_out:
            row = singled_out[name]
            assert match.k_variant[row] == name, f"{mode} {name}: {list(match.k_variant)}"
            assert f"K {name}" in match.counts and name in match.reason
        for token, member in enumerate(match.k_variant):  # each named member reproduces the row
            again = OP(**copy_case(args), variant=member)
            slot = args["slot_mapping"][token:token + 1]
            layout = layouts.get("aiter-fp4-kv" if mode == "fp4" else "aiter-fp8-kv")
            assert np.array_equal(layout.gather(again.kv_cache, slots=slot)[0],
                                  layout.gather(actual.kv_cache, slots=slot)[0])


def test_envelope_rejects_tampered_bytes() -> None:
    args = make_case(IndexerConfig("fp4", 8, 16, True, False), seed=61, padded_fraction=0.3)
    out = OP(**copy_case(args))
    bad = out.kv_cache.copy()
    slot = int(args["slot_mapping"][args["slot_mapping"] >= 0][0])
    (row,) = layouts.get("aiter-fp4-kv").gather(bad, slots=[slot])
    row[0, 3] ^= 0x10
    layouts.get("aiter-fp4-kv").scatter(bad, row, slots=[slot])
    match = match_variants(out._replace(kv_cache=bad), **args)
    assert match.status == "fail" and "match no admissible front end" in match.reason
    poisoned = out.q_out.copy()
    padded = int(np.flatnonzero(args["slot_mapping"] < 0)[0])
    poisoned[padded, 0, 0] = 0  # a byte the contract must not write
    match = match_variants(out._replace(q_out=poisoned), **args)
    assert match.status == "fail" and match.mismatch[0] == "q_out"


# =============================================================================================
# properties
# =============================================================================================


HALF_GAP = np.float32([0.25, 0.25, 0.5, 0.5, 1.0])  # half the E2M1 spacing below 1, 2, 4, 6 (units of S)


def _e2m1_bound_holds(values: np.ndarray, packed: np.ndarray, scales: np.ndarray) -> None:
    """|dequant - x| <= S * half the local E2M1 spacing (S/4 below 2S, S/2 below 4S, S up to
    6S); beyond 6S the code is +-6S exactly (saturation)."""
    if values.size == 0:
        return
    deq = ops_dequant(packed, scales).astype(np.float64)
    x = values.astype(np.float64)
    s = np.repeat(np.exp2(scales.astype(np.float64) - 127), 32, axis=-1)
    ratio = np.abs(x) / s
    half_gap = np.where(ratio < 2, 0.25, np.where(ratio < 4, 0.5, 1.0))
    inside = ratio <= 6
    assert np.all(np.abs(deq - x)[inside] <= (half_gap * s)[inside])
    assert np.all(np.abs(deq)[~inside] == (6 * s)[~inside])


def ops_dequant(packed: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Dequantize in float64: 4 * 2^126 is a valid E2M1 x e8m0 value but overflows float32."""
    from mxgate.oracle import decode_e2m1, unpack_nibbles

    codes = decode_e2m1(unpack_nibbles(packed)).astype(np.float64)
    return codes * np.repeat(np.exp2(scales.astype(np.float64) - 127), 32, axis=-1)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), tokens=st.integers(1, 16), heads=st.sampled_from([16, 48, 128]),
       neox=st.booleans(), allq=st.booleans(), plant=st.booleans())
def test_fp4_properties(seed, tokens, heads, neox, allq, plant) -> None:
    config = IndexerConfig("fp4", tokens, heads, neox, allq)
    args = make_case(config, seed=seed)
    if plant:
        _plant(args, rng_of(seed))
    out = OP(**copy_case(args))
    note = f"seed {seed} {config.id}"
    q32, k32 = ops.frontend_values(**args)
    slots = args["slot_mapping"]
    rows = np.arange(tokens) if allq else np.flatnonzero(slots >= 0)
    (qp,) = layouts.get("aiter-fp4-q").gather(out.q_out)
    (qs,) = layouts.get("aiter-fp4-q-scale").gather(out.q_scale_out, num_heads=heads)
    finite_q = np.all(np.isfinite(q32[rows]), axis=-1)
    try:
        _e2m1_bound_holds(q32[rows][finite_q], qp[rows][finite_q], qs[rows][finite_q])
        kr = np.flatnonzero(slots >= 0)
        (kp,) = layouts.get("aiter-fp4-kv").gather(out.kv_cache, slots=slots[kr])
        (ks,) = layouts.get("aiter-fp4-kv-scale").gather(out.kv_cache_scale, slots=slots[kr])
        finite_k = np.all(np.isfinite(k32[kr]), axis=-1)
        _e2m1_bound_holds(k32[kr][finite_k], kp[finite_k], ks[finite_k])
    except AssertionError as error:
        raise AssertionError(f"{note}: E2M1 bound") from error
    regions = layouts.get("aiter-fp4-kv").regions(slots=slots, num_blocks=out.kv_cache.shape[0])
    assert np.all(out.kv_cache[regions == UNWRITTEN] == POISON), note
    again = copy_case(outputs_of(out))
    OP(**(copy_case(args) | again))
    assert_same_bytes(outputs_of(out), again, f"{note}: idempotence")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), tokens=st.integers(1, 20), heads=st.integers(1, 8),
       fmt=st.sampled_from(["ue8m0", None]), pre=st.booleans(), block=st.sampled_from([16, 32, 64]),
       profile=st.sampled_from(["gfx950", "aiter-gfx942"]))
def test_fp8_properties(seed, tokens, heads, fmt, pre, block, profile) -> None:
    config = IndexerConfig("fp8", tokens, heads, bool(seed % 2), bool(seed % 3 == 0), fmt, pre, block)
    args = make_case(config, seed=seed)
    out = OP(**copy_case(args), profile=profile)
    note = f"seed {seed} {config.id} {profile}"
    slots = args["slot_mapping"]
    name = "aiter-fp8-kv-preshuffle" if pre else "aiter-fp8-kv"
    regions = layouts.get(name).regions(slots=slots, num_blocks=out.kv_cache.shape[0], block_size=block)
    assert np.all(out.kv_cache[regions == UNWRITTEN] == POISON), note
    q32, _ = ops.frontend_values(**args)
    from mxgate.oracle import decode_e4m3

    variant = profiles.get(profile).fp8_variant
    rows = np.arange(tokens) if config.compute_all_q_rope else np.flatnonzero(slots >= 0)
    deq = decode_e4m3(out.q_out[rows], variant)
    assert np.all(np.isfinite(deq)) and np.all(np.abs(deq) <= (448.0 if variant == "fn" else 240.0)), note
    assert np.all(out.q_out[np.setdiff1d(np.arange(tokens), rows)] == POISON), note
    again = copy_case(outputs_of(out))
    OP(**(copy_case(args) | again), profile=profile)
    assert_same_bytes(outputs_of(out), again, f"{note}: idempotence")


# =============================================================================================
# the conformance judge catches broken backends
# =============================================================================================


class _Broken:
    """A backend whose op runs the oracle and then damages its outputs in one known way."""

    def __init__(self, damage) -> None:
        self.damage = damage

    def op(self, name: str):
        assert name == "indexer_qk_rope_quant_and_cache"
        damage = self.damage

        class _Op:
            profile = "gfx950"

            @staticmethod
            def run(**kwargs):
                out = OP(**kwargs)
                damage(out, kwargs)
                return out

        return _Op()


def _swap_nibbles(out, args) -> None:
    out.kv_cache[...] = (out.kv_cache >> 4) | (out.kv_cache << 4)


def _pad_127(out, args) -> None:
    regions = layouts.get("aiter-fp4-q-scale").regions(num_tokens=out.q_scale_out.shape[0],
                                                       num_heads=args["q"].shape[1])
    out.q_scale_out[regions == ZERO_PAD] = 127


def _write_padded(out, args) -> None:
    out.q_out[np.flatnonzero(args["slot_mapping"] < 0)] = 0


def _scale_off_by_one(out, args) -> None:
    written = args["slot_mapping"][args["slot_mapping"] >= 0]
    (scales,) = layouts.get("aiter-fp4-kv-scale").gather(out.kv_cache_scale, slots=written)
    layouts.get("aiter-fp4-kv-scale").scatter(out.kv_cache_scale, scales + np.uint8(1), slots=written)


@pytest.mark.parametrize("damage", [_swap_nibbles, _pad_127, _write_padded, _scale_off_by_one],
                         ids=["nibble-swap", "scale-pad-127", "padded-token-written", "scale-off-by-one"])
def test_conformance_judge_fails_broken_backends(damage) -> None:
    from mxgate.conformance.test_indexer_conformance import judge

    args = make_case(IndexerConfig("fp4", 8, 32, True, False), seed=71, padded_fraction=0.3)
    assert judge(_Broken(lambda out, a: None), args, "gfx950").verdict == "exact"
    verdict = judge(_Broken(damage), args, "gfx950")
    assert verdict.verdict == "fail", f"seed 71 {damage.__name__}: {verdict.reason}"


@pytest.mark.parametrize("profile", ["threshold", "sglang-rne", "gfx950"])
def test_fast_path_equals_general_path_with_a_nan_in_a_group(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Profiles whose max reductions skip NaN (amax_nan 'ignore') must not take the bit-pattern
    # group max of the fast path, where a NaN's bits win (seed 20261205: 162 q_out bytes differed).
    config = IndexerConfig("fp4", 11, 16, True, False)
    args = make_case(config, seed=20261205)
    args["q"].view(np.uint16)[3, 5, 7] = 0x7FC1  # one NaN in one group of one head
    for variant in ("rsqrt-rn+fma", "rsqrt-down+mul-add"):
        fast = OP(**copy_case(args), variant=variant, profile=profile)
        with monkeypatch.context() as patch:
            patch.setattr(indexer_module, "_FAST_PATH", False)
            general = OP(**copy_case(args), variant=variant, profile=profile)
        assert_same_bytes(outputs_of(fast), outputs_of(general), f"seed 20261205 {config.id} {variant} {profile}")
