"""Round-to-grid as table lookup on torch tensors: the oracle's ``rounding`` engine on a device.

The tables are the oracle's own (``oracle.formats.e2m1.table``, ``oracle.formats.e4m3.table``),
copied to the device; ``lookup`` forms the oracle's index (kept bits, then the sticky bit) from
each float32 pattern with integer operations only.
"""

from __future__ import annotations

import torch

from mxgate.twin._bits import srl

CHUNK = 1 << 26  # elements per pass: bounds the int64 index temporaries on large inputs


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
