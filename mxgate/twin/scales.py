"""Block and token scales on torch tensors: the oracle's ``scales`` (e8m0 policies, log2f by
the oracle's threshold table, the FP8 per-token scale).

Every float operation is one IEEE float32 multiply or divide whose operands are tensors on the
same device (torch on CUDA turns a division by a CPU scalar into a multiply by its reciprocal);
a NaN operand's bits are restored where CUDA would return its canonical NaN.
"""

from __future__ import annotations

from functools import cache

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.scales import RECIP_6, log2f_threshold_table
from mxgate.twin._bits import ABS32, EXP32, MANT32, SIGN32, f32_bits, pow2_f32, srl, x86_nan
from mxgate.twin._check import as_float32, check_choice

_MIN_K = -149
_MAX_K = 127


def f32_const(value: float, device: torch.device) -> torch.Tensor:
    """A 0-d float32 tensor on ``device`` (never a CPU scalar: see the module docstring)."""
    return torch.tensor(value, dtype=torch.float32, device=device)


def mul32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fl32(a * b) with the NaN bits x86 NumPy gives (``x86_nan``)."""
    return x86_nan(a * b, a, b)


def div32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fl32(a / b) with the NaN bits x86 NumPy gives."""
    return x86_nan(a / b, a, b)


def fmax_propagate(a: torch.Tensor, floor: torch.Tensor) -> torch.Tensor:
    """np.maximum(a, floor): a NaN ``a`` is returned as it is."""
    return torch.where(torch.isnan(a) | (a >= floor), a, floor)


@cache
def _thresholds(device: str) -> torch.Tensor:
    return torch.tensor(log2f_threshold_table(), dtype=torch.int64, device=device)


