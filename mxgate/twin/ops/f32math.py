"""float32 arithmetic of the twin's front end, with the oracle's (x86 NumPy's) NaN bits.

Finite results of + - * / are IEEE on every device torch runs on (eager kernels round once
and keep subnormals), so they need nothing. NaN results differ: CUDA returns one canonical
NaN, x86 array arithmetic returns the first NaN operand quieted, or the "indefinite" NaN
0xFFC00000 for an invalid operation (inf - inf, 0 * inf). ``Arith(track_nan=True)`` rewrites
NaN results that way; the callers run with tracking off first and again with it on only when
a NaN reaches an output (a NaN whose bits never reach an output cannot change a byte).

fma32 and rsqrt32 are the oracle's ``f32math`` constructions on float64 tensors (IEEE on CPU
and CUDA alike), and fp16 conversions are NumPy's integer algorithms (torch's own casts
canonicalise NaN payloads).
"""

from __future__ import annotations

import torch

from mxgate.twin._bits import SIGN32, bits_f32, f32_bits, srl
from mxgate.twin._bits import x86_nan as _x86_nan
_SPLIT = 2.0**27 + 1.0
_BELOW_F32 = (1 << 29) - 1
_HALF_F32 = 1 << 28
_SMALL = 2.0**-125


class Arith:
    """+ - * / on float32 tensors; with ``track_nan`` NaN bits follow x86 NumPy."""

    def __init__(self, track_nan: bool) -> None:
        self.track_nan = track_nan

    def _fix(self, result: torch.Tensor, *operands: torch.Tensor) -> torch.Tensor:
        return _x86_nan(result, *operands) if self.track_nan else result

    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._fix(a + b, a, b)

    def sub(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._fix(a - b, a, b)

    def mul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._fix(a * b, a, b)

    def div(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._fix(a / b, a, b)

    def fma(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # the oracle's NaN: a*b in float64 (first NaN of a, b), then + c
        out = fma32(a, b, c)
        if not self.track_nan:
            return out
        product = _x86_nan(a * b, a, b)
        return _x86_nan(out, product, c)


def neg(x: torch.Tensor) -> torch.Tensor:
    """-x by flipping the sign bit (what x86 NumPy does, NaN included)."""
    return bits_f32(f32_bits(x) ^ SIGN32)


def _two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fl32(a * b + c) with one rounding (the oracle's construction; NaN bits not fixed)."""
    a64 = a.to(torch.float64)
    c64 = c.to(torch.float64)
    p = a64 * b.to(torch.float64)  # exact
    shape = torch.broadcast_shapes(p.shape, c64.shape)
    s = torch.broadcast_to(p + c64, shape).contiguous()
    out = s.to(torch.float32)
    bits = s.view(torch.int64)
    suspect = ((bits & _BELOW_F32) == _HALF_F32) | (s.abs() < _SMALL)
    where = torch.nonzero(suspect.reshape(-1)).reshape(-1)
    if where.numel():
        ps = torch.broadcast_to(p, shape).reshape(-1)[where]
        cs = torch.broadcast_to(c64, shape).reshape(-1)[where]
        out.reshape(-1)[where] = _round_odd_sum(ps, cs).to(torch.float32)
    return out


def _round_odd_sum(p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    s, err = _two_sum(p, c)
    bits = s.view(torch.int64)
    inexact = torch.isfinite(s) & (err != 0) & ((bits & 1) == 0)
    toward = torch.where(torch.signbit(err) == torch.signbit(s), 1, -1)
    return torch.where(inexact, bits + toward, bits).view(torch.float64)


def _exceeds_one(m: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m2 = m * m
    t = m2 * _SPLIT
    hi = t - (t - m2)
    lo = m2 - hi
    s, err = _two_sum(hi * x, lo * x)
    greater = (s > 1.0) | ((s == 1.0) & (err > 0))
    less = (s < 1.0) | ((s == 1.0) & (err < 0))
    return greater, less


def rsqrt32(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 1/sqrt(x): +0 -> +inf, +inf -> 0, x < 0 or NaN -> NaN."""
    x64 = x.to(torch.float64)
    y = torch.div(torch.ones_like(x64), torch.sqrt(x64)).to(torch.float32)
    y = _x86_nan(y, x)  # 1/sqrt(NaN) keeps that NaN; sqrt of a negative gives the indefinite NaN
    regular = torch.isfinite(x64) & (x64 > 0)
    where = torch.nonzero(regular.reshape(-1)).reshape(-1)
    if where.numel() == 0:
        return y
    xr = x64.reshape(-1)[where]
    yr = y.reshape(-1)[where]
    below = torch.nextafter(yr, torch.zeros_like(yr)).to(torch.float64)
    above = torch.nextafter(yr, torch.full_like(yr, float("inf"))).to(torch.float64)
    y64 = yr.to(torch.float64)
    too_high, _ = _exceeds_one((y64 + below) / 2.0, xr)
    _, too_low = _exceeds_one((y64 + above) / 2.0, xr)
    fixed = torch.where(too_high, below.to(torch.float32), yr)
    fixed = torch.where(too_low, above.to(torch.float32), fixed)
    out = y.clone()
    out.reshape(-1)[where] = fixed
    return out


def nextafter_down(x: torch.Tensor) -> torch.Tensor:
    """One float32 step toward 0 (C nextafter: a NaN comes back as it is)."""
    return torch.where(torch.isnan(x), x, torch.nextafter(x, torch.zeros_like(x)))


def nextafter_up(x: torch.Tensor) -> torch.Tensor:
    """One float32 step toward +inf (a NaN comes back as it is)."""
    return torch.where(torch.isnan(x), x, torch.nextafter(x, torch.full_like(x, float("inf"))))


# ---- float16 as NumPy converts it (npy_floatbits_to_halfbits / npy_halfbits_to_floatbits) ------


def f32_to_f16_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> float16 bit patterns (int32 in [0, 65535]) as NumPy's astype(float16):
    round to nearest even, NaN payload's top bits kept (a NaN that would read as Inf gets +1)."""
    f = f32_bits(x)
    f_exp = f & 0x7F800000
    sign = srl(f, 16) & 0x8000
    sig = f & 0x007FFFFF
    # NaN / Inf / overflow
    nan_bits = 0x7C00 + srl(sig, 13)
    nan_bits = torch.where(nan_bits == 0x7C00, nan_bits + 1, nan_bits)
    big = torch.where((f_exp == 0x7F800000) & (sig != 0), nan_bits, torch.full_like(f, 0x7C00))
    # subnormal results (f_exp <= 0x38000000): shift the 24-bit significand right, RNE
    e = srl(f_exp, 23)
    full = sig + 0x00800000
    shift = torch.clamp(126 - e, 0, 31)  # only where 0x33000000 <= f_exp <= 0x38000000: 14..24
    q = full >> shift
    rem = full & ((torch.ones_like(full) << shift) - 1)
    half = torch.where(shift > 0, torch.ones_like(full) << torch.clamp(shift - 1, min=0), torch.zeros_like(full))
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    sub = q + up.to(torch.int32)
    sub = torch.where(f_exp < 0x33000000, torch.zeros_like(f), sub)
    # normal results: rebias, round the 13 dropped bits to nearest even
    normal = ((f_exp - 0x38000000) >> 13) + srl(sig, 13)
    dropped = sig & 0x1FFF
    up_n = (dropped > 0x1000) | ((dropped == 0x1000) & ((normal & 1) == 1))
    normal = normal + up_n.to(torch.int32)  # a carry into the exponent is right (up to Inf)
    out = torch.where(f_exp <= 0x38000000, sub, normal)
    out = torch.where(f_exp >= 0x47800000, big, out)
    return sign | out


def f16_bits_to_f32(h: torch.Tensor) -> torch.Tensor:
    """float16 bit patterns (int32 in [0, 65535]) -> float32, exact, NaN payload kept."""
    sign = (h & 0x8000) << 16
    h_exp = h & 0x7C00
    h_sig = h & 0x03FF
    inf_nan = sign | 0x7F800000 | (h_sig << 13)
    normal = sign | (((h & 0x7FFF) + 0x1C000) << 13)
    # subnormal: value h_sig * 2^-24, exact in float32
    sub = f32_bits(h_sig.to(torch.float32) * 2.0**-24) | sign
    out = torch.where(h_exp == 0, sub, normal)
    return bits_f32(torch.where(h_exp == 0x7C00, inf_nan, out))


def round_f16(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest float16 value as float32 (NumPy's round trip)."""
    return f16_bits_to_f32(f32_to_f16_bits(x))
