"""sglang's shipped Triton FP4 indexer kernels against the oracle, under Triton's CPU interpreter.

Needs ``sglang==0.5.23`` (installed with ``--no-deps``), torch and triton >= 3.9; skips with the
reason otherwise. Triton picks the interpreter for the whole process when it is first imported,
so if something imported triton compiled before these tests, they run in a child process.
The facts asserted here are written up in docs/findings/sglang.md.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxgate import oracle
from mxgate.kernels import sglang_loader as loader

SEED = 20251129
MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
POISON = 0xA5
CHILD_FLAG = "MXGATE_SGLANG_CHILD"

for _module in ("torch", "triton"):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"python package {_module!r} is not installed", allow_module_level=True)
if loader.sglang_version() is None:
    pytest.skip("python package 'sglang' is not installed (pip install --no-deps sglang==0.5.23)",
                allow_module_level=True)


def _device(config: pytest.Config) -> str:
    """The plugin's --device (cpu when the option is absent)."""
    try:
        return str(config.getoption("--device"))
    except ValueError:
        return "cpu"


def _interpreter_reason() -> str | None:
    """Why the interpreter tests cannot run in this process (None when they can)."""
    if loader.triton_mode() == "compiled":
        return "triton was already imported compiled in this process; test_in_child_process runs these"
    return loader.problem("interpret")


def _skip_unless(device: str, config: pytest.Config) -> None:
    chosen = _device(config)
    if device != chosen:
        pytest.skip(f"this run is for --device {chosen}")
    reason = _interpreter_reason() if device == "cpu" else loader.problem("compiled")
    if reason is not None:
        pytest.skip(reason)


# -- inputs ------------------------------------------------------------------------------------

def _rng() -> np.random.Generator:
    return np.random.default_rng(np.random.PCG64(SEED))


def finite_rows(rows: int, rng: np.random.Generator) -> np.ndarray:
    """bf16 bits: random rows plus groups whose amax is 6*2^k (scale exactly 2^k) holding every
    midpoint, +-0 and small negatives, and groups at the amax floors."""
    x = rng.standard_normal((rows, 128)).astype(np.float32)
    x *= (2.0 ** rng.integers(-8, 8, size=(rows, 1))).astype(np.float32)
    pool = np.concatenate([MIDPOINTS, -MIDPOINTS, [0.0, -0.0, -0.1, 0.1, 1.0, -3.0]]).astype(np.float32)
    for r in range(0, rows, 2):
        for g in range(4):
            s = np.float32(2.0 ** int(rng.integers(-10, 10)))
            group = rng.choice(pool, 32) * s
            group[int(rng.integers(32))] = 6 * s
            x[r, 32 * g : 32 * g + 32] = group
    x[0] = 0.0
    x[1] = -0.0
    x[3, :64] = rng.standard_normal(64).astype(np.float32) * np.float32(1e-5)  # below 6*2^-14
    return oracle.bf16_bits(x)


def neg_zero_only(kernel: np.ndarray, expected: np.ndarray) -> bool:
    """True when every differing nibble is oracle -0 (0x8) against kernel +0 (0x0)."""
    k, e = oracle.unpack_nibbles(kernel), oracle.unpack_nibbles(expected)
    return bool(np.all((k == e) | ((e == 0x8) & (k == 0x0))))


# -- expected bytes: the layouts of SPEC section 5 ----------------------------------------------

def page68_bytes(cache: np.ndarray, packed: np.ndarray, e8m0: np.ndarray, slots: np.ndarray) -> np.ndarray:
    out = cache.copy()
    page_size = cache.shape[1] // 68
    for row, slot in enumerate(slots):
        page, o = divmod(int(slot), page_size)
        out[page, o * 64 : o * 64 + 64] = packed[row]
        out[page, page_size * 64 + o * 4 : page_size * 64 + o * 4 + 4] = e8m0[row]
    return out


