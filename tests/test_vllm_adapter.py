"""vLLM PR #42908's kernels through mxgate.kernels.vllm_triton under Triton's CPU interpreter, and
the evidence behind docs/findings/vllm.md.

Tests marked ``checkout`` need a vLLM checkout named by MXGATE_VLLM_SRC (the folder holding
``vllm/``; either revision) and skip with that reason otherwise; the Triton-only probes need
torch and triton >= 3.9 in interpreter mode; the availability test needs nothing.
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
from mxgate.conformance.judge import compare_logits
from mxgate.kernels import sources, vllm_loader
from mxgate.oracle.layouts._vllm import VllmFp4IndexerK
from mxgate.oracle.scorers import vllm as lv
from mxgate.oracle.ops import quant_vllm as qv
from mxgate.inputs import vllm as vc

SEED = 20261202
PROBE = np.array([0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 1.75, -1.75, 2.5, -2.5, 3.5, -3.5, 5.0, -5.0,
                  0.0, -0.0, -0.1, 0.1, -2.0**-50, 6.0], np.float32)
# the ROCm branch's codes for PROBE at scale 2^0 (group amax 6): ties to even, -0.0 -> 0x0, small negatives -> 0x8
PROBE_CODES = [0x0, 0x8, 0x2, 0xA, 0x2, 0xA, 0x4, 0xC, 0x4, 0xC, 0x6, 0xE, 0x6, 0xE, 0x0, 0x0, 0x8, 0x0, 0x8, 0x7]


CHILD_FLAG = "MXGATE_VLLM_CHILD"


def _interpreter_problem() -> str | None:
    """Why this process cannot run interpreted Triton (triton imported compiled: then
    test_in_child_process runs this module again in a child)."""
    return sources.triton_problem("interpret")


def _need_interpreter() -> None:
    reason = _interpreter_problem()
    if reason is not None:
        pytest.skip(reason)


def _need_checkout() -> None:
    if not os.environ.get(vllm_loader.ENV_VAR):
        pytest.skip(f"set {vllm_loader.ENV_VAR} to a vLLM checkout (PR #42908) to run the vLLM kernels")
    _need_interpreter()


@pytest.fixture(scope="module")
def backend():
    _need_checkout()
    from mxgate import kernels

    b = kernels.get("vllm-triton", "cpu")
    status = b.available()
    if not status:
        pytest.fail(f"{vllm_loader.ENV_VAR} is set but the backend is unavailable: {status.reason}")
    return b


@pytest.fixture(scope="module")
def fnuz_backend():
    _need_checkout()
    from mxgate import kernels

    return kernels.get("vllm-triton-fnuz", "cpu")


# ---- no source -------------------------------------------------------------------------------


def test_without_a_source_each_backend_names_the_variable(monkeypatch) -> None:
    from mxgate.kernels.vllm_triton import VllmTritonBackend

    monkeypatch.delenv(vllm_loader.ENV_VAR, raising=False)
    for fp8 in ("fn", "fnuz"):
        status = VllmTritonBackend("cpu", fp8=fp8).available()
        assert not status
        assert f"set {vllm_loader.ENV_VAR} to a vLLM checkout (PR #42908" in status.reason


def test_a_folder_that_is_no_checkout_is_named(monkeypatch, tmp_path) -> None:
    from mxgate.kernels.vllm_triton import VllmTritonBackend

    monkeypatch.setenv(vllm_loader.ENV_VAR, str(tmp_path))
    status = VllmTritonBackend("cpu").available()
    assert not status and "rocm_fp8_fp4_paged_mqa_logits.py" in status.reason
    assert vllm_loader.ENV_VAR in status.reason


# ---- with a checkout: the adapter ------------------------------------------------------------


def test_origin_and_op_table_follow_the_checkout(backend) -> None:
    assert backend.origin.startswith(f"checkout ${vllm_loader.ENV_VAR} at ")
    names = vllm_loader.locate().defines("logits")
    has_topk = vllm_loader.TOPK_ENTRY[0] in names
    assert ("vllm.fp4_paged_mqa_logits_topk" in backend.ops()) == has_topk
    assert {"vllm.fp4_paged_mqa_logits", "vllm.fp4_mqa_logits", "vllm.fp8_paged_mqa_logits", "vllm.indexer_q_mxfp4",
            "vllm-fp4-indexer-k.store"} <= set(backend.ops())


def test_scorers_against_the_oracle(backend) -> None:
    case = vc.fp4_paged_case(SEED, 2, 2, 32, 150, block_size=32, spread=3)
    sc = lv.fp4_paged_logits_scored(**case.kwargs)
    assert compare_logits(sc, backend.op("vllm.fp4_paged_mqa_logits").run(**case.kwargs)).verdict in ("exact", "acceptable")
    for heads in (32, 8):  # tl.dot_scaled, then the software-decoded path
        case = vc.fp4_ragged_case(SEED + heads, 5, 90, heads)
        sc = lv.fp4_ragged_logits_scored(**case.kwargs)
        assert compare_logits(sc, backend.op("vllm.fp4_mqa_logits").run(**case.kwargs)).verdict in ("exact", "acceptable")
    case = vc.fp8_paged_case(SEED, 2, 1, 32, 100)
    sc = lv.fp8_paged_logits_scored(**case.kwargs)
    assert compare_logits(sc, backend.op("vllm.fp8_paged_mqa_logits").run(**case.kwargs)).verdict in ("exact", "acceptable")


def test_the_host_checks_are_outside_the_contract(backend) -> None:
    from mxgate.kernels.base import OutsideContract

    case = vc.fp4_paged_case(SEED, 1, 1, 16, 64, block_size=64)  # 16 heads: the paged wrapper asserts 32 or 64
    with pytest.raises(OutsideContract, match="num_heads"):
        backend.op("vllm.fp4_paged_mqa_logits").run(**case.kwargs)


# ---- finding 1: the ROCm quantizer branch's ties and sign of zero ------------------------------


def _probe_rows() -> np.ndarray:
    x = np.zeros((1, 1, 128), np.float32)
    x[0, 0, :PROBE.size] = PROBE  # NoPE dims: quantized as loaded
    x[0, 0, 64:64 + PROBE.size] = PROBE  # rope dims, cos 1 / sin 0
    return oracle.bf16_bits(x)


def test_finding_ties_and_sign_of_zero_q_kernel(backend) -> None:
    x = _probe_rows()
    packed, e8m0, _ = backend.op("vllm.indexer_q_mxfp4").run(x, np.ones((1, 1), np.float32), 1.0, 1.0)
    codes = oracle.unpack_nibbles(packed)[0, 0]
    assert e8m0[0, 0].tolist()[:3:2] == [127, 127]  # amax 6: scale 2^0
    assert codes[:PROBE.size].tolist() == PROBE_CODES
    assert codes[64:64 + PROBE.size].tolist() == PROBE_CODES
    assert oracle.encode_e2m1(PROBE, qv.VLLM_ROCM).tolist() == PROBE_CODES
    # the PR's test quantizer and the gfx950 rule keep the sign of -0.0 (0x8); this branch does not
    assert oracle.encode_e2m1(np.float32([-0.0]), "gfx950").tolist() == [0x8]


def test_finding_ties_and_sign_of_zero_k_insert(backend) -> None:
    k = _probe_rows()[0]
    cache = VllmFp4IndexerK().new_buffer(num_blocks=1, block_size=16)
    out = backend.op("vllm-fp4-indexer-k.store").run(k, np.array([5]), cache, block_size=16)
    packed, e8m0 = VllmFp4IndexerK().gather(out, slots=np.array([5]), block_size=16)
    assert oracle.unpack_nibbles(packed)[0, :PROBE.size].tolist() == PROBE_CODES
    assert np.array_equal(out, qv.k_insert_mxfp4(k, np.array([5]), cache, block_size=16))


# ---- finding 2: the FNUZ FP8 path reads K as float8e4b15 ---------------------------------------


def _triton():
    """torch, triton and triton.language, imported (the first time) in interpreter mode."""
    with sources.env_scope("interpret"):
        import torch
        import triton
        import triton.language as tl
    return torch, triton, tl


def _interpreting(probe):
    """Run a probe with TRITON_INTERPRET=1: @triton.jit reads it when it decorates, and the
    launch reads it again."""
    import functools

    @functools.wraps(probe)
    def run(*args, **kwargs):
        with sources.env_scope("interpret"):
            return probe(*args, **kwargs)

    return run


@_interpreting
def _e4b15_decode() -> np.ndarray:
    torch, triton, tl = _triton()

    @triton.jit
    def decode(x_ptr, y_ptr, N: tl.constexpr):
        o = tl.arange(0, N)
        tl.store(y_ptr + o, tl.load(x_ptr + o).to(tl.float8e4b15, bitcast=True).to(tl.float32))

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    out = torch.empty(256, dtype=torch.float32)
    decode[(1,)](codes, out, N=256)
    return out.numpy()


def test_finding_fnuz_bytes_read_as_e4b15_are_scaled_by_2_to_minus_7() -> None:
    _need_interpreter()
    e4b15 = _e4b15_decode()
    fnuz = oracle.decode_e4m3(np.arange(256, dtype=np.uint8), "fnuz")
    finite = np.isfinite(fnuz)
    assert np.array_equal(e4b15[finite], fnuz[finite] * np.float32(2.0**-7))  # every finite code, exactly
    assert np.isnan(fnuz[0x80]) and e4b15[0x80] == 0 and np.signbit(e4b15[0x80])  # fnuz NaN reads as -0
    assert e4b15[0x40] == 2.0**-7 and fnuz[0x40] == 1.0


def test_finding_fnuz_scorer_logits_are_the_exact_ones_over_128(fnuz_backend) -> None:
    case = vc.fp8_paged_case(SEED, 2, 2, 32, 120, variant="fnuz")
    sc = lv.fp8_paged_logits_scored(**case.kwargs, variant="fnuz")
    got = fnuz_backend.op("vllm.fp8_paged_mqa_logits").run(**case.kwargs)
    assert compare_logits(sc, got).verdict == "fail"
    scaled = np.where(sc.window, got * np.float32(128), got)
    assert compare_logits(sc, scaled).verdict in ("exact", "acceptable")


# ---- finding 3: k_scale is not to be transposed for tl.dot_scaled -----------------------------


@_interpreting
def _dot_scaled(transposed: bool):
    """Our own probe: lhs [16, 128] e2m1 with scales [16, 4], rhs [128, 32] (packed along K)
    with scales given as [N, K/32] = [32, 4] as the kernel loads k_scale, or transposed."""
    torch, triton, tl = _triton()

    @triton.jit
    def probe(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, TRANS: tl.constexpr):
        m = tl.arange(0, 16)
        n = tl.arange(0, 32)
        kb = tl.arange(0, 64)
        g = tl.arange(0, 4)
        a = tl.load(a_ptr + m[:, None] * 64 + kb[None, :])
        sa = tl.load(sa_ptr + m[:, None] * 4 + g[None, :])
        b = tl.load(b_ptr + n[None, :] * 64 + kb[:, None])  # [64, 32]: token n's bytes in a column
        sb = tl.load(sb_ptr + n[:, None] * 4 + g[None, :])  # [32, 4]: one row per token
        if TRANS:
            sb = tl.trans(sb)
        c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", lhs_k_pack=True, rhs_k_pack=True, out_dtype=tl.float32)
        tl.store(c_ptr + m[:, None] * 32 + n[None, :], c)

    g = np.random.Generator(np.random.PCG64(SEED))
    a = g.integers(0, 256, (16, 64), dtype=np.uint8)
    b = g.integers(0, 256, (32, 64), dtype=np.uint8)
    sa = g.integers(120, 134, (16, 4), dtype=np.uint8)
    sb = g.integers(110, 144, (32, 4), dtype=np.uint8)  # distinct per token and group
    out = torch.empty((16, 32), dtype=torch.float32)
    t = [torch.from_numpy(x.copy()) for x in (a, sa, b, sb)]
    probe[(1,)](t[0], t[1], t[2], t[3], out, TRANS=transposed)
    qa = oracle.dequantize_mx(a, sa, "gfx950").astype(np.float64)
    kb = oracle.dequantize_mx(b, sb, "gfx950").astype(np.float64)
    # the same bytes with the scale grid read the other way round ([4, 32] taken as [32, 4])
    k_swapped = oracle.dequantize_mx(b, np.ascontiguousarray(sb.T).reshape(32, 4), "gfx950").astype(np.float64)
    bound = 128 * 2.0**-24 / (1 - 128 * 2.0**-24) * (np.abs(qa) @ np.abs(kb).T)  # any fp32 order
    return out.numpy().astype(np.float64), qa @ kb.T, qa @ k_swapped.T, bound


def test_finding_k_scale_as_loaded_is_what_dot_scaled_expects() -> None:
    _need_interpreter()
    _, _, tl = _triton()
    got, want, swapped, bound = _dot_scaled(transposed=False)
    assert np.all(np.abs(got - want) <= bound)  # every per-token, per-group scale applied where it belongs
    assert np.all(np.abs(got - swapped) > bound)  # while the other reading of the grid is far off everywhere
    assert "Do NOT transpose rhs_scale" in tl.dot_scaled.__doc__
    with pytest.raises(Exception, match="(?i)scale|shape"):
        _dot_scaled(transposed=True)  # the review bot's suggestion does not even pass Triton's shape check


# ---- finding 4: Triton's interpreter converts bf16 subnormals wrongly -------------------------


@_interpreting
def _interpreted(values: np.ndarray, round_trip: bool) -> np.ndarray:
    """Our own probe kernel under the interpreter: bf16 bits -> float32 (``round_trip`` False),
    or float32 -> bf16 -> float32 (True), as the Q kernel's loads and its rope round trip do."""
    torch, triton, tl = _triton()

    @triton.jit
    def convert(x_ptr, y_ptr, N: tl.constexpr, ROUND_TRIP: tl.constexpr):
        o = tl.arange(0, N)
        v = tl.load(x_ptr + o)
        if ROUND_TRIP:
            v = v.to(tl.bfloat16)
        tl.store(y_ptr + o, v.to(tl.float32))

    n = 1 << max(4, int(values.size - 1).bit_length())
    src = np.zeros(n, values.dtype)
    src[:values.size] = values.reshape(-1)
    data = torch.from_numpy(src) if round_trip else torch.from_numpy(src.view(np.int16)).view(torch.bfloat16)
    out = torch.empty(n, dtype=torch.float32)
    convert[(1,)](data, out, N=n, ROUND_TRIP=round_trip)
    return out.numpy()[:values.size].reshape(values.shape)


