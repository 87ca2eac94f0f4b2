"""One function, two namespaces: the oracle's codecs, scales and quantize_mx on NumPy arrays and
on torch tensors give the same bytes; the twin's own device pieces (fused Triton quantizer, its
scale tables, device sweeps) give the oracle's.

CPU part (CI): every rounding table moved to a tensor's device, a strided sample of float32
patterns plus every boundary class and every bf16 pattern through each encoder under every
profile, all 256 e8m0 / e4m3 codes, Hypothesis blocks through quantize_mx. The fused Triton
kernel runs under the CPU interpreter in a child process (Triton fixes interpreter vs compiled
at its first import).

GPU part (``--device cuda``, marked ``gpu``): every float32 input through every profile's E2M1
encoder and every E4M3 rule on cuda tensors, compared with the NumPy oracle's results on the
same inputs, every non-negative amax pattern through the e8m0 policies, the compiled fused
kernel. Each comparison counts what it compared; a mismatch message names the seed, profile and
first differing inputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from mxgate.oracle.bits import unique_patterns  # noqa: E402
from mxgate import op_table, oracle  # noqa: E402
from mxgate import twin  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.oracle.formats import e2m1 as oe2m1  # noqa: E402
from mxgate.oracle.formats import e4m3 as oe4m3  # noqa: E402
from mxgate.inputs import indexer as cases  # noqa: E402
from mxgate.op_table import OpName  # noqa: E402
from mxgate.oracle import scales as oscales  # noqa: E402
from mxgate.oracle.xp import bits, table_on  # noqa: E402
from mxgate.twin import scale_table  # noqa: E402
from mxgate.inputs.bits import NAN_PAYLOADS, bf16_patterns, f32  # noqa: E402

from namespaces import (assert_same, boundary_patterns, element_inputs, profiles_by_behaviour, rng_of,  # noqa: E402
                        strided_patterns, tt)
SEED = 20261201
PROFILES = profiles.names()
SATURATE = oe4m3.SATURATE_OF_OVERFLOW
E4M3_RULES = [(v, s) for v in ("fn", "fnuz") for s in (False, True, "satfinite")]
CHILD_FLAG = "MXGATE_TWIN_INTERPRETER_CHILD"


# ---- element codecs and tables ---------------------------------------------------------------


def test_rounding_tables_arrive_intact_on_the_device() -> None:
    """The tables the encoders use on tensors are the oracle's NumPy tables moved once to the
    tensor's device: every entry (every class of sign, exponent, kept bits and sticky bit)."""
    like = torch.zeros(1)
    for name in PROFILES:
        assert_same(oe2m1.table(name), table_on(oe2m1.table(name), like), f"e2m1 table {name}")
        assert table_on(oe2m1.table(name), like) is table_on(oe2m1.table(name), like)  # moved once
    for variant, saturate in E4M3_RULES:
        assert_same(oe4m3.table(variant, saturate), table_on(oe4m3.table(variant, saturate), like),
                    f"e4m3 table {variant} {saturate}")


def test_encode_e2m1_every_profile() -> None:
    u = element_inputs(SEED)
    x = u.view(np.float32)
    assert u.size > (1 << 20) + 65536
    for name in PROFILES:
        assert_same(oracle.encode_e2m1(x, name), oracle.encode_e2m1(tt(x), name), f"seed {SEED} e2m1 {name}", x)


def test_encode_e2m1_with_every_scale_byte() -> None:
    """Every boundary class times every e8m0 byte, and random (pattern, byte) pairs."""
    rng = rng_of(SEED + 1)
    b = boundary_patterns()
    u = np.concatenate([np.repeat(b, 256), strided_patterns(1 << 17, SEED + 1)])
    s = np.concatenate([np.tile(np.arange(256, dtype=np.uint8), b.size),
                        rng.integers(0, 256, 1 << 17, dtype=np.uint8)])
    x = u.view(np.float32)
    for name in PROFILES:
        with np.errstate(over="ignore", invalid="ignore"):
            expected = oracle.encode_e2m1(x, name, scale=s)
        assert_same(expected, oracle.encode_e2m1(tt(x), name, scale=tt(s)), f"seed {SEED + 1} e2m1+scale {name}", x)


def test_encode_e4m3_every_rule() -> None:
    x = element_inputs(SEED + 2).view(np.float32)
    for variant, saturate in E4M3_RULES:
        assert_same(oracle.encode_e4m3(x, variant, saturate), oracle.encode_e4m3(tt(x), variant, saturate),
                    f"seed {SEED + 2} e4m3 {variant} {saturate}", x)


def test_decoders_every_code() -> None:
    codes16 = np.arange(16, dtype=np.uint8)
    assert_same(oracle.decode_e2m1(codes16), oracle.decode_e2m1(tt(codes16)), "decode_e2m1")
    codes = np.arange(256, dtype=np.uint8)
    for variant in ("fn", "fnuz"):
        assert_same(oracle.decode_e4m3(codes, variant), oracle.decode_e4m3(tt(codes), variant), f"decode_e4m3 {variant}")
    for name in PROFILES:
        assert_same(oracle.decode_e8m0(codes, name), oracle.decode_e8m0(tt(codes), name), f"decode_e8m0 {name}")
    pairs = np.arange(256, dtype=np.uint8).reshape(1, 256)
    assert_same(oracle.unpack_nibbles(pairs), oracle.unpack_nibbles(tt(pairs)), "unpack_nibbles")
    assert_same(oracle.pack_nibbles(oracle.unpack_nibbles(pairs)), oracle.pack_nibbles(oracle.unpack_nibbles(tt(pairs))), "pack")