def aiter_kv_bytes(kv: np.ndarray, ks: np.ndarray, packed: np.ndarray, e8m0: np.ndarray, slots: np.ndarray):
    kv, ks = kv.copy(), ks.copy()
    for row, slot in enumerate(slots):
        b, p = divmod(int(slot), 64)
        kv[b, 0, :, p, :] = packed[row].reshape(4, 16)
        ks[b, 0, :, (p % 16) * 4 + p // 16] = e8m0[row]
    return kv, ks


def page8_bytes(kv: np.ndarray, ks: np.ndarray, packed: np.ndarray, e8m0: np.ndarray, slots: np.ndarray):
    """Eight-slot pages over the flat kv_cache / kv_scale buffers: payload [t%4][g][t//4][16 B]
    at 512 bytes a page, scales [g][t] at 32 bytes a page."""
    flat_kv, flat_ks = kv.copy().reshape(-1, 4, 4, 2, 16), ks.copy().reshape(-1, 4, 8)
    for row, slot in enumerate(slots):
        page8, t = divmod(int(slot), 8)
        flat_kv[page8, t % 4, :, t // 4, :] = packed[row].reshape(4, 16)
        flat_ks[page8, :, t] = e8m0[row]
    return flat_kv.reshape(kv.shape), flat_ks.reshape(ks.shape)


# -- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def backends(request):
    """{rne: backend} on the CPU interpreter (--device cpu) or compiled (--device cuda)."""
    from mxgate.kernels.sglang_triton import backends as make

    _skip_unless(request.param, request.config)
    found = make(request.param)
    for b in found:
        status = b.available()
        if not status:
            pytest.skip(status.reason)
    return {b.rne: b for b in found}


@pytest.fixture(scope="module")
def data():
    rng = _rng()
    return {"small": finite_rows(24, rng), "rows": finite_rows(256, rng)}


# -- loader --------------------------------------------------------------------------------------

def test_loader_leaves_no_trace(backends, data):
    mode = backends[False].mode
    before = os.environ.get("TRITON_INTERPRET")
    k = loader.load(mode)
    assert k.version == loader.sglang_version() == "0.5.23" and k.mode == mode
    stubs = [n for n, m in sys.modules.items()
             if (n == "sglang" or n.startswith("sglang.")) and "mxgate" in (m.__doc__ or "")]
    assert stubs == []
    backends[False].quantize(data["small"][:2])
    assert os.environ.get("TRITON_INTERPRET") == before
    assert k.constants == {"_HEAD_DIM": 128, "_KV_BLOCK_SIZE": 64, "_INPUT_STRIDE_ALIGNMENT_BYTES": 128}
    other = "compiled" if mode == "interpret" else "interpret"
    assert loader.problem(other) is not None  # a process holds one triton mode


def test_interpreter_speed_ups_leave_every_byte(backends, data, monkeypatch):
    """Both interpreter changes that every launch applies (no dead overflow checks; triton.language
    patched once per launch, not again per device-function call) leave every byte as it was, cut
    the language patches, and leave debug mode alone."""
    import dataclasses

    from mxgate.kernels import triton_interpreter

    if backends[False].mode != "interpret":
        pytest.skip("the changes are the CPU interpreter's")
    import triton.runtime.interpreter as interpreter

    builder = interpreter.interpreter_builder
    kept = builder.options
    triton_interpreter.undo_language_patch_once_per_launch()
    patches = []
    real_patch = interpreter._patch_lang

    def counted(fn):
        patches.append(fn)
        return real_patch(fn)

    monkeypatch.setattr(interpreter, "_patch_lang", counted)
    monkeypatch.setattr(builder, "options", dataclasses.replace(kept, sanitize_overflow=True))
    monkeypatch.setattr(triton_interpreter, "speed_up", lambda: None)
    try:
        plain = {rne: b.quantize(data["rows"][:64]) for rne, b in backends.items()}
        plain_patches = len(patches)
        assert builder.options.sanitize_overflow is True  # the checks ran for these calls
        monkeypatch.undo()
        monkeypatch.setattr(interpreter, "_patch_lang", counted)
        patches.clear()
        fast = {rne: b.quantize(data["rows"][:64]) for rne, b in backends.items()}
        assert getattr(interpreter._patch_lang, "_mxgate_once_per_launch", False)
    finally:
        triton_interpreter.undo_language_patch_once_per_launch()
    assert builder.options.sanitize_overflow is False and builder.options.debug is False
    assert 0 < len(patches) < plain_patches  # the nested calls' repeats are gone, the launches' kept
    for rne in backends:
        assert all(np.array_equal(a, b) for a, b in zip(plain[rne], fast[rne]))
    debug = dataclasses.replace(kept, debug=True, sanitize_overflow=True)
    monkeypatch.setattr(builder, "options", debug)
    assert triton_interpreter.skip_dead_overflow_checks() is False and builder.options is debug


# -- quantizer -----------------------------------------------------------------------------------

@pytest.mark.parametrize("rne", [False, True], ids=["threshold", "rne"])
def test_quantize_matches_declared_profile(backends, data, rne):
    b = backends[rne]
    x = data["small"]
    packed, e8m0 = b.quantize(x)
    want_p, want_e = oracle.quantize_mx(oracle.bf16_to_f32(x), b.profile)
    assert np.array_equal(e8m0, want_e)
    assert np.array_equal(packed, want_p)
    assert packed.shape == (24, 64) and e8m0.shape == (24, 4)


@pytest.mark.parametrize("rne", [False, True], ids=["threshold", "rne"])
def test_multi_row_kernel_matches_declared_profile(backends, data, rne):
    b = backends[rne]
    x = data["rows"]
    packed, e8m0 = b.quantize_rows(x)
    want_p, want_e = oracle.quantize_mx(oracle.bf16_to_f32(x), b.profile)
    assert np.array_equal(e8m0, want_e) and np.array_equal(packed, want_p)
    per_row = b.quantize(x[:24])
    assert np.array_equal(per_row[0], packed[:24]) and np.array_equal(per_row[1], e8m0[:24])


def test_threshold_and_rne_differ_only_at_ties(backends, data):
    x = data["rows"]
    t, r = backends[False].quantize_rows(x), backends[True].quantize_rows(x)
    assert np.array_equal(t[1], r[1])
    scaled = np.abs(oracle.bf16_to_f32(x)) / np.repeat(2.0 ** (t[1].astype(np.float64) - 127), 32, -1)
    differ = oracle.unpack_nibbles(t[0]) != oracle.unpack_nibbles(r[0])
    assert differ.any()
    assert set(np.unique(scaled[differ]).astype(np.float32)) <= {0.75, 1.75, 3.5}


@pytest.mark.parametrize("rne", [False, True], ids=["threshold", "rne"])
def test_nan_and_inf_rules(backends, rne):
    """Kernel facts the profiles cannot express yet: NaN is skipped by the amax (max-num), any
    NaN gives code 0x7; an Inf drives the exponent to 255, clamped to 254."""
    x = np.full((2, 128), 1.0, np.float32)
    x[:, 1::2] = -2.0
    x[0, 3], x[0, 4] = np.nan, -np.nan  # group 0: amax 2 without the NaNs
    x[0, 32:64] = np.nan  # group 1: nothing but NaN
    x[1, 70], x[1, 71] = np.inf, -np.inf  # group 2
    packed, e8m0 = backends[rne].quantize(oracle.bf16_bits(x))
    codes = oracle.unpack_nibbles(packed)
    assert e8m0[0, 0] == 127 - 1  # ceil_pow2(2/6) = 2^-1
    assert codes[0, 3] == 0x7 and codes[0, 4] == 0x7
    assert codes[0, 5] == 0xE  # -2 / 2^-1 = -4 (code 0xE): the NaN did not change the scale
    assert e8m0[0, 1] == 114 and np.all(codes[0, 32:64] == 0x7)  # floor 1e-4 -> 2^-13
    assert e8m0[1, 2] == 254
    assert codes[1, 70] == 0x7 and codes[1, 71] == 0xF
    assert np.all(codes[1, 64:70] == 0) and np.all(codes[1, 72:96] == 0)
    want = oracle.quantize_mx(x, backends[rne].profile)  # amax_nan="ignore", special_scale="clamped"
    assert np.array_equal(packed, want[0]) and np.array_equal(e8m0, want[1])


# -- writers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("rne", [False, True], ids=["threshold", "rne"])
def test_page68_store_and_gather(backends, data, rne):
    b = backends[rne]
    x = data["small"][:12]
    slots = np.array([0, 63, 64, 5, 100, 127, 130, 191, 7, 66, 150, 33], np.int64)
    cache = np.full((3, 64 * 68), POISON, np.uint8)
    got = b.page68_store(x, slots, cache)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(x), b.profile)
    want = page68_bytes(cache, packed, e8m0, slots)
    assert np.array_equal(got, want)
    assert np.all(cache == POISON)  # the caller's buffer is not modified
    layouts = pytest.importorskip("mxgate.oracle.layouts")
    layout_buf = layouts.get("sglang-page68").scatter(cache.copy(), packed, e8m0, slots=slots)
    assert np.array_equal(got, layout_buf)
    back = b.page68_gather(got, slots[::-1].copy())
    assert np.array_equal(back[0], packed[::-1]) and np.array_equal(back[1], e8m0[::-1])


def test_page68_small_pages(backends, data):
    b = backends[False]
    x = data["small"][:6]
    slots = np.array([0, 15, 16, 31, 40, 47], np.int64)
    cache = np.full((3, 16 * 68), POISON, np.uint8)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(x), b.profile)
    assert np.array_equal(b.page68_store(x, slots, cache), page68_bytes(cache, packed, e8m0, slots))


