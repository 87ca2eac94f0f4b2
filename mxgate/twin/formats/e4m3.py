"""FP8 E4M3FN / E4M3FNUZ on torch tensors: the oracle's ``formats.e4m3`` (round to nearest
even; saturate False / True / "satfinite")."""

from __future__ import annotations

from functools import cache

import torch

from mxgate.oracle.formats.e4m3 import SATURATE_MODES, _magnitudes, _overflow_next
from mxgate.twin._bits import f32_bits
from mxgate.twin._check import as_float32, as_uint8, check_choice
from mxgate.twin.rounding import classify, lookup

KEEP_BITS = 13  # sign, 8 exponent bits, 3 mantissa bits, guard bit


def table(variant: str, saturate: bool | str, device: str | torch.device = "cpu") -> torch.Tensor:
    """Rounding table (16,384 uint8 codes) for one variant and overflow mode on ``device``."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    check_choice(saturate, "saturate", SATURATE_MODES)
    return _table(variant, saturate, str(torch.device(device)))


@cache
def _table(variant: str, saturate: bool | str, device: str) -> torch.Tensor:
    grid = torch.tensor(_magnitudes(variant), dtype=torch.float64, device=device)
    c = classify(KEEP_BITS, grid, _overflow_next(variant), "even")
    code = c.index.to(torch.uint8)
    max_code = 0x7E if variant == "fn" else 0x7F
    nan_code = 0x7F if variant == "fn" else 0x80
    sign = c.negative.to(torch.uint8) << 7
    if variant == "fn":
        code = code | sign  # negative results rounding to zero keep their sign (0x80)
    else:
        code = code | torch.where(code != 0, sign, torch.zeros_like(sign))  # fnuz has no -0
    big = c.overflow | c.is_inf
    nan_fill = (sign | nan_code) if variant == "fn" else torch.full_like(sign, nan_code)
    if saturate is False:  # overflow and Inf become NaN
        code[big] = nan_fill[big]
    else:  # finite overflow and Inf clamp to +-max
        code[big] = (sign | max_code)[big]
    if saturate == "satfinite":
        code[c.is_nan] = 0x7F
    else:
        code[c.is_nan] = nan_fill[c.is_nan]
    return code


def encode_e4m3(x: torch.Tensor, variant: str = "fn", saturate: bool | str = False) -> torch.Tensor:
    """float32 -> E4M3 codes (uint8), round to nearest even (see the oracle's ``encode_e4m3``)."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    check_choice(saturate, "saturate", SATURATE_MODES)
    x32 = as_float32(x, "x")
    return lookup(f32_bits(x32), table(variant, saturate, x32.device), KEEP_BITS)


@cache
def _decode_table(variant: str, device: str) -> torch.Tensor:
    magnitudes = torch.tensor(_magnitudes(variant), dtype=torch.float64, device=device)
    values = torch.full((256,), float("nan"), dtype=torch.float64, device=device)
    values[: magnitudes.numel()] = magnitudes
    if variant == "fn":
        values[128 : 128 + magnitudes.numel()] = -magnitudes
    else:
        values[129:256] = -magnitudes[1:128]
    return values.to(torch.float32)


def decode_e4m3(codes: torch.Tensor, variant: str = "fn") -> torch.Tensor:
    """E4M3 codes -> float32 (fn: 0x80 is -0.0, 0x7F/0xFF NaN; fnuz: 0x80 NaN)."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    codes = as_uint8(codes, "codes")
    return _decode_table(variant, str(codes.device))[codes.to(torch.int64)]