def test_bf16_rounding_every_profile() -> None:
    rng = rng_of(SEED + 3)
    u = element_inputs(SEED + 3)
    # patterns at every bf16 rounding boundary: low halves 0x7FFF, 0x8000, 0x8001
    top = rng.integers(0, 1 << 16, 1 << 14, dtype=np.uint32) << np.uint32(16)
    u = np.concatenate([u, top | 0x7FFF, top | 0x8000, top | 0x8001])
    x = u.view(np.float32)
    for name in PROFILES:
        assert_same(oracle.bf16_bits(x, name), oracle.bf16_bits(tt(x), name), f"seed {SEED + 3} bf16 {name}", x)
        assert_same(oracle.round_bf16(x, name), oracle.round_bf16(tt(x), name), f"round_bf16 {name}", x)
    every = np.arange(1 << 16, dtype=np.uint16)
    assert_same(oracle.bf16_to_f32(every), oracle.bf16_to_f32(tt(every)), "bf16_to_f32 every pattern")


def test_float16_conversions_are_numpys() -> None:
    from mxgate.oracle.ops import f32math as tf32  # the indexer's float16 steps, on both namespaces
    x = element_inputs(SEED + 4).view(np.float32)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    assert_same(expected.view(np.uint16).astype(np.int32), tf32.f32_to_f16_bits(tt(x)), "f32 -> f16", x)
    every = np.arange(1 << 16, dtype=np.uint16)
    assert_same(every.view(np.float16).astype(np.float32), tf32.f16_bits_to_f32(tt(every.astype(np.int32))), "f16 -> f32")


# ---- scales ----------------------------------------------------------------------------------


def amax_inputs(seed: int) -> np.ndarray:
    """Non-negative patterns: a strided sample, the boundaries, Inf and NaN patterns."""
    u = np.concatenate([strided_patterns(1 << 20, seed), boundary_patterns()]) & np.uint32(0x7FFFFFFF)
    return unique_patterns(np.concatenate([u, np.array([0, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF], np.uint32)]))


def test_e8m0_scale_every_profile() -> None:
    a = amax_inputs(SEED + 5).view(np.float32)
    for name in PROFILES:
        with np.errstate(over="ignore", invalid="ignore"):
            expected = oracle.e8m0_scale(a, name)
        assert_same(expected, oracle.e8m0_scale(tt(a), name), f"seed {SEED + 5} e8m0_scale {name}", a)


def test_token_scales_and_ue8m0_rounding() -> None:
    """The FP8 per-token scale under both arithmetics and floors (-0, NaN payloads among the
    amax), with and without ue8m0 rounding; ue8m0_round and ceil_log2f on every positive class."""
    a = amax_inputs(SEED + 13).view(np.float32)
    a = np.concatenate([a, f32([0x80000000, 0xFFC00001, 0x7F800001])])
    positive = a[(a.view(np.uint32) > 0) & (a.view(np.uint32) <= 0x7F800000)]
    with np.errstate(over="ignore", invalid="ignore"):
        for rounding in ("log2f", "bitwise"):
            assert_same(oscales.ue8m0_round(positive, rounding), oscales.ue8m0_round(tt(positive), rounding),
                        f"ue8m0_round {rounding}", positive)
        finite = positive[np.isfinite(positive)]
        assert_same(oscales.ceil_log2f(finite), oscales.ceil_log2f(tt(finite)), "ceil_log2f", finite)
        for arithmetic in ("reciprocal", "divide"):
            for floor in (0.0, profiles.AITER_AMAX_FLOOR):
                kw = dict(arithmetic=arithmetic, amax_floor=floor)
                assert_same(oscales.fp8_token_scale(a, 448.0, **kw), oscales.fp8_token_scale(tt(a), 448.0, **kw),
                            f"fp8_token_scale {arithmetic} floor {floor}", a)
                big = a[(a > 1e-30) & np.isfinite(a)]
                assert_same(oscales.fp8_token_scale(big, 448.0, scale_fmt="ue8m0", **kw),
                            oscales.fp8_token_scale(tt(big), 448.0, scale_fmt="ue8m0", **kw),
                            f"fp8_token_scale ue8m0 {arithmetic} floor {floor}", big)


def test_checks_on_tensors_are_the_oracles() -> None:
    """The same refusals, with the same messages, for tensors as for NumPy arrays."""
    calls = [
        lambda m: oracle.decode_e2m1(m(np.array([16], np.uint8))),
        lambda m: oracle.pack_nibbles(m(np.zeros(3, np.uint8))),
        lambda m: oracle.pack_nibbles(m(np.array([0, 17], np.uint8))),
        lambda m: oracle.unpack_nibbles(np.zeros((), np.uint8) if m is _same else torch.zeros((), dtype=torch.uint8)),
        lambda m: oracle.bf16_to_f32(m(np.zeros(2, np.int32))),
        lambda m: oracle.encode_e2m1(m(np.zeros((2, 4), np.float32)), scale=m(np.zeros((3, 1), np.uint8))),
        lambda m: oracle.encode_e4m3(m(np.zeros(2, np.float64))),
        lambda m: oracle.decode_e4m3(m(np.zeros(2, np.int8)), "fn"),
        lambda m: oracle.e8m0_scale(m(np.float32([-1.0]))),
        lambda m: oscales.ue8m0_round(m(np.float32([0.0]))),
        lambda m: oracle.dequantize_mx(m(np.zeros((2, 16), np.uint8)), m(np.zeros((2, 2), np.uint8))),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError)) as want:
            call(_same)
        with pytest.raises(type(want.value)) as got:
            call(tt)
        # a dtype is named as its library spells it (float64, torch.float64)
        assert str(got.value).replace("torch.", "") == str(want.value)