@pytest.mark.parametrize("page8", [False, True], ids=["page64", "page8"])
@pytest.mark.parametrize("rne", [False, True], ids=["threshold", "rne"])
def test_split_writer_layout(backends, data, rne, page8):
    b = backends[rne]
    x = data["small"][:10]
    slots = np.array([0, 1, 7, 8, 15, 16, 63, 64, 100, 127], np.int64)
    kv = np.full((2, 1, 4, 64, 16), POISON, np.uint8)
    ks = np.full((2, 1, 4, 64), POISON, np.uint8)
    got = (b.page8_store if page8 else b.split_store)(x, slots, kv, ks)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(x), b.profile)
    want = (page8_bytes if page8 else aiter_kv_bytes)(kv, ks, packed, e8m0, slots)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    layouts = pytest.importorskip("mxgate.oracle.layouts")
    names = ("sglang-page8", "sglang-page8-scale") if page8 else ("aiter-fp4-kv", "aiter-fp4-kv-scale")
    if not set(names) <= set(layouts.names()):
        pytest.skip(f"mxgate.oracle.layouts has no {names}")
    kv_l = layouts.get(names[0]).scatter(kv.copy(), packed, slots=slots)
    ks_l = layouts.get(names[1]).scatter(ks.copy(), e8m0, slots=slots)
    assert np.array_equal(got[0], kv_l) and np.array_equal(got[1], ks_l)


