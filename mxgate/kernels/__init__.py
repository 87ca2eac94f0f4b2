"""One registry of every implementation under test (backends), looked up by name.

Adapters load lazily: importing mxgate never imports torch, triton or a vendor package.
"""

from __future__ import annotations

import importlib

from mxgate.kernels.base import Availability, Backend, Op

# name -> (module, class, constructor keyword arguments)
_REGISTRY: dict[str, tuple[str, str, dict[str, object]]] = {
    "oracle": ("mxgate.kernels.oracle_backend", "OracleBackend", {}),
    "ml_dtypes": ("mxgate.kernels.codecs", "MlDtypesBackend", {}),
    "torch": ("mxgate.kernels.codecs", "TorchCastBackend", {}),
    "triton-mxfp": ("mxgate.kernels.codecs", "TritonMxfpBackend", {}),
    "torchao": ("mxgate.kernels.codecs", "TorchaoBackend", {}),
    "triton-dot-scaled": ("mxgate.kernels.triton_dot_scaled", "TritonDotScaledBackend", {}),
    "sglang-triton": ("mxgate.kernels.sglang_triton", "SglangTritonBackend", {}),
    "sglang-triton-rne": ("mxgate.kernels.sglang_triton", "SglangTritonBackend", {"rne": True}),
    "aiter": ("mxgate.kernels.aiter", "AiterBackend", {}),
    "vllm-triton": ("mxgate.kernels.vllm_triton", "VllmTritonBackend", {}),
}


def names() -> list[str]:
    """Every registered backend name (available here or not)."""
    return list(_REGISTRY)


def get(name: str, device: str = "cpu") -> Backend:
    """The backend called ``name``, set up for ``device`` ('cpu' or 'cuda')."""
    if name not in _REGISTRY:
        raise ValueError(f"backend must be one of {', '.join(_REGISTRY)}; got {name!r}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    module_name, class_name, kwargs = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:  # the adapter module itself is missing: report, do not crash
        return _Missing(name, f"adapter module {module_name} failed to import: {error}")
    backend = getattr(module, class_name)(device=device, **kwargs)
    backend.name = name
    return backend


def available(device: str = "cpu") -> list[str]:
    """Names of the backends that can run here."""
    return [name for name in _REGISTRY if get(name, device).available()]


class _Missing(Backend):
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self._reason = reason

    def available(self) -> Availability:
        return Availability(False, self._reason)

    def ops(self) -> dict[str, Op]:
        return {}


__all__ = ["Availability", "Backend", "Op", "available", "get", "names"]