def _same(a: np.ndarray) -> np.ndarray:
    return a


def test_profiles_by_behaviour_skips_only_what_the_call_cannot_tell_apart() -> None:
    """The twin tests' per-profile loops run one profile per behaviour: a profile is skipped
    only when an earlier run's call read no field where the two differ."""
    def first_of_each(key) -> list[str]:
        firsts: dict = {}
        for name in PROFILES:
            firsts.setdefault(key(profiles.get(name)), name)
        return list(firsts.values())

    assert [n for n, _ in profiles_by_behaviour(lambda p: p.byte0)] == first_of_each(lambda p: p.byte0)
    # a branch reads a second field for some values only
    def branching(p):
        return (p.tie, p.zero_sign) if p.tie == "even" else p.tie

    ran = [n for n, _ in profiles_by_behaviour(branching)]
    assert ran == first_of_each(lambda p: (p.tie, p.zero_sign if p.tie == "even" else None))
    assert [r for _, r in profiles_by_behaviour(branching)] == [branching(profiles.get(n)) for n in ran]
    # a profile hashed (a cache key) reads every field: nothing is skipped
    assert [n for n, _ in profiles_by_behaviour(hash)] == PROFILES


def test_scale_step_table_matches_the_oracle() -> None:
    """The fused kernel's rules: bytes by bisection in the step table and by the binade table,
    at every start and its predecessor and on a strided sample."""
    base = amax_inputs(SEED + 6)
    for name in PROFILES:
        starts = scale_table.segments(name)[0].numpy()
        inside = starts[(starts > 0) & (starts < scale_table.DOMAIN)]
        u = unique_patterns(np.concatenate([base, inside.astype(np.uint32), (inside - 1).astype(np.uint32)]))
        with np.errstate(over="ignore", invalid="ignore"):
            expected = oracle.e8m0_scale(u.view(np.float32), name)
        assert_same(expected, scale_table.scale_from_table(tt(u), name), f"step table {name}", u)
        by_binade = scale_table.scale_from_binades(tt(u.view(np.int32)), name)
        assert by_binade is not None, f"{name}: a binade holds two steps (the kernel would bisect)"
        assert_same(expected, by_binade, f"binade table {name}", u)


# ---- quantize_mx / dequantize_mx -------------------------------------------------------------

_SPECIAL_ELEMENTS = [0x7FC00000, 0xFF800000, 0x7F800000, 0x00000001, 0x80000000, 0x7F7FFFFF, 0x7FA00001]


def _blocks(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """Blocks mixing roughly normal values over many binades, E2M1 midpoints times powers of
    two, random bit patterns and special values."""
    scale = np.float32(2.0) ** rng.integers(-140, 120, (rows, 1)).astype(np.float32)
    normal = (rng.standard_normal((rows, n)).astype(np.float32) * scale).astype(np.float32)
    mids = (rng.choice(np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]), (rows, n))
            * scale * np.float32(0.25)).astype(np.float32)
    bits = rng.integers(0, 1 << 32, (rows, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    pick = rng.integers(0, 4, (rows, 1))
    x = np.where(pick == 0, normal, np.where(pick == 1, mids, np.where(pick == 2, bits, normal)))
    special = rng.random((rows, n)) < 0.01
    x = np.where(special, f32(rng.choice(_SPECIAL_ELEMENTS, (rows, n))), x)
    return np.ascontiguousarray(x, dtype=np.float32)


def test_quantize_mx_large_every_profile() -> None:
    rng = rng_of(SEED + 7)
    x = _blocks(rng, 4096, 128)
    xb = f32(oracle.bf16_bits(x).astype(np.uint32) << np.uint32(16)).reshape(x.shape)
    for name in PROFILES:
        for label, data, tensor in (("f32", x, tt(x)), ("bf16", xb, tt(oracle.bf16_bits(x)).view(torch.bfloat16))):
            with np.errstate(over="ignore", invalid="ignore"):
                p, s = oracle.quantize_mx(data, name)
            tp, ts = oracle.quantize_mx(tensor, name)
            assert_same(p, tp, f"seed {SEED + 7} quantize_mx {label} {name} packed")
            assert_same(s, ts, f"seed {SEED + 7} quantize_mx {label} {name} e8m0")
            assert_same(oracle.dequantize_mx(p, s, name), oracle.dequantize_mx(tp, ts, name),
                        f"seed {SEED + 7} dequantize_mx {label} {name}")


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), group=st.sampled_from([2, 4, 8, 16, 32, 64]),
       groups=st.integers(1, 6), rows=st.integers(1, 5))
def test_quantize_mx_hypothesis_blocks(seed: int, group: int, groups: int, rows: int) -> None:
    x = _blocks(rng_of(seed), rows, group * groups)
    for name in PROFILES:
        with np.errstate(over="ignore", invalid="ignore"):
            p, s = oracle.quantize_mx(x, name, group)
        tp, ts = oracle.quantize_mx(tt(x), name, group)
        assert_same(p, tp, f"seed {seed} group {group} quantize_mx {name} packed", x)
        assert_same(s, ts, f"seed {seed} group {group} quantize_mx {name} e8m0", x)
        assert_same(oracle.dequantize_mx(p, s, name, group), oracle.dequantize_mx(tp, ts, name, group),
                    f"seed {seed} dequantize_mx {name}")


