"""BF16 on torch tensors: float32 rounded to nearest even at bit 16, NaN by ``bf16_nan``."""

from __future__ import annotations

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.twin._bits import ABS32, EXP32, bits_f32, f32_bits, srl
from mxgate.twin._check import as_float32


def bf16_bits(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """float32 -> bf16 bit patterns (torch.uint16), round to nearest even; NaN by ``bf16_nan``."""
    return bf16_bits_i32(x, profile).to(torch.int16).view(torch.uint16)


def bf16_bits_i32(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """bf16_bits as int32 values in [0, 65535] (torch's uint16 has few operations)."""
    p = _profiles.get(profile)
    u = f32_bits(as_float32(x, "x"))
    odd = srl(u, 16) & 1
    rounded = srl(u + 0x7FFF + odd, 16)  # int32 wraps like the oracle's uint32 sum
    nan = (u & ABS32) > EXP32
    if p.bf16_nan == "all_ones":
        nan_bits = torch.full_like(u, 0xFFFF)
    elif p.bf16_nan == "canonical":
        nan_bits = torch.full_like(u, 0x7FFF)
    else:
        nan_bits = (srl(u, 16) & 0x8000) | 0x7FC0
    return torch.where(nan, nan_bits, rounded)


def bf16_to_f32(bits: torch.Tensor) -> torch.Tensor:
    """bf16 bit patterns (int32 in [0, 65535], int16 or uint16) -> float32 (exact)."""
    if not isinstance(bits, torch.Tensor) or bits.dtype not in (torch.int32, torch.int16, torch.uint16):
        raise TypeError("bits must be a torch tensor of bf16 bit patterns (int32, int16 or uint16)")
    wide = bits.to(torch.int32) & 0xFFFF if bits.dtype != torch.uint16 else bits.view(torch.int16).to(torch.int32) & 0xFFFF
    return bits_f32(wide << 16)


def round_bf16(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """float32 values rounded to the nearest bf16 (returned as float32)."""
    return bf16_to_f32(bf16_bits_i32(x, profile))