def test_split_writer_against_gfx950(backends, data):
    """SPEC 6.8: the split writer differs from the gfx950 AITER bytes only in negative zeros. That
    holds with rne=True on finite rows whose groups all have amax > 6*2^-14; with the default
    rne=False the ties 0.75, 1.75 and 3.5 (in scale units) differ as well."""
    x = data["small"][4:20]  # finite, every group's amax far above the floors
    slots = np.arange(16, dtype=np.int64) * 3
    kv = np.full((1, 1, 4, 64, 16), POISON, np.uint8)
    ks = np.full((1, 1, 4, 64), POISON, np.uint8)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(x), "gfx950")
    want_kv, want_ks = aiter_kv_bytes(kv, ks, packed, e8m0, slots)
    rne_kv, rne_ks = backends[True].split_store(x, slots, kv, ks)
    assert np.array_equal(rne_ks, want_ks)
    assert not np.array_equal(rne_kv, want_kv) and neg_zero_only(rne_kv, want_kv)
    thr_kv, thr_ks = backends[False].split_store(x, slots, kv, ks)
    assert np.array_equal(thr_ks, want_ks) and not neg_zero_only(thr_kv, want_kv)


def test_amax_floor_breaks_the_claim(backends, data):
    """Groups with amax <= 6*2^-14 keep the 1e-4 floor's 2^-13 scale (byte 114); gfx950 does not."""
    x = data["small"][:4]
    got = backends[True].quantize(x)
    want = oracle.quantize_mx(oracle.bf16_to_f32(x), "gfx950")
    assert np.all(got[1][0] == 114) and np.all(want[1][0] == 1)  # an all-zero row
    assert np.any(got[1][3] != want[1][3])


