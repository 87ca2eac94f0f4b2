"""FP8 E4M3FN (OCP; gfx950, NVIDIA) and E4M3FNUZ (gfx942) codecs.

fn: bias 7, max 448 (0x7E), NaN 0x7F/0xFF, has -0, min subnormal 2^-9.
fnuz: bias 8, max 240 (0x7F), NaN 0x80, no -0, min subnormal 2^-10.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from mxgate.oracle.arguments import as_float32, as_uint8, choice
from mxgate.oracle.rounding import classify, lookup
from mxgate.oracle.xp import bits, table_on, take

KEEP_BITS = 13  # sign, 8 exponent bits, 3 mantissa bits, guard bit
SATURATE_MODES = (False, True, "satfinite")
# Profile.fp8_overflow -> the encoder's ``saturate`` argument (nan: AMD hardware and ml_dtypes;
# saturate: to +-max; satfinite: NVIDIA's cvt.rn.satfinite, every NaN 0x7F)
SATURATE_OF_OVERFLOW: dict[str, bool | str] = {"nan": False, "saturate": True, "satfinite": "satfinite"}
VARIANTS = ("fn", "fnuz")


def _magnitudes(variant: str) -> np.ndarray:
    bias = 7 if variant == "fn" else 8
    codes = np.arange(128 if variant == "fnuz" else 127)  # fn: 0x7F is NaN
    exponent = codes >> 3
    mantissa = codes & 7
    normal = (1 + mantissa / 8) * 2.0 ** (exponent - bias)
    subnormal = mantissa / 8 * 2.0 ** (1 - bias)
    return np.where(exponent == 0, subnormal, normal)


def _overflow_next(variant: str) -> float:
    # The value the format would have next with an unbounded exponent: 480 after 448 (fn),
    # 256 after 240 (fnuz). It decides which way the tie at the top goes.
    return 480.0 if variant == "fn" else 256.0


def table(variant: str, saturate: bool | str) -> np.ndarray:
    """Rounding table for one variant and overflow mode (round to nearest even)."""
    return _table(choice(variant, "variant", VARIANTS), choice(saturate, "saturate", SATURATE_MODES))


@cache
def _table(variant: str, saturate: bool | str) -> np.ndarray:
    # Called with canonical values only: False and 0 hash alike, so an unchecked key would
    # let one caller's table answer another's.
    c = classify(KEEP_BITS, _magnitudes(variant), _overflow_next(variant), "even")
    code = c.index.astype(np.uint8)
    max_code = np.uint8(0x7E if variant == "fn" else 0x7F)
    nan_code = np.uint8(0x7F if variant == "fn" else 0x80)
    sign = c.negative.astype(np.uint8) << 7
    if variant == "fn":
        code |= sign  # negative results rounding to zero keep their sign (0x80)
    else:
        code |= np.where(code != 0, sign, 0).astype(np.uint8)  # fnuz has no -0
    big = c.overflow | c.is_inf
    # fn's NaN keeps the sign (0x7F / 0xFF); fnuz has one NaN, 0x80.
    nan_fill = (nan_code | sign) if variant == "fn" else np.full_like(sign, nan_code)
    if saturate is False:  # AMD hardware and ml_dtypes: overflow and Inf become NaN
        code[big] = nan_fill[big]
    else:  # finite overflow and Inf clamp to +-max
        code[big] = (max_code | sign)[big]
    code[c.is_nan] = 0x7F if saturate == "satfinite" else nan_fill[c.is_nan]
    code.setflags(write=False)
    return code


def encode_e4m3(x: Any, variant: str = "fn", saturate: bool | str = False) -> Any:
    """float32 -> E4M3 codes, round to nearest even.

    saturate: False: overflow, Inf and NaN give NaN (0x7F|sign for fn, 0x80 for fnuz), as AMD
    hardware and ml_dtypes do; True: finite overflow and Inf clamp to +-max, NaN stays NaN;
    "satfinite": as True, but every NaN gives 0x7F (NVIDIA cvt.rn.satfinite).
    """
    rounding = table(variant, saturate)
    x32 = as_float32(x, "x")
    return lookup(bits(x32), table_on(rounding, x32), KEEP_BITS)


@cache
def _decode_table(variant: str) -> np.ndarray:
    magnitudes = _magnitudes(variant)
    values = np.full(256, np.nan)
    values[: len(magnitudes)] = magnitudes
    if variant == "fn":
        values[128 : 128 + len(magnitudes)] = -magnitudes
    else:
        values[129:256] = -magnitudes[1:128]
    out = values.astype(np.float32)
    out.setflags(write=False)
    return out


def decode_e4m3(codes: Any, variant: str = "fn") -> Any:
    """E4M3 codes -> float32 (fn: 0x80 is -0.0, 0x7F/0xFF NaN; fnuz: 0x80 NaN)."""
    values = _decode_table(choice(variant, "variant", VARIANTS))
    codes = as_uint8(codes, "codes")
    return take(table_on(values, codes), codes)


def max_value(variant: str) -> float:
    return 448.0 if choice(variant, "variant", VARIANTS) == "fn" else 240.0
