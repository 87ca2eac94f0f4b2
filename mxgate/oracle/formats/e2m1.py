"""E2M1 (FP4): 1 sign, 2 exponent (bias 1), 1 mantissa bit; no Inf, no NaN.

Codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Element 2i of a packed row sits
in the low nibble of byte i, element 2i+1 in the high nibble.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_float32, as_uint8, choice, is_tensor
from mxgate.oracle.bits import ABS32, f32_bits
from mxgate.oracle.rounding import classify, lookup
from mxgate.oracle.xp import (INDEFINITE, bits, device, floats, is_nan_bits, is_numpy, namespace, pow2_f32, quiet_or_default,
                              table_on, take)

MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
KEEP_BITS = 11  # sign, 8 exponent bits, mantissa value bit, guard bit
_MAX_CODE = 7
_SIGN = 8
MIDPOINTS = (MAGNITUDES[:-1] + MAGNITUDES[1:]) / 2  # the tie points: 0.25, 0.75, ..., 5
VALUES = np.concatenate([MAGNITUDES, -MAGNITUDES]).astype(np.float32)  # decode table, code -> value


def _nan_codes_torchao(bits: np.ndarray, negative: np.ndarray) -> np.ndarray:
    # torchao's integer path runs on the NaN's own bits: exponent rebias plus round-half-even
    # at mantissa bit 22, then the low byte of the shifted word.
    magnitude = (bits & ABS32).astype(np.uint64)
    odd = (magnitude >> np.uint64(22)) & np.uint64(1)
    word = (magnitude + np.uint64(0xC11FFFFF) + odd) & np.uint64(0xFFFFFFFF)
    code = ((word >> np.uint64(22)) & np.uint64(0xFF)).astype(np.uint8)
    return code | (negative.astype(np.uint8) << 3)


_TIES = ("even", "zero", "away", "down")
_ZERO_SIGNS = ("keep", "if_negative", "clear")
_NANS = ("max_signed", "pos_max", "neg_max", "zero", "inverted_zero", "torchao_bits")
_INFS = ("saturate", "neg_max")
_NAN_SCALES = ("exponent", "nan", "inf")
_SCALE0_DIVISORS = ("pow2", "min_normal", "one")
_X86_DEFAULT_NAN = np.uint32(0xFFC00000)  # what x86 gives for Inf / Inf (and Inf * 0)


def table(profile: str | _profiles.Profile) -> np.ndarray:
    """The rounding table of one profile: 4096 uint8 codes (see ``rounding``)."""
    p = _profiles.get(profile)
    # The table depends on these four fields only: keyed on their canonical values, profiles
    # that agree on them share one table and no other field can select a wrong one.
    return _table(choice(p.tie, "profile.tie", _TIES), choice(p.zero_sign, "profile.zero_sign", _ZERO_SIGNS),
                  choice(p.nan, "profile.nan", _NANS), choice(p.inf, "profile.inf", _INFS))


@cache
def _table(tie: str, zero_sign: str, nan_rule: str, inf: str) -> np.ndarray:
    c = classify(KEEP_BITS, MAGNITUDES, 8.0, tie)
    magnitude = c.index.astype(np.uint8)
    magnitude[c.overflow] = _MAX_CODE
    if zero_sign == "keep":
        sign = c.negative
    elif zero_sign == "if_negative":
        sign = c.negative & (c.bits & ABS32 != 0)
    else:
        sign = c.negative & (magnitude != 0)
    code = magnitude | (sign.astype(np.uint8) << 3)
    if inf == "neg_max":
        code[c.is_inf] = _SIGN | _MAX_CODE
    else:
        code[c.is_inf] = _MAX_CODE | (c.negative[c.is_inf].astype(np.uint8) << 3)
    nan = c.is_nan
    nan_codes = {
        "max_signed": _MAX_CODE | (c.negative.astype(np.uint8) << 3),
        "pos_max": np.full(code.shape, _MAX_CODE, np.uint8),
        "neg_max": np.full(code.shape, _SIGN | _MAX_CODE, np.uint8),
        "zero": np.zeros(code.shape, np.uint8),
        "inverted_zero": (~c.negative).astype(np.uint8) << 3,
        "torchao_bits": _nan_codes_torchao(c.bits, c.negative),
    }[nan_rule]
    code[nan] = nan_codes[nan]
    code.setflags(write=False)
    return code


def encode_e2m1(x: Any, profile: str | _profiles.Profile = "gfx950", *, scale: Any = None) -> Any:
    """float32 -> E2M1 codes (uint8, one per element, not packed) under ``profile``.

    scale: optional e8m0 bytes broadcastable to x. The input is first divided by 2^(byte - 127)
    in float32 (exact unless the quotient leaves the float32 range: underflow gives a zero
    code and overflow saturation in every profile except argmin, where an Inf quotient takes the
    Inf rule), which is what the gfx950 scaled converter and the software quantizers do.
    """
    p = _profiles.get(profile)
    rounding = table(p)
    x32 = as_float32(x, "x")
    if scale is not None:
        x32 = scaled_by_e8m0(x32, scale, p)
    return lookup(bits(x32), table_on(rounding, x32), KEEP_BITS)


def e8m0_divisor_reciprocals(profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """float32 2^(127 - byte) for every e8m0 byte (exact: 2^-127 and 2^-128 are float32
    subnormals). Byte 255 gives 2^-128, NaN or 0 (a divisor of +Inf) by the profile's ``nan_scale``;
    byte 0 gives 2^127, 2^126 or 1 by its ``scale0_divisor`` (SPEC 3.5)."""
    p = _profiles.get(profile)
    return _reciprocals(choice(p.nan_scale, "profile.nan_scale", _NAN_SCALES),
                        choice(p.scale0_divisor, "profile.scale0_divisor", _SCALE0_DIVISORS))


@cache
def _reciprocals(nan_scale: str, scale0_divisor: str) -> np.ndarray:
    last = {"exponent": pow2_f32(np.array(-128)), "nan": np.float32(np.nan), "inf": np.float32(0.0)}[nan_scale]
    out = np.append(pow2_f32(127 - np.arange(255)), last).astype(np.float32)
    out[0] = {"pow2": pow2_f32(np.array(127)), "min_normal": pow2_f32(np.array(126)), "one": np.float32(1.0)}[scale0_divisor]
    out.setflags(write=False)
    return out


def scaled_by_e8m0(x32: Any, scale: Any, profile: str | _profiles.Profile = "gfx950") -> Any:
    """x / 2^(scale - 127) in float32 as a multiply by an exact power of two.

    The product is exact unless it leaves the float32 range: below 2^-126 every profile's code
    is zero, above 6 every profile saturates. Scale byte 255 follows the profile's
    ``nan_scale``; under "nan" the NaN that survives is chosen explicitly (the dividend's own
    NaN, quieted, else +qNaN, as x86 division does) because NumPy's SIMD loops pick either.
    Off NumPy every NaN is set by bits (a GPU returns its canonical NaN where x86 keeps the
    operand's): an input NaN quieted, and the two rules above.
    """
    p = _profiles.get(profile)
    scale = as_uint8(scale, "scale")
    _check_scale_shape(scale, x32)
    xp = namespace(x32)
    if not is_numpy(xp):
        scale = on_device_of(scale, x32, "scale", "x")
        factor = take(table_on(e8m0_divisor_reciprocals(p), x32), scale)
        product = bits(x32 * factor)
        x_bits = xp.broadcast_to(bits(x32), product.shape)
        product = xp.where(is_nan_bits(x_bits), x_bits | 0x00400000, product)
        last = xp.broadcast_to(scale == 0xFF, product.shape)
        if p.nan_scale == "nan":
            product = xp.where(last, quiet_or_default(x_bits), product)
        elif p.nan_scale == "inf":
            product = xp.where(last & ((x_bits & 0x7FFFFFFF) == 0x7F800000), INDEFINITE, product)
        return floats(product)
    # a quotient past float32 is Inf, which saturates: by design; a signalling NaN x raises the
    # invalid flag and gives its quiet NaN, the rule's NaN
    with np.errstate(over="ignore", invalid="ignore"):
        product = np.multiply(x32, e8m0_divisor_reciprocals(p)[scale], dtype=np.float32)
    if p.nan_scale == "nan":
        nan_scale = np.broadcast_to(scale == 0xFF, product.shape)
        if nan_scale.any():
            bits32 = np.broadcast_to(f32_bits(x32), product.shape)
            quiet = np.where((bits32 & ABS32) > np.uint32(0x7F800000), bits32 | np.uint32(0x00400000), np.uint32(0x7FC00000))
            product = np.where(nan_scale, quiet.view(np.float32), product)
    elif p.nan_scale == "inf":
        # x / +Inf: an Inf element gives the default NaN, chosen here (x * 0 leaves it to the FPU)
        inf_scale = np.broadcast_to(scale == 0xFF, product.shape) & np.isinf(x32)
        if inf_scale.any():
            product = np.where(inf_scale, _X86_DEFAULT_NAN.view(np.float32), product)
    return product


def on_device_of(a: Any, like: Any, name: str, like_name: str) -> Any:
    """``a`` in the namespace and on the device of the tensor ``like`` (a NumPy argument moves
    there; a tensor elsewhere is refused)."""
    if is_tensor(a):
        if device(a) != device(like):
            raise ValueError(f"{name} must be on the device of {like_name} ({device(like)}), got {device(a)}")
        return a
    return namespace(like).asarray(a, device=device(like))


def _check_scale_shape(scale: Any, x32: Any) -> None:
    """The result has x's shape: scale must broadcast to it (never the other way round)."""
    shape, scale_shape = tuple(x32.shape), tuple(scale.shape)
    try:
        joint = np.broadcast_shapes(scale_shape, shape)
    except ValueError:
        joint = None
    if joint != shape:
        raise ValueError(f"scale must broadcast to the shape of x {shape}, got shape {scale_shape}")


def decode_e2m1(codes: Any) -> Any:
    """E2M1 codes (uint8, low nibble used) -> float32; 0x8 decodes to -0.0."""
    codes = as_uint8(codes, "codes")
    if _size(codes) and int(namespace(codes).max(codes)) > 0xF:
        raise ValueError("codes must hold one E2M1 code (0..15) per byte; use unpack_nibbles for packed bytes")
    return take(table_on(VALUES, codes), codes)


def pack_nibbles(codes: Any) -> Any:
    """[..., 2n] codes -> [..., n] bytes: element 2i in the low nibble, 2i+1 in the high nibble."""
    codes = as_uint8(codes, "codes")
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(f"codes last dimension must be even, got shape {tuple(codes.shape)}")
    xp = namespace(codes)
    if _size(codes) and int(xp.max(codes)) > 0xF:
        raise ValueError("codes must be E2M1 codes in 0..15")
    if not is_numpy(xp):
        return codes[..., 0::2] | (codes[..., 1::2] << 4)
    pairs = np.ascontiguousarray(codes).view(np.uint16)  # little-endian: low byte = even element
    packed = (pairs & np.uint16(0x000F)) | ((pairs >> np.uint16(4)) & np.uint16(0x00F0))
    return packed.astype(np.uint8)


def unpack_nibbles(packed: Any) -> Any:
    """[..., n] bytes -> [..., 2n] codes (inverse of pack_nibbles)."""
    packed = as_uint8(packed, "packed")
    if packed.ndim == 0:
        raise ValueError("packed must have at least one dimension")
    xp = namespace(packed)
    shape = tuple(packed.shape[:-1]) + (packed.shape[-1] * 2,)
    return xp.reshape(xp.stack([packed & 0x0F, packed >> 4], axis=-1), shape)


def _size(a: Any) -> int:
    return math.prod(a.shape)