def test_dequantize_mx_every_byte_under_every_scale() -> None:
    packed = np.tile(np.arange(256, dtype=np.uint8), 256).reshape(-1, 1)
    scales = np.repeat(np.arange(256, dtype=np.uint8), 256).reshape(-1, 1)
    for name in PROFILES:
        with np.errstate(over="ignore", invalid="ignore"):
            expected = oracle.dequantize_mx(packed, scales, name, 2)
        assert_same(expected, oracle.dequantize_mx(tt(packed), tt(scales), name, 2), f"dequantize_mx {name}")


def test_quantize_mx_errors_are_the_oracles() -> None:
    with pytest.raises(ValueError) as want:
        oracle.quantize_mx(np.zeros(31, np.float32), "gfx950")
    with pytest.raises(ValueError) as got:
        twin.quantize_mx(torch.zeros(31), "gfx950")
    assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="^x must have dtype float32, bfloat16 or float16"):
        twin.quantize_mx(torch.zeros(32, dtype=torch.float64))
    with pytest.raises(ValueError, match="^profile must be one of"):
        twin.quantize_mx(torch.zeros(32), "no-such-profile")


# ---- the fused Triton kernel (interpreter in a child process, compiled on the GPU) -------------


def _fused_unavailable(device: str) -> str | None:
    from mxgate.twin import fused

    probe = torch.zeros(32, device=device)
    return fused.unavailable(probe, 32)


def _fused_check(device: str, rows: int, seed: int) -> int:
    from mxgate.twin import fused

    rng = rng_of(seed)
    x = _blocks(rng, rows, 64)
    compared = 0
    for name in PROFILES:
        with np.errstate(over="ignore", invalid="ignore"):
            p, s = oracle.quantize_mx(x, name)
            pb, sb = oracle.quantize_mx(f32(oracle.bf16_bits(x).astype(np.uint32) << np.uint32(16)).reshape(x.shape), name)
        tp, ts = fused.quantize_mx(tt(x, device), name)
        compared += assert_same(p, tp, f"seed {seed} fused f32 {name} packed", x)
        assert_same(s, ts, f"seed {seed} fused f32 {name} e8m0", x)
        bp, bs = fused.quantize_mx(tt(oracle.bf16_bits(x), device).view(torch.bfloat16), name)
        assert_same(pb, bp, f"seed {seed} fused bf16 {name} packed")
        assert_same(sb, bs, f"seed {seed} fused bf16 {name} e8m0")
        tp, ts = fused.quantize_mx(tt(x, device), name, bisect=True)
        assert_same(p, tp, f"seed {seed} fused f32 {name} packed, bisection", x)
        assert_same(s, ts, f"seed {seed} fused f32 {name} e8m0, bisection", x)
    return compared


# one profile per nan_scale rule and byte-0 divisor the kernel has
SCALING_PROFILES = ("gfx950", "ocp", "torchao-floor", "torchao-rceil")


def _exponents(byte: np.ndarray, name: str) -> np.ndarray:
    """The kernel's d (factor 2^d) per e8m0 byte under the profile (-128 stands for byte 255)."""
    from mxgate.twin import fused

    d0 = fused.BYTE0_EXPONENT[profiles.get(name).scale0_divisor]
    return np.where(byte == 255, -128, np.where(byte == 0, d0, 127 - byte.astype(np.int32))).astype(np.int32)


def _scale_bits_check(device: str, u: np.ndarray, note: str) -> None:
    """The kernel's integer x * 2^(127 - byte) against the oracle's scaled_by_e8m0 on NumPy,
    for every e8m0 byte, under every nan_scale rule and byte-0 divisor."""
    from mxgate.twin import fused

    byte = np.tile(np.arange(256, dtype=np.uint8), u.size)
    uu = np.repeat(u, 256)
    for name in SCALING_PROFILES:
        got = fused.scale_bits(tt(uu, device), tt(_exponents(byte, name), device), profiles.get(name).nan_scale)
        with np.errstate(over="ignore", invalid="ignore"):
            expected = oe2m1.scaled_by_e8m0(uu.view(np.float32), byte, name).view(np.uint32)
        assert_same(expected.astype(np.uint32).view(np.int32), got, f"{note} scale_bits {name}", uu)


def test_fused_under_the_interpreter() -> None:
    if os.environ.get(CHILD_FLAG) != "1":
        pytest.skip("runs in the interpreter child process (test_fused_interpreter_child)")
    reason = _fused_unavailable("cpu")
    if reason:
        pytest.fail(f"interpreter child cannot run the kernel: {reason}")
    _fused_check("cpu", 96, SEED + 8)
    rng = rng_of(SEED + 9)
    u = unique_patterns(np.concatenate([boundary_patterns()[::7], rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32),
                                  (np.arange(1, 40, dtype=np.uint32) * np.uint32(0x9E3779B1)) & np.uint32(0x807FFFFF)]))
    _scale_bits_check("cpu", u, f"seed {SEED + 9}")


def test_fused_interpreter_child(request: pytest.FixtureRequest) -> None:
    if os.environ.get(CHILD_FLAG) == "1":
        pytest.skip("this is the child")
    if request.config.getoption("--device") != "cpu":
        pytest.skip("the compiled kernel is compared on the device (test_gpu_fused_*)")
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_FLAG: "1"})
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           f"{__file__}::test_fused_under_the_interpreter"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout, done.stdout[-2000:]


