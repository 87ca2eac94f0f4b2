"""Input checks of the twin: the oracle's rules and messages, for torch tensors."""

from __future__ import annotations

import torch

from mxgate.oracle.arguments import check_choice, check_group

__all__ = ["as_float32", "as_uint8", "check_choice", "check_group", "device_of"]


def as_float32(x: object, name: str) -> torch.Tensor:
    """x as a float32 tensor; bf16/fp16 convert exactly, anything lossy is refused."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor of float32 (or bfloat16/float16), got {type(x).__name__}")
    if x.dtype == torch.float32:
        return x
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.to(torch.float32)
    raise TypeError(
        f"{name} must have dtype float32, bfloat16 or float16, got {x.dtype}; "
        "convert explicitly (a float64 -> float32 rounding is the caller's decision)"
    )


def as_uint8(x: object, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor of uint8, got {type(x).__name__}")
    if x.dtype != torch.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {x.dtype}")
    return x


def device_of(device: str | torch.device | None) -> torch.device:
    return torch.device("cpu" if device is None else device)