# -- CUDA only: the scorers and the fused RoPE packer -------------------------------------------

@pytest.fixture(scope="module")
def cuda_backend(request):
    from mxgate.kernels.sglang_triton import SglangTritonBackend

    _skip_unless("cuda", request.config)
    b = SglangTritonBackend("cuda")
    status = b.available()
    if not status:
        pytest.skip(status.reason)
    return b


def _rotate(v: np.ndarray, freqs: np.ndarray, rope_dim: int, variant: str) -> np.ndarray:
    """RoPE on the last rope_dim dims, pairs (2i, 2i+1), float32, then bf16; three FMA readings."""
    out = v.copy()
    tail = out[:, 128 - rope_dim :]
    re, im = tail[:, 0::2].astype(np.float64), tail[:, 1::2].astype(np.float64)
    fr, fi = freqs.real.astype(np.float64), freqs.imag.astype(np.float64)
    f32 = np.float32
    if variant == "separate":
        a = (re * fr).astype(f32) - (im * fi).astype(f32)
        b = (re * fi).astype(f32) + (im * fr).astype(f32)
    elif variant == "fma_first":  # fma(re, fr, -(im*fi)): the first product stays exact
        a = (re * fr - (im * fi).astype(f32)).astype(f32)
        b = (re * fi + (im * fr).astype(f32)).astype(f32)
    else:  # fma on the second product
        a = ((re * fr).astype(f32) - im * fi).astype(f32)
        b = ((re * fi).astype(f32) + im * fr).astype(f32)
    tail[:, 0::2], tail[:, 1::2] = oracle.round_bf16(a), oracle.round_bf16(b)
    return out


def rope_pack_reference(x_bits: np.ndarray, freqs: np.ndarray, rope_dim: int, variant: str):
    """RoPE -> bf16 -> fake quantization (the gfx950 rule: RCEIL, floor 6*2^-126, ties to even)
    -> dequantize (exact in bf16) -> the sglang-rne pack."""
    v = _rotate(oracle.bf16_to_f32(x_bits), freqs, rope_dim, variant)
    fake = oracle.dequantize_mx(*oracle.quantize_mx(v, "gfx950"), "gfx950")
    return oracle.quantize_mx(fake, "sglang-rne")


