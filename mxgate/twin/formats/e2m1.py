"""E2M1 (FP4) on torch tensors: the oracle's ``formats.e2m1`` (codes 0..7 = 0, 0.5, 1, 1.5,
2, 3, 4, 6; bit 3 the sign; element 2i in the low nibble of byte i)."""

from __future__ import annotations

from functools import cache

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats import e2m1 as oracle_e2m1
from mxgate.oracle.formats.e2m1 import MAGNITUDES
from mxgate.twin._bits import f32_bits, bits_f32, is_nan_bits, pow2_f32, quiet_or_default
from mxgate.twin._check import as_float32, as_uint8
from mxgate.twin.rounding import lookup

KEEP_BITS = 11  # sign, 8 exponent bits, mantissa value bit, guard bit


def table(profile: str | _profiles.Profile, device: str | torch.device = "cpu") -> torch.Tensor:
    """The profile's 4096-entry rounding table (uint8 codes) on ``device``."""
    return _table(_profiles.get(profile), str(torch.device(device)))


@cache
def _table(p: _profiles.Profile, device: str) -> torch.Tensor:
    # the oracle's own table, copied to the device: one rounding engine for both
    return torch.from_numpy(oracle_e2m1.table(p).copy()).to(device)


def e8m0_divisor_reciprocals(profile: str | _profiles.Profile = "gfx950",
                             device: str | torch.device = "cpu") -> torch.Tensor:
    """float32 2^(127 - byte) per e8m0 byte; byte 255: 2^-128 or NaN by ``nan_scale``."""
    return _reciprocals(_profiles.get(profile).nan_scale, str(torch.device(device)))


@cache
def _reciprocals(nan_scale: str, device: str) -> torch.Tensor:
    exponents = 127 - torch.arange(256, dtype=torch.int64, device=device)
    out = pow2_f32(torch.clamp(exponents, min=-128)).clone()
    if nan_scale != "exponent":
        out[255] = float("nan")
    return out


def scaled_by_e8m0(x32: torch.Tensor, scale: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """x / 2^(scale - 127) in float32, as the oracle computes it on x86.

    The product is one IEEE multiply by an exact power of two; the NaN it leaves is fixed by
    bits, because CUDA returns its canonical NaN where x86 keeps the operand's (quieted): an
    input NaN stays that NaN quieted, a NaN scale ("nan" rule) gives the input's NaN or +qNaN.
    """
    p = _profiles.get(profile)
    factor = e8m0_divisor_reciprocals(p, x32.device)[scale.to(torch.int64)]
    product = x32 * factor
    x_bits = torch.broadcast_to(f32_bits(x32), product.shape)
    bits = f32_bits(product)
    bits = torch.where(is_nan_bits(x_bits), quiet_or_default(x_bits), bits)
    if p.nan_scale == "nan":
        nan_scale = torch.broadcast_to(scale == 0xFF, product.shape)
        bits = torch.where(nan_scale, quiet_or_default(x_bits), bits)
    return bits_f32(bits)


def encode_e2m1(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950", *,
                scale: torch.Tensor | None = None) -> torch.Tensor:
    """float32 -> E2M1 codes (uint8, one per element) under ``profile``; optional e8m0 scale
    bytes broadcastable to x divide the input first (see the oracle's ``encode_e2m1``)."""
    p = _profiles.get(profile)
    x32 = as_float32(x, "x")
    if scale is not None:
        scale = as_uint8(scale, "scale")
        x32 = scaled_by_e8m0(x32, scale, p)
    return lookup(f32_bits(x32), table(p, x32.device), KEEP_BITS)


@cache
def _values(device: str) -> torch.Tensor:
    magnitudes = torch.tensor(MAGNITUDES, dtype=torch.float32, device=device)
    return torch.cat([magnitudes, -magnitudes])


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8 0..15) -> float32; 0x8 decodes to -0.0."""
    codes = as_uint8(codes, "codes")
    if codes.numel() and int(codes.max()) > 0xF:
        raise ValueError("codes must hold one E2M1 code (0..15) per byte; use unpack_nibbles for packed bytes")
    return _values(str(codes.device))[codes.to(torch.int64)]


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., 2n] codes -> [..., n] bytes: element 2i low nibble, 2i+1 high nibble."""
    codes = as_uint8(codes, "codes")
    if codes.dim() == 0 or codes.shape[-1] % 2:
        raise ValueError(f"codes last dimension must be even, got shape {tuple(codes.shape)}")
    if codes.numel() and int(codes.max()) > 0xF:
        raise ValueError("codes must be E2M1 codes in 0..15")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[..., n] bytes -> [..., 2n] codes (inverse of pack_nibbles)."""
    packed = as_uint8(packed, "packed")
    if packed.dim() == 0:
        raise ValueError("packed must have at least one dimension")
    return torch.stack([packed & 0x0F, packed >> 4], dim=-1).reshape(packed.shape[:-1] + (packed.shape[-1] * 2,))
