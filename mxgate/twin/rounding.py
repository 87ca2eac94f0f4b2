"""Round-to-grid as table lookup on torch tensors: the oracle's ``rounding`` engine.

The table is built the oracle's way (one representative per class of sign, exponent, kept
mantissa bits and sticky bit, rounded in float64 where every value is exact), from the same
grid and tie rule, on the tensor's device. ``lookup`` forms the same index from each float32
pattern with integer operations only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mxgate.twin._bits import bits_f32, srl, u32_to_i32

CHUNK = 1 << 26  # elements per pass: bounds the int64 index temporaries on large inputs


@dataclass(frozen=True)
class Classes:
    index: torch.Tensor  # int64 position on the ascending magnitude grid
    negative: torch.Tensor
    is_nan: torch.Tensor
    is_inf: torch.Tensor
    overflow: torch.Tensor
    bits: torch.Tensor  # int32 patterns of the representatives


def representatives(keep_bits: int, device: torch.device) -> torch.Tensor:
    """int32 patterns: top ``keep_bits`` bits of each class, then the sticky bit (0 or 1)."""
    shift = 32 - keep_bits
    top = torch.arange(1 << keep_bits, dtype=torch.int64, device=device) << shift
    reps = torch.stack([top, top | 1], dim=1).reshape(-1)
    return u32_to_i32(reps)


def classify(keep_bits: int, grid: torch.Tensor, overflow_next: float, tie: str) -> Classes:
    """Round every representative's magnitude to ``grid`` (ascending float64) under ``tie``."""
    bits = representatives(keep_bits, grid.device)
    values = bits_f32(bits).to(torch.float64)
    negative = bits < 0
    is_nan = torch.isnan(values)
    is_inf = torch.isinf(values)
    magnitude = torch.where(is_nan | is_inf, torch.zeros_like(values), values.abs())
    ext = torch.cat([grid, torch.tensor([overflow_next], dtype=torch.float64, device=grid.device)])
    upper = torch.clamp(torch.searchsorted(ext, magnitude, right=False), 1, ext.numel() - 1)
    lower = upper - 1
    on_grid = ext[upper] == magnitude
    mid = (ext[lower] + ext[upper]) / 2  # exact: grid values are short binary fractions
    above = magnitude > mid
    tie_point = magnitude == mid
    if tie == "even":
        tie_up = (upper % 2) == 0
    elif tie == "zero":
        tie_up = torch.zeros_like(tie_point)
    elif tie == "away":
        tie_up = torch.ones_like(tie_point)
    elif tie == "down":
        tie_up = negative
    else:
        raise ValueError(f"tie must be one of 'even', 'zero', 'away', 'down'; got {tie!r}")
    index = torch.where(on_grid | above | (tie_point & tie_up), upper, lower)
    beyond = magnitude > ext[-1]
    overflow = (index >= grid.numel()) | beyond
    return Classes(torch.clamp(index, max=grid.numel() - 1), negative, is_nan, is_inf, overflow, bits)


def table_index(u: torch.Tensor, keep_bits: int) -> torch.Tensor:
    """The oracle's lookup index of int32 patterns: kept bits, and the sticky bit below them."""
    shift = 31 - keep_bits
    index = srl(u, shift)
    return index | ((u & ((1 << shift) - 1)) != 0).to(torch.int32)


def lookup(u: torch.Tensor, table: torch.Tensor, keep_bits: int) -> torch.Tensor:
    """Apply a rounding table (on u's device) to int32 patterns ``u`` of any shape."""
    flat = u.reshape(-1)
    out = torch.empty(flat.shape, dtype=table.dtype, device=u.device)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        out[start:start + part.numel()] = table[table_index(part, keep_bits)]
    return out.reshape(u.shape)
