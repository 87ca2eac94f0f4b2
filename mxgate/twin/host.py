"""Host-side views of torch arguments, so that the oracle's own checks (same rules, same
messages) validate a twin call without moving the large tensors off the device.

    stand_in(t)         zero-stride NumPy array of t's shape and dtype (checks read only those)
    output_stand_in(t)  writeable C-contiguous array of t's shape (pages mapped lazily)
    host_copy(t)        the tensor's values on the host (small tensors whose values are checked)
    device_of(tensors)  the one device every tensor argument is on
"""

from __future__ import annotations

import numpy as np
import torch

try:
    import ml_dtypes

    _NP_OF_TORCH = {torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}
    for _t, _n in (("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fnuz", "float8_e4m3fnuz"),
                   ("float8_e5m2", "float8_e5m2"), ("float8_e5m2fnuz", "float8_e5m2fnuz"),
                   ("float8_e8m0fnu", "float8_e8m0fnu")):
        if hasattr(torch, _t) and hasattr(ml_dtypes, _n):
            _NP_OF_TORCH[getattr(torch, _t)] = np.dtype(getattr(ml_dtypes, _n))
except ImportError:  # pragma: no cover - ml_dtypes is optional
    _NP_OF_TORCH = {}
_NP_OF_TORCH.update({torch.uint16: np.dtype(np.uint16), torch.float16: np.dtype(np.float16),
                     torch.float32: np.dtype(np.float32), torch.int64: np.dtype(np.int64),
                     torch.int32: np.dtype(np.int32), torch.uint8: np.dtype(np.uint8),
                     torch.int16: np.dtype(np.int16), torch.float64: np.dtype(np.float64)})


def np_dtype(t: torch.Tensor, name: str) -> np.dtype:
    try:
        return _NP_OF_TORCH[t.dtype]
    except KeyError:
        raise TypeError(f"{name} has dtype {t.dtype}, which the op does not take") from None


def stand_in(t: object, name: str) -> object:
    """A zero-stride NumPy array of t's shape and dtype (the checks read only those)."""
    if not isinstance(t, torch.Tensor):
        return t  # the oracle's check names the wrong type
    base = np.zeros(1, dtype=np_dtype(t, name))
    return np.lib.stride_tricks.as_strided(base, shape=tuple(t.shape), strides=(0,) * t.dim(), writeable=False)


def host_copy(t: object, name: str) -> object:
    """The values of t as a NumPy array on the host (bf16 as ml_dtypes.bfloat16)."""
    if not isinstance(t, torch.Tensor):
        return t
    np_dtype(t, name)
    if t.dtype == torch.bfloat16:
        return t.detach().cpu().view(torch.int16).numpy().view(_NP_OF_TORCH[torch.bfloat16])
    return t.detach().cpu().numpy()


def output_stand_in(t: object, name: str) -> object:
    """A writeable C-contiguous NumPy array of t's shape and dtype (untouched: np.empty maps
    pages lazily), for the checks of a caller's output tensor."""
    if not isinstance(t, torch.Tensor):
        return t
    if not t.is_contiguous():
        raise ValueError(f"{name} must be C-contiguous and writeable (the op writes into it in place)")
    return np.empty(tuple(t.shape), dtype=np_dtype(t, name))


def device_of(tensors: dict[str, object], first_name: str = "q") -> torch.device:
    """The device of ``first_name`` (or of the first tensor); every other tensor must be on it."""
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, torch.Tensor)}
    if not devices:
        raise TypeError(f"{first_name} must be a torch tensor")
    first = devices.get(first_name, next(iter(devices.values())))
    for name, device in devices.items():
        if device != first:
            raise ValueError(f"{name} must be on the device of {first_name} ({first}), got {device}")
    return first