def exponent_and_mantissa(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, M) with s = 2^k (1 + M 2^-23) for positive finite float32 bits (int64 results)."""
    field = (srl(u, 23) & 0xFF).to(torch.int64)
    mant = (u & MANT32).to(torch.int64)
    # subnormal: leading bit position from the exact float32 conversion of the integer mantissa
    lead = (srl(f32_bits(mant.to(torch.float32)), 23).to(torch.int64)) - 127
    lead = torch.clamp(lead, min=0)
    sub_mant = torch.bitwise_left_shift(mant - torch.bitwise_left_shift(torch.ones_like(lead), lead), 23 - lead)
    normal = field > 0
    k = torch.where(normal, field - 127, lead - 149)
    return k, torch.where(normal, mant, sub_mant)


def ceil_log2f_bits(u: torch.Tensor) -> torch.Tensor:
    """ceil(log2f(s)) (int64) for positive finite float32 bits, log2f correctly rounded."""
    k, mant = exponent_and_mantissa(u)
    limit = _thresholds(str(u.device))[torch.clamp(k, _MIN_K, _MAX_K) - _MIN_K]
    return k + (mant > limit).to(torch.int64)


def ceil_log2f(s: torch.Tensor) -> torch.Tensor:
    """ceil(log2f(s)) as int32 for positive finite float32 s."""
    u = f32_bits(as_float32(s, "s"))
    if bool(((u & ABS32) == 0).any() | ((u & ABS32) >= EXP32).any() | (u < 0).any()):
        raise ValueError("s must be positive and finite for ceil_log2f")
    return ceil_log2f_bits(u).to(torch.int32)


def ceil_pow2_biased(u: torch.Tensor) -> torch.Tensor:
    """Biased exponent of ceil_pow2(v): the field, bumped when any mantissa bit is set."""
    field = (srl(u, 23) & 0xFF).to(torch.int64)
    bump = ((u & MANT32) != 0) & (field != 0xFF)
    return field + bump.to(torch.int64)


def e8m0_scale(amax: torch.Tensor, profile: str | _profiles.Profile = "gfx950") -> torch.Tensor:
    """e8m0 byte (uint8) per block from its amax (float32 >= 0; NaN and Inf give 0xFF) under the profile."""
    p = _profiles.get(profile)
    a = as_float32(amax, "amax")
    if bool((a < 0).any()):
        raise ValueError("amax must be >= 0 (the largest magnitude of a block)")
    device = a.device
    if p.amax_floor is not None and p.floor_where == "before":
        a = fmax_propagate(a, f32_const(p.amax_floor, device))
    special = ~torch.isfinite(a)
    if p.scale_policy in ("rceil", "rceil_log2f"):
        if p.scale_arithmetic == "reciprocal":
            v = mul32(a, f32_const(float(RECIP_6), device))
        else:
            v = div32(a, f32_const(6.0, device))
        if p.amax_floor is not None and p.floor_where == "after":
            v = fmax_propagate(v, f32_const(p.amax_floor, device))
        u = f32_bits(v)
        if p.scale_policy == "rceil":
            biased = ceil_pow2_biased(u)
        else:
            positive = (u & ABS32) != 0
            safe = torch.where(positive & ~special, u, torch.full_like(u, 0x3F800000))
            biased = torch.where(positive, ceil_log2f_bits(safe) + 127, torch.zeros_like(u, dtype=torch.int64))
    else:
        u = f32_bits(a)
        nonzero = (u & ABS32) != 0
        if p.scale_policy == "floor":
            safe = torch.where(nonzero, u, torch.full_like(u, 0x3F800000))
            k, _ = exponent_and_mantissa(safe)
            biased = torch.where(nonzero, k + 127, torch.zeros_like(k)) - 2
        elif p.scale_policy == "ceil":
            biased = ceil_pow2_biased(u) - 2
        else:  # even: round amax's mantissa to one bit (FP4), then floor
            rounded = (u + 0x200000) & (0xFF800000 - (1 << 32))
            field = (srl(rounded, 23) & 0xFF).to(torch.int64)
            biased = torch.where(field == 0xFF, torch.full_like(field, 0xFF), field - 2)
    # as the oracle: a NaN or Inf amax is the byte 0xFF before exp_clamp under every policy
    biased = torch.clamp(torch.where(special, torch.full_like(biased, 0xFF), biased), 0, 0xFF)
    if p.exp_clamp is not None:
        biased = torch.clamp(biased, *p.exp_clamp)
    if p.special_scale == "nan_byte":
        biased = torch.where(special, torch.full_like(biased, 0xFF), biased)
    return biased.to(torch.uint8)


def ue8m0_round(s: torch.Tensor, rounding: str = "log2f") -> torch.Tensor:
    """Power-of-two scale at or above s: exp2f(ceilf(log2f(s))) or bitwise ceil_pow2; +Inf stays +Inf."""
    check_choice(rounding, "rounding", ("log2f", "bitwise"))
    u = f32_bits(as_float32(s, "s"))
    if bool(((u & SIGN32) != 0).any() | ((u & ABS32) == 0).any() | ((u & ABS32) > EXP32).any()):
        raise ValueError("s must be positive (or +Inf), not zero, negative or NaN")
    infinite = u == EXP32
    u = torch.where(infinite, torch.full_like(u, 0x3F800000), u)
    k = ceil_log2f_bits(u) if rounding == "log2f" else ceil_pow2_biased(u) - 127
    inf = torch.full(u.shape, float("inf"), dtype=torch.float32, device=u.device)
    return torch.where((k > 127) | infinite, inf, pow2_f32(torch.clamp(k, -149, 127)))


def fp8_token_scale(amax: torch.Tensor, fp8_max: float, *, arithmetic: str, amax_floor: float,
                    scale_fmt: str | None = None, rounding: str = "log2f") -> torch.Tensor:
    """FP8 per-token scale: max(amax, floor) * fl(1/fp8_max) ('reciprocal') or / fp8_max
    ('divide'); with scale_fmt 'ue8m0' rounded up to a power of two."""
    check_choice(arithmetic, "arithmetic", ("reciprocal", "divide"))
    a = as_float32(amax, "amax")
    a = fmax_propagate(a, f32_const(amax_floor, a.device))
    if arithmetic == "reciprocal":
        inv = div32(f32_const(1.0, a.device), f32_const(fp8_max, a.device))
        s = mul32(a, inv)
    else:
        s = div32(a, f32_const(fp8_max, a.device))
    if scale_fmt == "ue8m0":
        s = ue8m0_round(s, rounding)
    return s