def test_twin_dispatch_takes_the_reference_form_without_the_kernel() -> None:
    from mxgate.twin import quantize

    x = np.linspace(-7, 7, 128, dtype=np.float32).reshape(4, 32)
    p, s = oracle.quantize_mx(x.astype(np.float16), "gfx950")
    tp, ts = quantize.quantize_mx(tt(x).to(torch.float16), "gfx950")  # float16: the reference form
    assert_same(p, tp, "float16 input packed")
    assert_same(s, ts, "float16 input e8m0")
    with pytest.raises(RuntimeError, match="fused quantize_mx cannot run here"):
        quantize.quantize_mx(tt(x).to(torch.float16), "gfx950", fused=True)


# ---- sweep_device and import hygiene ---------------------------------------------------------


def test_sweep_device_counts_exactly() -> None:
    """Judging one profile's encoder under another: the count equals the table difference
    weighted by class sizes (even index: 1 pattern, odd index: 2^21 - 1), over the chunks run."""
    from mxgate.twin.sweep import sweep_device

    chunk_bits = 20
    chunks = [0x3F8, 0x7F8, 0x7FC, 0xFFF, 0x000]  # normals, the NaN range, the top, zero
    result = sweep_device(lambda x: oracle.encode_e2m1(x, "ml_dtypes"), "gfx950", "cpu", chunk_bits=chunk_bits, chunks=chunks)
    expected = 0
    for c in chunks:
        u = (np.arange(1 << chunk_bits, dtype=np.uint64) + (c << chunk_bits)).astype(np.uint32)
        expected += int(np.count_nonzero(oracle.encode_e2m1(u.view(np.float32), "gfx950")
                                         != oracle.encode_e2m1(u.view(np.float32), "ml_dtypes")))
    assert result.inputs == len(chunks) << chunk_bits
    assert result.mismatches == expected and expected > 0
    assert result.nan_mismatches == expected  # the two profiles differ only in their NaN rule
    assert result.examples and all(oracle.encode_e2m1(f32([b & 0xFFFFFFFF]), "gfx950")[0] == t for b, t, _ in result.examples)
    same = sweep_device(lambda x: torch.from_numpy(oracle.encode_e2m1(x.numpy(), "gfx950")), "gfx950", "cpu",
                        chunk_bits=chunk_bits, chunks=chunks)
    assert same.mismatches == 0 and same.inputs == result.inputs


def test_sweep_device_bf16_counts_exactly() -> None:
    """bf16.round judged on the device (the exhaustive tier's sweep on --device cuda): a NaN rule
    of another profile is counted on exactly the NaN inputs, and the example bytes are the
    oracle's and the backend's own bf16 bits."""
    from mxgate.twin.sweep import sweep_device

    chunk_bits = 20
    chunks = [0x3F8, 0x7F8, 0x7FC, 0xFFF, 0x000]
    other = lambda x: oracle.bf16_bits(x, "gfx950")  # noqa: E731 - canonical NaN 0x7FC0
    result = sweep_device(other, "torch-cpu", "cpu", fmt="bf16", chunk_bits=chunk_bits, chunks=chunks)
    expected = 0
    for c in chunks:
        x = (np.arange(1 << chunk_bits, dtype=np.uint64) + (c << chunk_bits)).astype(np.uint32).view(np.float32)
        expected += int(np.count_nonzero(oracle.bf16_bits(x, "gfx950") != oracle.bf16_bits(x, "torch-cpu")))
    assert result.inputs == len(chunks) << chunk_bits
    assert result.mismatches == expected == result.nan_mismatches and expected > 0
    for b, ours, theirs in result.examples:
        assert ours == int(oracle.bf16_bits(f32([b & 0xFFFFFFFF]), "torch-cpu")[0])
        assert theirs == int(oracle.bf16_bits(f32([b & 0xFFFFFFFF]), "gfx950")[0])
    same = sweep_device(lambda x: oracle.bf16_bits(x, "torch-cpu"), "torch-cpu", "cpu", fmt="bf16",
                        chunk_bits=chunk_bits, chunks=chunks)
    assert same.mismatches == 0 and same.inputs == result.inputs