@pytest.mark.gpu
def test_cuda_index_k_rope_pack(cuda_backend):
    rng = _rng()
    x = oracle.bf16_bits(rng.standard_normal((64, 128)).astype(np.float32))
    angles = rng.uniform(0, 2 * np.pi, (64, 32))
    freqs = (np.cos(angles) + 1j * np.sin(angles)).astype(np.complex64)
    packed, e8m0 = cuda_backend.index_k_rope_pack(x, freqs, 64)
    matched = np.zeros(64, bool)
    for variant in ("separate", "fma_first", "fma_second"):
        want = rope_pack_reference(x, freqs, 64, variant)
        matched |= np.all(packed == want[0], axis=1) & np.all(e8m0 == want[1], axis=1)
    assert matched.all(), f"{(~matched).sum()} of 64 rows match no FMA reading"
    cache = np.full((1, 64 * 68), POISON, np.uint8)
    slots = np.arange(64, dtype=np.int64)[::-1].copy()
    stored = cuda_backend.index_k_rope_pack(x, freqs, 64, cache=cache, slots=slots)
    assert np.array_equal(stored, page68_bytes(cache, packed, e8m0, slots))


def _logits_reference(q: np.ndarray, w: np.ndarray, table: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """sglang's rounding points with float64 sums: bf16(k), dot, bf16, relu, bf16(s*w), sum, bf16."""
    page_size = table.shape[1] // 68
    pages, offs = slots // page_size, slots % page_size
    rows = table[pages[..., None], offs[..., None] * 64 + np.arange(64)]
    scales = table[pages[..., None], page_size * 64 + offs[..., None] * 4 + np.arange(4)]
    k = oracle.dequantize_mx(rows.reshape(-1, 64), scales.reshape(-1, 4), "threshold")
    k = oracle.round_bf16(k.reshape(slots.shape + (128,))).astype(np.float64)
    qf = oracle.bf16_to_f32(q).astype(np.float64)
    acc = np.einsum("bhd,bld->bhl", qf, k).astype(np.float32)
    s = np.maximum(oracle.round_bf16(acc), 0)
    s = oracle.round_bf16((s * oracle.bf16_to_f32(w)[:, :, None]).astype(np.float32))
    return oracle.round_bf16(s.astype(np.float64).sum(axis=1).astype(np.float32)), np.abs(s).sum(axis=1)


@pytest.mark.gpu
def test_cuda_logits_decode_and_paged(cuda_backend):
    rng = _rng()
    heads, batch, length = 32, 3, 150
    keys = oracle.bf16_bits(rng.standard_normal((256, 128)).astype(np.float32))
    table = cuda_backend.page68_store(keys, np.arange(256, dtype=np.int64), np.zeros((4, 64 * 68), np.uint8))
    q = oracle.bf16_bits(rng.standard_normal((batch, heads, 128)).astype(np.float32))
    w = oracle.bf16_bits(rng.standard_normal((batch, heads)).astype(np.float32) * 0.1)
    slots = rng.integers(0, 256, (batch, length)).astype(np.int64)
    lens = np.array([150, 70, 0], np.int64)
    out = cuda_backend.logits_decode(q, w, slots, lens, table)
    visible = np.arange(length)[None, :] < lens[:, None]
    assert np.all(np.isneginf(out[~visible]))
    want, magnitude = _logits_reference(q, w, table, slots)
    err = np.abs(out - want)[visible]
    assert np.all(err <= 2.0**-6 * magnitude[visible] + 1e-30), f"max error {err.max()}"
    req_table = np.zeros((batch, 2 * length), np.int32)
    req_table[:, ::2] = slots * 2  # ratio 2: slot = req_table[req, 2l] // 2
    paged = cuda_backend.logits_paged(q, w, np.arange(batch, dtype=np.int64), req_table, lens, table, length, 2)
    assert np.array_equal(paged[visible], out[visible])


@pytest.mark.gpu
def test_identify_names_the_cuda_only_ops_by_their_declared_profiles(request):
    """docs/findings/sglang.md 11: compiled for CUDA the FP4 index scorers read a K scale byte 0
    as 0 (byte0 'zero', the declared sglang-cuda-scorer; 2^-127 would give another logit), and
    identify names all three CUDA-only ops by the profiles the backend declares."""
    _skip_unless("cuda", request.config)
    from mxgate.identify.run import MATCH, identify

    scorers = ["sglang.fp4_index_logits.decode", "sglang.fp4_index_logits.paged"]
    result = identify("sglang-triton", [*scorers, "sglang.index_k_rope_pack"], "cuda")
    assert result.status == 0, [(op.op, op.status, op.cause) for op in result.ops]
    for op in result.ops:
        assert op.status == MATCH and op.declared in op.inference.matches, (op.op, op.inference.matches)
        if op.op in scorers:
            byte0 = op.inference.fields["byte0"]
            assert op.declared == "sglang-cuda-scorer" and byte0.decided and byte0.value == "zero"


# -- host checks and availability ----------------------------------------------------------------

def test_bad_arguments(backends, data):
    from mxgate.kernels.sglang_triton import SglangTritonBackend

    b = backends[False]
    x = data["small"][:2]
    cache = np.zeros((1, 64 * 68), np.uint8)
    with pytest.raises(TypeError, match="x_bf16"):
        b.quantize(x.astype(np.float32))
    with pytest.raises(ValueError, match="x_bf16"):
        b.quantize(x[:, :64])
    with pytest.raises(ValueError, match="slots"):
        b.page68_store(x, np.array([0, 64]), cache)
    with pytest.raises(ValueError, match="slots"):
        b.page68_store(x, np.array([-1, 3]), cache)
    with pytest.raises(ValueError, match="distinct"):
        b.page68_store(x, np.array([3, 3]), cache)
    with pytest.raises(ValueError, match="cache"):
        b.page68_store(x, np.array([0, 1]), np.zeros((1, 100), np.uint8))
    with pytest.raises(TypeError, match="cache"):
        b.page68_store(x, np.array([0, 1]), cache.astype(np.int8))
    with pytest.raises(ValueError, match="kv_scale"):
        b.split_store(x, np.array([0, 1]), np.zeros((1, 1, 4, 64, 16), np.uint8), np.zeros((2, 1, 4, 64), np.uint8))
    with pytest.raises(ValueError, match="device"):
        SglangTritonBackend("gpu")


def test_gpu_only_ops_on_cpu():
    from mxgate.kernels.sglang_triton import SglangTritonBackend

    b = SglangTritonBackend("cpu")  # no kernel is loaded: these ops answer before that
    q, w = np.zeros((1, 16, 128), np.uint16), np.zeros((1, 16), np.uint16)
    calls = {
        "sglang.index_k_rope_pack": (q[0], np.zeros((1, 32), np.complex64), 64),
        "sglang.fp4_index_logits.decode": (q, w, None, None, None),
        "sglang.fp4_index_logits.paged": (q, w, None, None, None, None, 0, 1),
    }
    for op, args in calls.items():
        status = b.available(op)
        assert not status and "cuda" in status.reason
        with pytest.raises(RuntimeError, match="cuda"):
            b.op(op).run(*args)
    assert "sglang.fp4_index_logits.decode" not in SglangTritonBackend("cpu", rne=True).ops()
    assert b.available("no.such.op").reason.startswith("backend")


def test_reasons_when_packages_are_missing(monkeypatch):
    monkeypatch.setattr(loader, "sglang_version", lambda: None)
    assert "sglang" in loader.problem("interpret")
    monkeypatch.undo()
    monkeypatch.setattr(loader, "triton_version", lambda: (3, 6))
    assert "3.9" in (loader.problem("interpret") or "")


# -- the same tests in a fresh interpreter process ----------------------------------------------

def test_in_child_process(request):
    if os.environ.get(CHILD_FLAG) == "1" or _device(request.config) != "cpu":
        pytest.skip("not the parent run on --device cpu")
    if loader.triton_mode() != "compiled":
        pytest.skip("this process runs the interpreter tests itself")
    if (loader.triton_version() or (0, 0)) < loader.MIN_TRITON_INTERPRET:
        pytest.skip(loader.problem("interpret") or "triton too old for the interpreter")
    env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_FLAG: "1"})
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          env=env, capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