def _interpreter_bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return _interpreted(bits, round_trip=False)


def test_finding_interpreter_bf16_subnormal_conversion() -> None:
    _need_interpreter()
    bits = np.array([0x0016, 0x8016, 0x0001, 0x007F, 0x0080, 0x3F80], np.uint16)
    got = _interpreter_bf16_to_f32(bits).view(np.uint32)
    assert [hex(int(v)) for v in got] == ["0x300000", "0x80300000", "0x0", "0x7e0000", "0x800000", "0x3f800000"]
    assert oracle.bf16_to_f32(bits).view(np.uint32).tolist() == [0x160000, 0x80160000, 0x10000, 0x7F0000, 0x800000,
                                                                  0x3F800000]


def test_finding_q_kernel_subnormal_mismatch_is_the_interpreter_conversion(backend) -> None:
    x = vc.quant_rows(SEED, 16, specials=False, subnormals=True).reshape(4, 4, 128)
    w = np.ones((4, 4), np.float32)
    got, _, _ = backend.op("vllm.indexer_q_mxfp4").run(x, w, 1.0, 1.0)
    want, _, _ = qv.indexer_q_mxfp4(x, w, 1.0, 1.0)
    assert not np.array_equal(got, want)
    loaded = _interpreter_bf16_to_f32(x)  # what the interpreted kernel actually loads
    loaded[..., 64:] = _interpreted(np.ascontiguousarray(loaded[..., 64:]), round_trip=True)  # rope dims' bf16 trip
    explained, _ = oracle.quantize_mx(np.ascontiguousarray(loaded), qv.VLLM_ROCM)
    assert np.array_equal(got, explained)


# ---- finding 5: the ragged scorer needs a power-of-two head count -----------------------------


def test_finding_ragged_heads_must_be_a_power_of_two(backend) -> None:
    case = vc.fp4_ragged_case(SEED, 3, 40, 24)
    with pytest.raises(Exception, match="power of 2"):
        backend.op("vllm.fp4_mqa_logits").run(**case.kwargs)


def test_in_child_process() -> None:
    """When triton was imported compiled in this process, run this module again in a child
    that starts the interpreter (the interpreter tests above skipped here)."""
    if os.environ.get(CHILD_FLAG) == "1" or sources.triton_mode() != "compiled":
        pytest.skip("this process runs the interpreter tests itself")
    if importlib.util.find_spec("triton") is None or (sources.triton_version() or (0, 0)) < sources.MIN_TRITON_INTERPRET:
        pytest.skip("triton >= 3.9 is needed for the interpreter")
    env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_FLAG: "1"})
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__], env=env,
                          capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
