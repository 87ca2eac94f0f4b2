"""FP8 E4M3FN / E4M3FNUZ on torch tensors: the oracle's ``formats.e4m3`` (round to nearest
even; saturate False / True / "satfinite")."""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from mxgate.oracle.formats import e4m3 as oracle_e4m3
from mxgate.oracle.formats.e4m3 import SATURATE_MODES
from mxgate.twin._bits import f32_bits
from mxgate.twin._check import as_float32, as_uint8, check_choice
from mxgate.twin.rounding import lookup

KEEP_BITS = 13  # sign, 8 exponent bits, 3 mantissa bits, guard bit


def table(variant: str, saturate: bool | str, device: str | torch.device = "cpu") -> torch.Tensor:
    """Rounding table (16,384 uint8 codes) for one variant and overflow mode on ``device``."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    check_choice(saturate, "saturate", SATURATE_MODES)
    return _table(variant, saturate, str(torch.device(device)))


@cache
def _table(variant: str, saturate: bool | str, device: str) -> torch.Tensor:
    # the oracle's own table, copied to the device: one rounding engine for both
    return torch.from_numpy(oracle_e4m3.table(variant, saturate).copy()).to(device)


def encode_e4m3(x: torch.Tensor, variant: str = "fn", saturate: bool | str = False) -> torch.Tensor:
    """float32 -> E4M3 codes (uint8), round to nearest even (see the oracle's ``encode_e4m3``)."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    check_choice(saturate, "saturate", SATURATE_MODES)
    x32 = as_float32(x, "x")
    return lookup(f32_bits(x32), table(variant, saturate, x32.device), KEEP_BITS)


@cache
def _decode_table(variant: str, device: str) -> torch.Tensor:
    every_code = np.arange(256, dtype=np.uint8)
    return torch.from_numpy(oracle_e4m3.decode_e4m3(every_code, variant).copy()).to(device)


def decode_e4m3(codes: torch.Tensor, variant: str = "fn") -> torch.Tensor:
    """E4M3 codes -> float32 (fn: 0x80 is -0.0, 0x7F/0xFF NaN; fnuz: 0x80 NaN)."""
    check_choice(variant, "variant", ("fn", "fnuz"))
    codes = as_uint8(codes, "codes")
    return _decode_table(variant, str(codes.device))[codes.to(torch.int64)]
