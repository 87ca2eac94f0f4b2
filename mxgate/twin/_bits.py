"""Bit views of float32 tensors as int32 (torch has no full uint32 arithmetic on every device).

A float32 pattern u lives in an int32 tensor; ``srl`` is the logical right shift that uint32
would give, and magnitudes (u & 0x7FFFFFFF) are non-negative, so their signed order is the
unsigned one.
"""

from __future__ import annotations

import torch

SIGN32 = -0x80000000  # 0x80000000 as int32
ABS32 = 0x7FFFFFFF
EXP32 = 0x7F800000
MANT32 = 0x007FFFFF
QUIET = 0x00400000
DEFAULT_NAN = 0x7FC00000


def f32_bits(x: torch.Tensor) -> torch.Tensor:
    """int32 view of a float32 tensor's bit patterns (no copy)."""
    return x.contiguous().view(torch.int32)


def bits_f32(u: torch.Tensor) -> torch.Tensor:
    """float32 view of int32 bit patterns (no copy)."""
    return u.contiguous().view(torch.float32)


def srl(u: torch.Tensor, k: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int32 patterns by k in [1, 31]."""
    return (u >> k) & ((1 << (32 - k)) - 1)


def as_i32(values: int) -> int:
    """A uint32 constant as the int32 with the same bits."""
    return values - (1 << 32) if values >= 1 << 31 else values


def u32_to_i32(u: torch.Tensor) -> torch.Tensor:
    """int64 tensor of values in [0, 2^32) -> int32 with the same bits."""
    return torch.where(u >= 1 << 31, u - (1 << 32), u).to(torch.int32)


def is_nan_bits(u: torch.Tensor) -> torch.Tensor:
    return (u & ABS32) > EXP32


def pow2_f32(exponent: torch.Tensor) -> torch.Tensor:
    """2**e as float32 for integer exponents in [-149, 127], built from bits (exact)."""
    e = exponent.to(torch.int64)
    if e.numel() and (int(e.min()) < -149 or int(e.max()) > 127):
        raise ValueError("exponent must lie in [-149, 127] for a float32 power of two")
    normal = torch.clamp(e + 127, 1, 254) << 23
    subnormal = torch.ones_like(e) << torch.clamp(e + 149, 0, 22)
    return bits_f32(torch.where(e >= -126, normal, subnormal).to(torch.int32))


def quiet_or_default(u: torch.Tensor) -> torch.Tensor:
    """The NaN x86 arithmetic leaves behind: an input NaN quieted, else +qNaN (0x7FC00000)."""
    return torch.where(is_nan_bits(u), u | QUIET, torch.full_like(u, DEFAULT_NAN))


INDEFINITE = as_i32(0xFFC00000)


def x86_nan(result: torch.Tensor, *operands: torch.Tensor) -> torch.Tensor:
    """result with each NaN as x86 NumPy array arithmetic leaves it: the first NaN operand
    quieted, else the "indefinite" NaN 0xFFC00000 (inf - inf, 0 * inf); CUDA would give its
    canonical NaN instead."""
    bits = f32_bits(result)
    pick = torch.full_like(bits, INDEFINITE)
    for operand in reversed(operands):
        u = torch.broadcast_to(f32_bits(operand), bits.shape)
        pick = torch.where(is_nan_bits(u), u | QUIET, pick)
    return bits_f32(torch.where(is_nan_bits(bits), pick, bits))