def test_oracle_and_package_import_no_torch() -> None:
    # nor ml_dtypes (a peer, and half a second of every start-up): its dtypes are accepted by name
    # explain too: the gate imports it to explain a failing cell (its bf16 inputs are known by name)
    code = ("import sys, mxgate, mxgate.oracle, mxgate.oracle.ops, mxgate.oracle.layouts, mxgate.oracle.scorers, "
            "mxgate.explain, mxgate.explain.inputs, mxgate.explain.classify; "
            "assert not {'torch', 'triton', 'ml_dtypes'} & set(sys.modules), sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    code = "import sys, mxgate.twin.quantize; assert 'triton' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# =============================================================================================
# GPU: every float32 input, judged against the NumPy oracle on the host
# =============================================================================================

GPU_DEVICE = "cuda"
GPU_CHUNK_BITS = 28


def _chunk_indices(total_bits: int) -> range:
    """Every 2^GPU_CHUNK_BITS chunk of a 2^total_bits input space."""
    return range(1 << (total_bits - GPU_CHUNK_BITS))


def _host_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def _parallel(fn, n: int, parts: int):
    """fn(start, stop) over [0, n) on the host's cores (NumPy releases the GIL in its loops)."""
    bounds = [n * i // parts for i in range(parts + 1)]
    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(lambda i: fn(bounds[i], bounds[i + 1]), range(parts)))


@pytest.mark.gpu
def test_gpu_every_float32_through_every_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """All 2^32 inputs: every E2M1 and E4M3 encoder is the rounding lookup table[index(u)]
    (``oracle.rounding.lookup``). Run with an identity table, the lookup returns the index
    itself, so equal results on every input, chunk by chunk (2^28), mean the card computes each
    pattern's index as the host does, for both index widths; every profile's and rule's table
    reaches the card byte for byte, and the gather is exact, so every encoder's code on every
    input is the host's. A seeded sample then runs each encoder end to end on both."""
    from mxgate.oracle import rounding
    from mxgate.twin.sweep import patterns

    threads = _host_threads()
    monkeypatch.setenv("MXGATE_THREADS", str(threads))  # the oracle's own loops use every core
    count = 1 << GPU_CHUNK_BITS
    identities = {keep: np.arange(2 << keep, dtype=np.int16) for keep in (oe2m1.KEEP_BITS, oe4m3.KEEP_BITS)}
    for index in _chunk_indices(32):
        start = index << GPU_CHUNK_BITS
        x = np.empty(count, np.uint32)

        def fill(a: int, b: int) -> None:
            x[a:b] = (np.arange(a, b, dtype=np.uint64) + start).astype(np.uint32)

        _parallel(fill, count, threads)
        u = patterns(start, count, torch.device(GPU_DEVICE))
        for keep, identity in identities.items():
            got = rounding.lookup(u, table_on(identity, u), keep)
            want = torch.from_numpy(rounding.lookup(x, identity, keep)).to(GPU_DEVICE)
            if not torch.equal(got, want):
                bad = torch.nonzero(got != want).flatten()[:5].cpu().numpy()
                raise AssertionError(f"rounding index, {keep} kept bits: inputs {[hex(start + int(i)) for i in bad]}")
    tables = {f"e2m1 {name}": oe2m1.table(name) for name in PROFILES}
    tables.update({f"e4m3 {v} saturate={s}": oe4m3.table(v, s) for v, s in E4M3_RULES})
    for label, table in tables.items():
        assert table_on(table, u).cpu().numpy().tobytes() == table.tobytes(), f"{label}: the table on the card"
    rng = rng_of(SEED + 14)
    sample = np.concatenate([rng.integers(0, 1 << 32, 1 << 24, dtype=np.uint64).astype(np.uint32),
                             boundary_patterns()]).view(np.float32)
    xd = tt(sample.view(np.uint32), GPU_DEVICE).view(torch.float32)
    for name in PROFILES:
        assert_same(oracle.encode_e2m1(sample, name), oracle.encode_e2m1(xd, name), f"seed {SEED + 14} e2m1 {name}")
    for variant, saturate in E4M3_RULES:
        assert_same(oracle.encode_e4m3(sample, variant, saturate), oracle.encode_e4m3(xd, variant, saturate),
                    f"seed {SEED + 14} e4m3 {variant} {saturate}")


@pytest.mark.gpu
def test_gpu_every_amax_through_every_scale_policy() -> None:
    """All 2^31 non-negative patterns (+0 .. +Inf, NaN): the oracle's e8m0_scale on device tensors
    is the step function of its step and binade tables (built on the card, the fused kernel's
    rules) on every pattern; the NumPy oracle on the host gives the same bytes at every step's
    first pattern, the pattern before it and a seeded sample of 2^22 patterns. The host's
    e8m0_scale is non-decreasing in the pattern (scale_table's argument; the CPU tests check the
    tables the same way), so agreeing at every step is agreeing everywhere, without evaluating all
    2^31 patterns for each field set on the host.
    One profile per set of values of the fields the op table declares e8m0.scale reads."""
    from mxgate.twin.sweep import patterns

    count = 1 << GPU_CHUNK_BITS
    fields = op_table.spec(OpName.E8M0_SCALE).profile_fields
    sharing: dict[tuple, str] = {}
    for name in PROFILES:
        sharing.setdefault(tuple(getattr(profiles.get(name), f) for f in fields), name)
    sample = rng_of(SEED + 13).integers(0, 1 << 31, 1 << 22, dtype=np.uint64).astype(np.uint32)
    for name in sharing.values():
        for index in _chunk_indices(31):
            start = index << GPU_CHUNK_BITS
            u = patterns(start, count, torch.device(GPU_DEVICE))
            eager = oracle.e8m0_scale(u.view(torch.float32), name)
            by_binade = scale_table.scale_from_binades(u, name)
            assert by_binade is not None, f"{name}: a binade holds two steps (the kernel would bisect)"
            for label, got in (("step table", scale_table.scale_from_table(u, name)), ("binade table", by_binade)):
                if not torch.equal(got, eager):
                    bad = torch.nonzero(got != eager).flatten()[:5].cpu().numpy()
                    raise AssertionError(f"e8m0_scale on the card vs {label} {name}: amax patterns "
                                         f"{[hex(start + int(i)) for i in bad]}")
        starts = scale_table.segments(name, GPU_DEVICE)[0].cpu().numpy()
        inside = starts[(starts > 0) & (starts < scale_table.DOMAIN)]
        host = unique_patterns(np.concatenate([sample, inside.astype(np.uint32), (inside - 1).astype(np.uint32)]))
        with np.errstate(over="ignore", invalid="ignore"):
            want = oracle.e8m0_scale(host.view(np.float32), name)
        device_bytes = oracle.e8m0_scale(tt(host, GPU_DEVICE).view(torch.float32), name)
        assert_same(want, device_bytes, f"e8m0_scale {name} (seed {SEED + 13})", host)


@pytest.mark.gpu
def test_gpu_binade_table_is_the_step_table_on_every_amax() -> None:
    """The fused kernel's one-gather lookup against the step table (itself checked against the
    oracle on every pattern above), on all 2^31 non-negative patterns, for every profile."""
    from mxgate.twin.sweep import patterns

    count = 1 << GPU_CHUNK_BITS
    for name in PROFILES:
        for index in _chunk_indices(31):
            u = patterns(index << GPU_CHUNK_BITS, count, torch.device(GPU_DEVICE))
            by_binade = scale_table.scale_from_binades(u, name)
            assert by_binade is not None, f"{name}: a binade holds two steps (the kernel would bisect)"
            assert torch.equal(by_binade, scale_table.scale_from_table(u, name)), f"{name} chunk {index}"


@pytest.mark.gpu
def test_gpu_fused_quantize_compiled() -> None:
    reason = _fused_unavailable(GPU_DEVICE)
    if reason:
        pytest.skip(f"not supported here: {reason}")
    rows = 1 << 16
    assert _fused_check(GPU_DEVICE, rows, SEED + 11) == len(PROFILES) * rows * 32  # packed bytes compared
    from mxgate.twin import fused

    rng = rng_of(SEED + 12)
    x = tt(_blocks(rng, 1 << 18, 128), GPU_DEVICE)
    for name in PROFILES:
        ref_p, ref_s = oracle.quantize_mx(x, name)
        p, s = fused.quantize_mx(x, name)
        assert torch.equal(p, ref_p) and torch.equal(s, ref_s), f"seed {SEED + 12} fused vs the oracle on the device {name}"


@pytest.mark.gpu
def test_gpu_fused_scaling_every_float32() -> None:
    """The kernel's integer power-of-two scaling, every float32 input for bytes that move it into
    the subnormals, the top and across: against the oracle's float multiply on the device
    tensors, whose NaN-free results are IEEE (and a boundary sample against NumPy's)."""
    reason = _fused_unavailable(GPU_DEVICE)
    if reason:
        pytest.skip(f"not supported here: {reason}")
    from mxgate.twin import fused
    from mxgate.twin.sweep import patterns

    _scale_bits_check(GPU_DEVICE, boundary_patterns(), "boundaries")
    count = 1 << GPU_CHUNK_BITS
    for byte in (0, 1, 100, 126, 127, 128, 150, 200, 253, 254, 255):
        b8 = torch.full((count,), byte, dtype=torch.uint8, device=GPU_DEVICE)
        for index in _chunk_indices(32):
            u = patterns(index << GPU_CHUNK_BITS, count, torch.device(GPU_DEVICE))
            for name in SCALING_PROFILES:
                d = torch.full((count,), int(_exponents(np.array([byte]), name)[0]), dtype=torch.int32, device=GPU_DEVICE)
                got = fused.scale_bits(u, d, profiles.get(name).nan_scale)
                want = bits(oe2m1.scaled_by_e8m0(u.view(torch.float32), b8, name))
                assert torch.equal(got, want), f"byte {byte} chunk {index} {name}"


@pytest.mark.gpu
def test_gpu_sweep_device_counts_exactly() -> None:
    """All 2^32 inputs judged on the device: ml_dtypes' NaN rule under gfx950 differs on exactly
    the NaN classes where their tables differ (counted from the oracle's tables)."""
    from mxgate.twin.sweep import sweep_device

    a, b = oe2m1.table("gfx950"), oe2m1.table("ml_dtypes")
    differ = a != b
    expected = int(np.count_nonzero(differ[0::2])) + ((1 << 21) - 1) * int(np.count_nonzero(differ[1::2]))
    result = sweep_device(lambda x: oracle.encode_e2m1(x, "ml_dtypes"), "gfx950", GPU_DEVICE)
    print(result.summary())
    assert result.inputs == 1 << 32
    assert result.mismatches == expected == result.nan_mismatches
    same = sweep_device(lambda x: oracle.encode_e2m1(x, "gfx950"), "gfx950", GPU_DEVICE)
    print(same.summary())
    assert same.mismatches == 0


def test_benchmark_runs_and_reports_ratios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device benchmark (mxgate bench --device) at a tiny size on the CPU: every row present,
    ratios positive."""
    import json

    from mxgate.tools import bench_device as bench

    monkeypatch.setenv("MXGATE_THREADS", "1")  # the bench would otherwise set it for this process
    out = tmp_path / "bench.json"
    assert bench.main(["--device", "cpu", "--elements", "65536", "--tokens", "32", "--heads", "16",
                       "--oracle-tokens", "16", "--repeat", "1", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["copy f32"]["GBps"] > 0
    assert rows["oracle quantize_mx (host)"]["twin_speedup"] > 0
    assert rows["indexer fp4 (oracle, host)"]["twin_speedup"] > 0
    assert rows["sweep e2m1 twin judging itself"]["mismatches"] == 0
    assert "skipped" in rows["aiter f32_to_mxfp4"] or rows["aiter f32_to_mxfp4"]["ms"] > 0


@pytest.mark.gpu
def test_gpu_gate_reference_is_the_oracle() -> None:
    """What the gate judges against on --device cuda (conformance.reference.reference(op, "cuda"):
    the twin on the card) gives the NumPy oracle's bytes, for every op the twin serves, under every profile."""
    from mxgate import op_table
    from mxgate.conformance.reference import reference
    from mxgate.op_table import OpName

    rng = rng_of(SEED + 31)
    x = _blocks(rng, 1 << 12, 128)
    codes = np.arange(256, dtype=np.uint8)
    for name in PROFILES:
        p = profiles.get(name)
        calls = {
            OpName.E2M1_ENCODE: (x, name), OpName.MX_QUANTIZE: (x, name), OpName.E8M0_SCALE: (np.abs(x), name),
            OpName.BF16_ROUND: (x, name), OpName.E8M0_DECODE: (codes, name),
            OpName.E4M3FN_ENCODE: (x, "fn", SATURATE[p.fp8_overflow]),
            OpName.E4M3FNUZ_ENCODE: (x, "fnuz", SATURATE[p.fp8_overflow]),
        }
        for op, args in calls.items():
            gate = reference(op, GPU_DEVICE)
            assert gate.__name__.endswith(f"_on_{torch.device(GPU_DEVICE).type}"), (op, gate.__name__)
            with np.errstate(over="ignore", invalid="ignore"):
                want = op_table.reference(op)(*args)
            got = gate(*args)
            for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
                assert np.asarray(w).tobytes() == np.asarray(g).tobytes(), f"seed {SEED + 31} {op} {name}"


@pytest.mark.parametrize("mode", ["fp4", "fp8"])
def test_envelope_judged_with_the_twin_reference_as_with_the_oracle(mode: str) -> None:
    """The gate's indexer judge (judge.match_variants) with the twin computing the envelope
    members (what --device cuda uses) reaches the oracle's verdict, counts and reasons: on the
    oracle's own outputs (exact) and on a non-default member's outputs (acceptable)."""
    from mxgate.conformance.judge import match_variants
    from mxgate.oracle.ops import frontend
    from mxgate.twin.reference import on_device

    twin_ref = on_device(oracle.ops.indexer_qk_rope_quant_and_cache, "cpu")
    args = cases.envelope_probe_case(mode)
    members = frontend.envelope(profiles.get("gfx950"))
    seen = set()
    for member in (members[0], members[-1]):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            actual = oracle.ops.indexer_qk_rope_quant_and_cache(**cases.copy_case(args), variant=member)
            want = match_variants(actual, profile="gfx950", **cases.copy_case(args))
        got = match_variants(actual, reference=twin_ref, profile="gfx950", **cases.copy_case(args))
        assert (got.status, got.reason, got.counts, got.total) == (want.status, want.reason, want.counts, want.total)
        assert np.array_equal(got.k_variant, want.k_variant) and np.array_equal(got.q_variant, want.q_variant)
        seen.add(got.status)
    assert seen == {"exact", "acceptable"}, (mode, seen)


def test_exhaustive_tier_device_judge_settles_exact_and_defers_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exhaustive tier's device judge (used on --device cuda), run here on the CPU over two
    2^20-input chunks (the tier's are 2^24): an encoder equal to the oracle is recorded exact with
    the input count; a planted wrong code leaves the verdict to the host judge (nothing recorded)."""
    from mxgate.conformance import test_elements
    from mxgate.conformance.test_elements import _judged_on_device
    from mxgate.kernels.functions import backend_from_functions, kernel

    monkeypatch.setattr(test_elements, "CHUNK", 1 << 20)

    recorded = []

    def record(op, config, verdict, **kw):
        recorded.append((op, config, verdict, kw))

    def good(x: np.ndarray) -> np.ndarray:
        return oracle.encode_e2m1(x, "gfx950")

    def planted(x: np.ndarray) -> np.ndarray:
        codes = oracle.encode_e2m1(x, "gfx950")
        codes[12345] ^= 1
        return codes

    def backend(encoder):
        return backend_from_functions("planted", kernel("e2m1.encode", encoder, profile="gfx950"))(device="cpu")

    chunks = [0x7F8, 0x800]  # 0x7F800000 .. 0x7F8FFFFF: Inf and NaNs; 0x80000000 .. 0x800FFFFF: -0 and tiny negatives
    assert _judged_on_device(backend(good), "e2m1.encode", "gfx950", "e2m1", record, chunks=chunks)
    (op, config, verdict, kw), = recorded
    assert (op, config, verdict.verdict, verdict.total, kw) == ("e2m1.encode", "every-float32", "exact", 2 << 20,
                                                               {"profile": "gfx950"})
    assert not _judged_on_device(backend(planted), "e2m1.encode", "gfx950", "e2m1", record, chunks=chunks)
    assert len(recorded) == 1


def test_the_gate_reference_on_a_device_is_the_oracle_on_tensors() -> None:
    """The profiles whose rules a separate torch copy once lacked run on tensors like every
    other (the oracle's own code): the gate's device reference gives the oracle's bytes."""
    from mxgate.conformance.reference import reference

    nan_block = np.zeros(32, np.uint32)
    nan_block[:len(NAN_PAYLOADS)] = NAN_PAYLOADS[:32]
    x = f32(np.concatenate([bf16_patterns(), nan_block])).reshape(-1, 32)
    quantize = reference(OpName.MX_QUANTIZE, "cpu", twin=True)
    for name in ("microxcaling", "nvidia-ue8m0", "torchao-rceil", "torchao-floor"):
        with np.errstate(over="ignore", invalid="ignore"):
            got, want = quantize(x, name), oracle.quantize_mx(x, name)
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), name
