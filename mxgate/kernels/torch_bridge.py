"""NumPy <-> torch conversion for adapters, with the dtype mapping spelled out once.

bf16 data travels as ``ml_dtypes.bfloat16`` arrays or raw uint16 bit patterns; an adapter names
which arguments are bf16 so raw uint16 is reinterpreted, never converted numerically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_NUMPY_TO_TORCH = {
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "bfloat16": "bfloat16",
    "bool": "bool",
}


@dataclass(frozen=True)
class TensorSpec:
    """What an adapter hands the kernel for one argument: shape, torch dtype, contiguity."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    contiguous: bool = True

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"


def torch_dtype_name(array: np.ndarray, bf16: bool = False) -> str:
    if bf16:
        if array.dtype.name not in ("bfloat16", "uint16"):
            raise TypeError(f"a bf16 argument must be ml_dtypes.bfloat16 or uint16 bit patterns, got {array.dtype}")
        return "bfloat16"
    if array.dtype.name not in _NUMPY_TO_TORCH:
        raise TypeError(f"no torch dtype for numpy dtype {array.dtype}")
    return _NUMPY_TO_TORCH[array.dtype.name]


def spec_of(name: str, array: np.ndarray, bf16: bool = False) -> TensorSpec:
    return TensorSpec(name, tuple(int(s) for s in array.shape), torch_dtype_name(array, bf16), bool(array.flags.c_contiguous))


def to_torch(array: np.ndarray, device: str, bf16: bool = False, copy: bool = False) -> Any:
    """A torch tensor on ``device`` holding the same bytes (bf16 reinterpreted from uint16).

    copy: never share the array's memory, even on the CPU (a kernel writing into the tensor
    then leaves the caller's array as it was)."""
    import torch

    data = np.array(array, copy=True, order="C") if copy else np.ascontiguousarray(array)
    if bf16:
        return torch.from_numpy(data.view(np.uint16).view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(data).to(device)


def to_numpy(tensor: Any, bf16_as_uint16: bool = True) -> np.ndarray:
    import torch

    host = tensor.detach().cpu().contiguous()
    if host.dtype == torch.bfloat16:
        raw = host.view(torch.int16).numpy().view(np.uint16)
        return raw if bf16_as_uint16 else raw.view(np.dtype("bfloat16"))
    return host.numpy()
