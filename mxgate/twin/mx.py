"""MX block quantization on torch tensors: the oracle's ``quantize_mx`` / ``dequantize_mx``.

``quantize_mx`` here is the reference form (plain tensor operations, any device); on CUDA the
fused Triton kernel of ``mxgate.twin.fused`` computes the same bytes in one pass.
"""

from __future__ import annotations

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.twin._bits import ABS32, EXP32, bits_f32, f32_bits
from mxgate.twin._check import as_float32, as_uint8, check_group
from mxgate.twin.formats import e2m1
from mxgate.twin.formats.e8m0 import decode_e8m0
from mxgate.twin.scales import e8m0_scale


def block_amax(groups: torch.Tensor, ignore_nan: bool) -> torch.Tensor:
    """[n, group] float32 -> [n] float32: the largest magnitude bits (a NaN's when present,
    unless ``ignore_nan``, where NaN elements count as 0)."""
    magnitude = f32_bits(groups) & ABS32
    if ignore_nan:
        magnitude = torch.where(magnitude > EXP32, torch.zeros_like(magnitude), magnitude)
    return bits_f32(magnitude.amax(dim=1))


def quantize_mx(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950", group: int = 32
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., N] (float32 or bf16) -> (packed uint8 [..., N/2], e8m0 uint8 [..., N/group])."""
    p = _profiles.get(profile)
    x32 = as_float32(x, "x")
    if x32.dim() == 0:
        raise ValueError("x must have at least one dimension")
    check_group(x32.shape[-1], group, "x")
    groups = x32.contiguous().reshape(-1, group)
    if groups.shape[0] == 0:
        empty = torch.empty((0, group), dtype=torch.uint8, device=x32.device)
        codes, scales = empty, torch.empty(0, dtype=torch.uint8, device=x32.device)
    else:
        scales = e8m0_scale(block_amax(groups, p.amax_nan == "ignore"), p)
        codes = e2m1.encode_e2m1(groups, p, scale=scales[:, None])
    packed = e2m1.pack_nibbles(codes).reshape(x32.shape[:-1] + (x32.shape[-1] // 2,))
    return packed, scales.reshape(x32.shape[:-1] + (x32.shape[-1] // group,))


def dequantize_mx(packed: torch.Tensor, e8m0: torch.Tensor, profile: str | _profiles.Profile = "gfx950",
                  group: int = 32) -> torch.Tensor:
    """(packed [..., N/2], e8m0 [..., N/group]) -> float32 [..., N] under the profile's e8m0 decoding."""
    p = _profiles.get(profile)
    packed = as_uint8(packed, "packed")
    e8m0 = as_uint8(e8m0, "e8m0")
    codes = e2m1.unpack_nibbles(packed)
    check_group(codes.shape[-1], group, "packed (unpacked)")
    want = tuple(codes.shape[:-1]) + (codes.shape[-1] // group,)
    if tuple(e8m0.shape) != want:
        raise ValueError(f"e8m0 must have shape {want} for packed {tuple(packed.shape)}, got {tuple(e8m0.shape)}")
    if codes.numel() == 0:
        return torch.zeros(codes.shape, dtype=torch.float32, device=codes.device)
    values = e2m1.decode_e2m1(codes).reshape(want + (group,))
    scale = decode_e8m0(e8m0, p)[..., None]
    return (values * scale).reshape(codes.shape)
