"""E8M0 scale bytes on torch tensors: value 2^(e - 127), bytes 0 and 255 by the profile."""

from __future__ import annotations

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.twin._bits import pow2_f32
from mxgate.twin._check import as_uint8


def decode_e8m0(codes: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """e8m0 bytes -> float32 scale values under the profile's byte-0 / byte-255 rules."""
    p = _profiles.get(profile)
    codes = as_uint8(codes, "codes")
    values = pow2_f32(torch.clamp(codes.to(torch.int64), max=254) - 127)
    special = float("inf") if p.byte255 == "inf" else float("nan")
    values = torch.where(codes == 0xFF, torch.full_like(values, special), values)
    if p.byte0 == "zero":
        values = torch.where(codes == 0, torch.zeros_like(values), values)
    return values
