"""The AITER and vLLM adapters: skipped here with a precise reason, and the exact argument
tensors the AITER adapter would pass (no AITER result is claimed)."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from mxgate import kernels
from mxgate.kernels.aiter import indexer_call_specs, per_1x32_call_specs


def _fp4_arguments(tokens: int = 8, heads: int = 32, blocks: int = 3, max_pos: int = 4096) -> dict[str, object]:
    bf16 = ml_dtypes.bfloat16
    qs_pad = -(-(heads // 16) // 4) * 4  # round_up(H / 16, 4)
    return dict(
        q=np.zeros((tokens, heads, 128), bf16),
        q_out=np.zeros((tokens, heads, 64), np.uint8),
        weights=np.zeros((tokens, heads), bf16),
        weights_out=np.zeros((tokens, heads), bf16),
        k=np.zeros((tokens, 128), bf16),
        kv_cache=np.zeros((blocks, 1, 4, 64, 16), np.uint8),
        slot_mapping=np.arange(tokens, dtype=np.int64),
        norm_weight=np.ones(128, np.float32),
        norm_bias=np.zeros(128, np.float32),
        positions=np.arange(tokens, dtype=np.int64),
        cos_cache=np.zeros((max_pos, 32), bf16),
        sin_cache=np.zeros((max_pos, 32), bf16),
        epsilon=1e-6,
        quant_block_size=32,
        scale_fmt="ue8m0",
        weights_scale=0.5,
        preshuffle=False,
        is_neox=True,
        compute_all_q_rope=False,
        q_scale_out=np.zeros((tokens, 1, 4, 16, qs_pad), np.uint8),
        kv_cache_scale=np.zeros((blocks, 1, 4, 64), np.uint8),
    )


def test_fp4_mode_argument_tensors() -> None:
    specs = [str(s) if not isinstance(s, tuple) else f"{s[0]}={s[1]!r}" for s in indexer_call_specs(**_fp4_arguments())]
    # PR #5484's API, T = 8, H = 32, QS_PAD = round_up(32 / 16, 4) = 4, three 64-slot blocks.
    assert specs == [
        "q: bfloat16[8, 32, 128]",
        "q_out: uint8[8, 32, 64]",
        "weights: bfloat16[8, 32]",
        "weights_out: bfloat16[8, 32]",
        "k: bfloat16[8, 128]",
        "kv_cache: uint8[3, 1, 4, 64, 16]",
        "slot_mapping: int64[8]",
        "norm_weight: float32[128]",
        "norm_bias: float32[128]",
        "positions: int64[8]",
        "cos_cache: bfloat16[4096, 32]",
        "sin_cache: bfloat16[4096, 32]",
        "epsilon=1e-06",
        "quant_block_size=32",
        "scale_fmt='ue8m0'",
        "weights_scale=0.5",
        "preshuffle=False",
        "is_neox=True",
        "compute_all_q_rope=False",
        "q_scale_out: uint8[8, 1, 4, 16, 4]",
        "kv_cache_scale: uint8[3, 1, 4, 64]",
    ]


def test_fp8_mode_omits_the_fp4_outputs_and_raw_uint16_is_bf16() -> None:
    args = _fp4_arguments()
    del args["q_scale_out"], args["kv_cache_scale"]
    args["q"] = np.zeros((8, 32, 128), np.uint16)  # raw bf16 bit patterns
    args["kv_cache"] = np.zeros((3, 64, 132), np.uint8)
    specs = indexer_call_specs(**args)
    names = [s[0] if isinstance(s, tuple) else s.name for s in specs]
    assert "q_scale_out" not in names and "kv_cache_scale" not in names
    assert str(specs[0]) == "q: bfloat16[8, 32, 128]"
    assert str(specs[5]) == "kv_cache: uint8[3, 64, 132]"


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="'k'"):
        args = _fp4_arguments()
        del args["k"]
        indexer_call_specs(**args)
    with pytest.raises(TypeError, match="unexpected"):
        indexer_call_specs(**_fp4_arguments(), bogus=1)
    with pytest.raises(ValueError, match="multiple of 32"):
        per_1x32_call_specs(np.zeros((4, 48), np.float32))


def test_per_1x32_argument_tensors() -> None:
    assert [str(s) for s in per_1x32_call_specs(np.zeros((4, 128), ml_dtypes.bfloat16))] == ["x: bfloat16[4, 128]", "('shuffle', False)"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_aiter_is_skipped_with_a_precise_reason(device: str) -> None:
    status = kernels.get("aiter", device).available()
    if status:
        pytest.skip("this machine runs AITER: the GPU tier checks it")
    assert any(word in status.reason for word in ("ROCm", "gfx950", "'aiter'", "'torch'")), status.reason


def test_aiter_on_the_cpu_is_refused_without_importing_torch() -> None:
    """`--device cpu` settles it: the refusal names the device and leaves torch unimported (its
    import cost each `mxgate check --backend aiter` run on a CPU machine about a second)."""
    pytest.importorskip("torch", reason="without torch the refusal names the missing package first")
    probe = ("import sys; from mxgate import kernels; s = kernels.get('aiter', 'cpu').available(); "
             "print(bool(s), 'torch' in sys.modules); print(s.reason)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    first, reason = done.stdout.splitlines()[:2]
    assert first == "False False", done.stdout
    assert "--device cuda" in reason and "ROCm" in reason, reason


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_vllm_is_skipped_with_a_precise_reason(device: str) -> None:
    status = kernels.get("vllm-triton", device).available()
    assert not status, "no vLLM op is wired into the adapter yet; it must not claim to run"
    assert any(word in status.reason for word in ("'vllm'", "NVIDIA GPU", "sm_100", "'torch'", "'triton'")), status.reason


@pytest.mark.parametrize("name", ["ml_dtypes", "torch", "triton-mxfp", "torchao", "triton-dot-scaled", "aiter", "vllm-triton"])
def test_a_missing_package_makes_a_backend_unavailable(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda module, *a: None if module in ("ml_dtypes", "torch") else real(module, *a))
    status = kernels.get(name).available()
    assert not status and "is not installed" in status.reason, status


# ---- the adapter held to AITER's real declaration (aiter/ops/cache.py) and host checks ----------

import os
from pathlib import Path

from mxgate.kernels.aiter import fit_call, read_signature, torch_dtype_names
from mxgate.kernels.base import OutsideContract

_SNAPSHOT_DECL = '''
@compile_ops("module_cache", develop=True)
def indexer_qk_rope_quant_and_cache(
    q, q_out, weights, weights_out, k, kv_cache, slot_mapping, norm_weight, norm_bias, positions,
    cos_cache, sin_cache, epsilon: float, quant_block_size: int, scale_fmt: str, weights_scale: float,
    preshuffle: bool = False, is_neox: bool = True,
) -> None: ...
'''
_HOST = '''void indexer_qk_rope_quant_and_cache(aiter_tensor_t& q, bool is_neox)
{
    AITER_CHECK(head_dim == 128, "indexer fused qk cache only supports head_dim=128");
    AITER_CHECK(q_out.dtype() == AITER_DTYPE_fp8,
                "q_out dtype must be " "fp8");
    if(preshuffle) { AITER_CHECK(cache_block_size % 16 == 0, "preshuffle requires cache_block_size to be a multiple of 16, got ", cache_block_size); }
}
void other_op() { AITER_CHECK(x, "not this op"); }
'''


def _tree(tmp_path: Path, decl: str = _SNAPSHOT_DECL, host: str | None = _HOST) -> Path:
    (tmp_path / "aiter" / "ops").mkdir(parents=True)
    (tmp_path / "aiter" / "ops" / "cache.py").write_text(decl)
    if host is not None:
        (tmp_path / "csrc" / "kernels").mkdir(parents=True)
        (tmp_path / "csrc" / "kernels" / "cache_kernels.cu").write_text(host)
    return tmp_path


def _fp8_arguments() -> dict[str, object]:
    args = _fp4_arguments()
    args.update(q_scale_out=None, kv_cache_scale=None, compute_all_q_rope=None, quant_block_size=128,
                q_out=np.zeros((8, 32, 128), np.uint8), weights_out=np.zeros((8, 32), np.float32),
                kv_cache=np.zeros((3, 64, 132), np.uint8))
    return args


def test_signature_and_host_checks_are_read_from_the_tree(tmp_path: Path) -> None:
    sig = read_signature(_tree(tmp_path))
    assert sig.names[-2:] == ("preshuffle", "is_neox") and not sig.fp4_mode
    assert dict(sig.params)["is_neox"] and not dict(sig.params)["weights_scale"]
    # only the op's own host function, string pieces joined, message prefix without the value
    assert sig.host_checks == ("indexer fused qk cache only supports head_dim=128", "q_out dtype must be fp8",
                               "preshuffle requires cache_block_size to be a multiple of 16, got ")
    assert read_signature(_tree(tmp_path / "wheel", host=None)).host_checks == ()


def test_fp8_call_fits_the_snapshot_and_fp4_or_compute_all_is_outside_it(tmp_path: Path) -> None:
    sig = read_signature(_tree(tmp_path))
    fitted = fit_call(_fp8_arguments(), sig)
    assert tuple(fitted) == sig.names  # every parameter, in the declaration's order
    with pytest.raises(OutsideContract, match="no parameter q_scale_out, kv_cache_scale .FP8 mode only"):
        fit_call(_fp4_arguments() | {"compute_all_q_rope": None}, sig)
    with pytest.raises(OutsideContract, match="no parameter compute_all_q_rope"):
        fit_call(_fp8_arguments() | {"compute_all_q_rope": True}, sig)
    args = _fp8_arguments()
    del args["epsilon"]
    with pytest.raises(TypeError, match="missing required argument.s.: epsilon"):
        fit_call(args, sig)


def test_dtypes_passed_satisfy_the_host_dtype_checks() -> None:
    fp8 = torch_dtype_names(_fp8_arguments())
    assert fp8["q_out"] == "float8_e4m3fn" and fp8["weights_out"] == "float32" and fp8["kv_cache"] == "uint8"
    fp4 = torch_dtype_names(_fp4_arguments())
    assert fp4["q_out"] == "uint8" and fp4["weights_out"] == "bfloat16"


_SRC = os.environ.get("MXGATE_AITER_SRC", "").strip()
needs_checkout = pytest.mark.skipif(not _SRC, reason="MXGATE_AITER_SRC is not set (no AITER checkout)")


@needs_checkout
def test_adapter_call_fits_the_checkouts_declaration() -> None:
    sig = read_signature(Path(_SRC))
    ours = [name for name in sig.names]
    from mxgate.kernels.aiter import INDEXER_ARGS

    assert [n for n in INDEXER_ARGS if n in sig.names] == ours  # same order
    assert tuple(fit_call(_fp8_arguments(), sig)) == sig.names
    if sig.fp4_mode:
        assert tuple(fit_call(_fp4_arguments(), sig)) == tuple(n for n in sig.names if n in _fp4_arguments())
    else:
        with pytest.raises(OutsideContract):
            fit_call(_fp4_arguments(), sig)


@needs_checkout
def test_spec_host_rejections_are_the_checkouts_messages() -> None:
    """The messages mxgate's oracle raises for the FP8 mode are the host wrapper's own."""
    checks = read_signature(Path(_SRC)).host_checks
    for message in ("indexer fused qk cache only supports head_dim=128",
                    "indexer fused qk cache only supports rope_dim=64",
                    "indexer fused qk cache only supports quant_block_size == head_dim",
                    "preshuffle requires cache_block_size to be a multiple of 16, got ",
                    "q_out dtype must be fp8", "weights_out dtype must be fp32"):
        assert message in checks


def test_scale_inputs_hold_every_power_of_two_edge_and_the_nan_payloads() -> None:
    """The gate's amax inputs for the scale modes reach the two AITER findings below: the one
    amax whose quotient by 4 rounds across 2^-126, and NaNs whose payload carries into the sign."""
    from mxgate.inputs.boundaries import scale_inputs
    from mxgate.inputs.bits import NAN_PAYLOADS

    u = set(scale_inputs().view(np.uint32).tolist())
    assert {0x017FFFFF, 0x7FE00000, 0x7FFFFFFF} <= u
    assert {p for p in NAN_PAYLOADS if p < 0x80000000} <= u
    assert all((1 << 23) * k + d in u for k in range(1, 255) for d in (-1, 0, 1))


@needs_checkout
def test_the_gate_sees_aiters_round_down_and_even_scale_findings() -> None:
    """AITER's f32_to_mx_e8m0_scale, run here: RoundDown gives 0x01 for amax 0x017FFFFF and Even
    gives 0x00 for the NaN 0x7FE00000 (docs/findings/aiter.md 4b); the profiles say 0x00 and 0xFF,
    and both are known findings the gate names."""
    from mxgate import oracle
    from mxgate.conformance.known_findings import KNOWN_FINDINGS
    from mxgate.op_table import OpName

    backend = kernels.get("aiter-reference")
    for op, pattern, theirs, ours in ((OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN, 0x017FFFFF, 0x01, 0x00),
                                      (OpName.AITER_F32_TO_MX_E8M0_SCALE_EVEN, 0x7FE00000, 0x00, 0xFF)):
        amax = np.array([pattern], np.uint32).view(np.float32)
        assert int(np.asarray(backend.op(op).run(amax))[0]) == theirs, op
        assert int(oracle.e8m0_scale(amax, backend.op(op).profile)[0]) == ours, op
        assert ("aiter-reference", op) in KNOWN_FINDINGS


@needs_checkout
def test_fp4_quant_e2m1_with_e8m0_gives_a_nan_block_byte_0() -> None:
    """AITER's fp4_quant_e2m1_with_e8m0, run here (docs/findings/aiter.md 5c): a block whose amax
    is a NaN gets scale byte 0x00 where argmin's rule gives 0xFF; an Inf amax gets 0xFF. The gate's
    nonfinite-blocks config holds these blocks, and the finding is known."""
    from mxgate import oracle
    from mxgate.conformance.known_findings import KNOWN_FINDINGS
    from mxgate.inputs.boundaries import nonfinite_blocks
    from mxgate.op_table import OpName

    op = OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0
    x = nonfinite_blocks()
    nan = np.isnan(x).any(axis=1)
    assert nan.sum() == 4 and (~nan).sum() == 2
    backend = kernels.get("aiter-reference")
    _, scale = backend.op(op).run(x)
    assert (oracle.quantize_mx(x, backend.op(op).profile)[1][:, 0] == 0xFF).all()
    assert np.array_equal(scale[:, 0], np.where(nan, 0x00, 0xFF)), scale[:, 0]
    assert ("aiter-reference", op) in KNOWN_FINDINGS


@needs_checkout
def test_ref_quant_mxfp4_zero_quotient_misses_the_zero_group_fill() -> None:
    """AITER's ref_quant_mxfp4, run here (docs/findings/aiter.md 5b): a block whose amax / 6
    (RoundUp) or amax / 4 (Ceil) rounds to 0 in float32 gets byte 0x00, because the 2^-126 fill
    is keyed on amax == 0; the zero block and every other subnormal amax get 0x01, as the
    profiles say. The expected bytes come from that rule (NumPy's float32 division), not from
    AITER; the gate names the RoundUp cell's finding."""
    from mxgate import oracle
    from mxgate.conformance.known_findings import KNOWN_FINDINGS
    from mxgate.op_table import OpName

    bits = np.array([0, 1, 2, 3, 4, 5, 0x00400000, 0x00FFFFFF, 0x01000000, 0x01400000], np.uint32)
    amax = bits.view(np.float32)
    x = np.zeros((bits.size, 32), np.float32)
    x[:, 7] = -amax  # the amax's sign does not matter
    backend = kernels.get("aiter-reference")
    for op, divisor in ((OpName.MX_QUANTIZE, 6), (OpName.AITER_REF_QUANT_MXFP4_CEIL, 4)):
        packed, scale = backend.op(op).run(x)
        ours_packed, ours = oracle.quantize_mx(x, backend.op(op).profile)
        zero_quotient = (amax > 0) & (amax / np.float32(divisor) == 0)
        assert zero_quotient.sum() == (3 if divisor == 6 else 2)
        assert (ours[:, 0] == 0x01).all(), op
        assert np.array_equal(scale[:, 0], np.where(zero_quotient, 0x00, ours[:, 0])), (op, scale[:, 0])
        assert np.array_equal(packed, ours_packed), op  # every element is 0 under either scale
    assert ("aiter-reference", OpName.MX_QUANTIZE) in KNOWN_FINDINGS
