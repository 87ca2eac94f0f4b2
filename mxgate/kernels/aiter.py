"""AMD AITER: the HIP op ``indexer_qk_rope_quant_and_cache`` (FP8 and FP4 modes),
``per_1x32_f4_quant_hip`` and the FlyDSL scorers ``flydsl_pa_mqa_logits_fp4`` / ``_prefill``.

Runs only on ROCm gfx950 with the ``aiter`` package. Everywhere else ``available()`` says why
not. The argument tensors the adapter would pass are built by pure functions
(``indexer_call_specs``, ...) so their shapes, dtypes and layouts are tested on any machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.kernels.base import Availability, Backend, Op, requires
from mxgate.kernels.torch_bridge import TensorSpec, spec_of, to_numpy, to_torch

# Arguments of indexer_qk_rope_quant_and_cache in AITER's order (PR #5484 adds the last three).
INDEXER_ARGS = (
    "q", "q_out", "weights", "weights_out", "k", "kv_cache", "slot_mapping", "norm_weight", "norm_bias",
    "positions", "cos_cache", "sin_cache", "epsilon", "quant_block_size", "scale_fmt", "weights_scale",
    "preshuffle", "is_neox", "compute_all_q_rope", "q_scale_out", "kv_cache_scale",
)
_BF16_ARGS = {"q", "k", "weights", "weights_out", "cos_cache", "sin_cache"}
_OUTPUTS = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")
_SCALARS = {"epsilon", "quant_block_size", "scale_fmt", "weights_scale", "preshuffle", "is_neox", "compute_all_q_rope"}


def _is_bf16(name: str, array: np.ndarray) -> bool:
    return name in _BF16_ARGS and array.dtype.name in ("bfloat16", "uint16")


def indexer_call_specs(**kwargs: Any) -> list[TensorSpec | tuple[str, object]]:
    """The exact arguments, in order, the adapter passes to AITER's op: a TensorSpec per tensor,
    (name, value) per scalar; optional FP4 outputs omitted when absent (FP8 mode)."""
    unknown = set(kwargs) - set(INDEXER_ARGS)
    if unknown:
        raise TypeError(f"unexpected argument(s) {sorted(unknown)} for indexer_qk_rope_quant_and_cache")
    specs: list[TensorSpec | tuple[str, object]] = []
    for name in INDEXER_ARGS:
        if name not in kwargs or kwargs[name] is None:
            if name in ("q_scale_out", "kv_cache_scale", "compute_all_q_rope", "preshuffle", "is_neox"):
                continue
            raise TypeError(f"indexer_qk_rope_quant_and_cache needs argument {name!r}")
        value = kwargs[name]
        if name in _SCALARS:
            specs.append((name, value))
        else:
            if not isinstance(value, np.ndarray):
                raise TypeError(f"{name} must be a numpy array, got {type(value).__name__}")
            specs.append(spec_of(name, value, bf16=_is_bf16(name, value)))
    return specs


def per_1x32_call_specs(x: np.ndarray) -> list[TensorSpec | tuple[str, object]]:
    """per_1x32_f4_quant_hip(x, scale=None, quant_dtype=fp4x2, shuffle=False) on a 2-D input."""
    if x.ndim != 2 or x.shape[1] % 32:
        raise ValueError(f"x must be 2-D with a multiple of 32 columns, got shape {x.shape}")
    return [spec_of("x", x, bf16=x.dtype.name in ("bfloat16", "uint16")), ("shuffle", False)]


def _gfx_arch() -> str | None:
    import torch

    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_properties(0).gcnArchName).split(":")[0]


class AiterBackend(Backend):
    description = "AMD AITER HIP op indexer_qk_rope_quant_and_cache, per_1x32_f4_quant_hip, FlyDSL pa_mqa_logits_fp4 (gfx950)"

    def available(self) -> Availability:
        missing = requires("torch")
        if not missing:
            return missing
        import torch

        if getattr(torch.version, "hip", None) is None:
            return Availability(False, "torch is not a ROCm build (torch.version.hip is None); AITER's HIP ops need ROCm on gfx950")
        if self.device != "cuda":
            return Availability(False, "AITER ops run on the GPU only: use --device cuda")
        arch = _gfx_arch()
        if arch != "gfx950":
            return Availability(False, f"AITER FP4 ops need gfx950; this GPU is {arch or 'absent'}")
        return requires("aiter")

    def ops(self) -> dict[str, Op]:
        return {
            "indexer_qk_rope_quant_and_cache": Op("indexer_qk_rope_quant_and_cache", "gfx950", self._indexer),
            "mx.quantize": Op("mx.quantize", "aiter-per1x32", self._per_1x32),
            "pa_mqa_logits_fp4.decode": Op("pa_mqa_logits_fp4.decode", "gfx950", self._decode),
            "pa_mqa_logits_fp4.prefill": Op("pa_mqa_logits_fp4.prefill", "gfx950", self._prefill),
        }

    def _indexer(self, **kwargs: Any) -> dict[str, np.ndarray]:
        import aiter

        indexer_call_specs(**kwargs)  # validates names and types before anything moves
        tensors = {
            name: (to_torch(value, "cuda", bf16=_is_bf16(name, value)) if isinstance(value, np.ndarray) else value)
            for name, value in kwargs.items()
            if value is not None
        }
        aiter.indexer_qk_rope_quant_and_cache(**tensors)
        return {name: to_numpy(tensors[name]) for name in _OUTPUTS if name in tensors}

    def _per_1x32(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from aiter.ops.quant import per_1x32_f4_quant_hip

        per_1x32_call_specs(x)
        packed, scale = per_1x32_f4_quant_hip(to_torch(x, "cuda", bf16=x.dtype.name in ("bfloat16", "uint16")), shuffle=False)
        return to_numpy(packed.view(__import__("torch").uint8)), to_numpy(scale.view(__import__("torch").uint8))

    def _decode(self, **kwargs: Any) -> np.ndarray:
        from aiter.ops.flydsl import flydsl_pa_mqa_logits_fp4

        return to_numpy(flydsl_pa_mqa_logits_fp4(**_scorer_tensors(kwargs)))

    def _prefill(self, **kwargs: Any) -> np.ndarray:
        from aiter.ops.flydsl import flydsl_pa_mqa_logits_fp4_prefill

        return to_numpy(flydsl_pa_mqa_logits_fp4_prefill(**_scorer_tensors(kwargs)))


def _scorer_tensors(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (to_torch(value, "cuda", bf16=(name == "weights" and value.dtype.name in ("bfloat16", "uint16"))) if isinstance(value, np.ndarray) else value)
        for name, value in kwargs.items()
    }
