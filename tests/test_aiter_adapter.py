"""The AITER and vLLM adapters: skipped here with a precise reason, and the exact argument
tensors the AITER adapter would pass (no AITER result is claimed)."""

from __future__ import annotations

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
