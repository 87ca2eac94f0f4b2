"""The scorer oracles' arithmetic on torch tensors (mxgate.oracle.scorers.arithmetic).

What is pure elementwise float64 arithmetic (the bounds, ``qk_delta``) or a fixed order of
float32 additions (``head_sum``) is the oracle's own function, called with ``xp=torch``. What
needs bit views or int64 digit arrays is written here in the oracle's steps: powers of two from
bits (float64; float32 ones are ``twin._bits.pow2_f32``), the integer mantissa/exponent split, the once-rounded weighted head sum, fl32(x + y) by
round to odd, and the left-to-right float64 head sums of the bounds.

Every function takes tensors on one device and returns tensors there; CUDA and CPU give the
same bits because each step is an IEEE operation or an integer one (tests/test_twin_scorers_*.py).
"""

from __future__ import annotations

import torch

from mxgate.oracle.scorers import arithmetic as oar
from mxgate.oracle.scorers.arithmetic import LIMB_BITS

_BATCH = 64  # terms between carry passes, as the oracle: 64 * 2**56 = 2**62 < 2**63
_STOP = 1 << (62 - LIMB_BITS)


def head_sum(p: torch.Tensor, order: str) -> torch.Tensor:
    """The oracle's float32 head-summation orders (``arithmetic.head_sum``) on a tensor."""
    return oar.head_sum(p, order, xp=torch)


def pow2_f64(e: torch.Tensor) -> torch.Tensor:
    """2**e as float64 from bits, for integer e in [-1022, 1023]."""
    e = e.to(torch.int64)
    if e.numel() and (int(e.min()) < -1022 or int(e.max()) > 1023):
        raise ValueError("exponent must lie in [-1022, 1023] for a normal float64 power of two")
    return ((e + 1023) << 52).view(torch.float64)


def _float_parts(b: torch.Tensor, mant_bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    expo = (b >> mant_bits) & 0xFF
    frac = b & ((1 << mant_bits) - 1)
    mag = torch.where(expo == 0, frac, frac | (1 << mant_bits))
    bias = 127 + mant_bits
    e = torch.where(expo == 0, 1 - bias, expo - bias)
    m = torch.where((b >> (mant_bits + 8)) & 1 == 1, -mag, mag)
    finite = expo != 0xFF
    return torch.where(finite, m, 0), torch.where(finite, e, 0), finite


def bf16_parts(bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 bit patterns (int16 / uint16 storage) -> (signed mantissa, exponent, finite), v = m 2^e."""
    return _float_parts(bits.view(torch.int16).to(torch.int64) & 0xFFFF, 7)


def f32_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 values -> (signed mantissa, exponent, finite): v = m * 2**e."""
    return _float_parts(x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF, 23)


def weighted_sum_f64(a: torch.Tensor, a_bits: int, m: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """RN_float64( sum_h a[r, h, t] * m[r, h] * 2**f[r, h] ), rounded once (the oracle's
    ``arithmetic.weighted_sum_f64``: the same digits, carries and round to odd). -> float64 [R, T]."""
    R, H, T = a.shape
    dev = a.device
    m = m.to(torch.int64)
    f = f.to(torch.int64)
    mag = m.abs()
    m_bits = int(mag.max()).bit_length() if mag.numel() else 0
    width = max(1, 53 - a_bits)
    pieces = max(1, -(-m_bits // width))
    sign = torch.where(m < 0, -1.0, 1.0).to(torch.float64)
    live = m != 0
    big = torch.iinfo(torch.int64).max
    if H:
        base = torch.where(live, f, big).min(dim=1).values
    else:
        base = torch.zeros(R, dtype=torch.int64, device=dev)
    base = torch.where(base == big, 0, base)
    shift = torch.where(live, f - base[:, None], 0)
    top = (int(shift.max()) if shift.numel() else 0) + width * (pieces - 1)
    n_limbs = (top + 56 + (H * pieces).bit_length()) // LIMB_BITS + 2
    acc = torch.zeros((R, n_limbs, T), dtype=torch.int64, device=dev)
    rows = torch.arange(R, device=dev)
    pending = 0
    for p in range(pieces):
        piece = sign * ((mag >> (width * p)) & ((1 << width) - 1)).to(torch.float64)
        s = shift + width * p
        limb, sub = s // LIMB_BITS, s % LIMB_BITS
        nonzero = (piece != 0).any(dim=0).tolist()
        for h in range(H):
            if not nonzero[h]:
                continue
            term = (a[:, h, :] * piece[:, h, None]).to(torch.int64)  # exact: < 2**53
            term <<= sub[:, h, None]
            acc[rows, limb[:, h], :] += term
            pending += 1
            if pending == _BATCH:
                _carry(acc)
                pending = 0
    return _round_limbs(acc) * pow2_f64(base)[:, None]


def _carry(acc: torch.Tensor) -> None:
    for j in range(acc.shape[1] - 1):
        carry = acc[:, j] >> LIMB_BITS
        acc[:, j] -= carry << LIMB_BITS
        acc[:, j + 1] += carry


def _round_limbs(acc: torch.Tensor) -> torch.Tensor:
    R, n, T = acc.shape
    _carry(acc)
    top = acc[:, n - 1].clone()
    low = torch.full((R, T), n - 1, dtype=torch.int64, device=acc.device)
    sticky = torch.zeros((R, T), dtype=torch.bool, device=acc.device)
    for j in range(n - 2, -1, -1):
        digit = acc[:, j]
        take = top.abs() < _STOP
        top = torch.where(take, top * (1 << LIMB_BITS) + digit, top)
        low = torch.where(take, j, low)
        sticky |= ~take & (digit != 0)
    top = torch.where(sticky, top | 1, top)
    return top.to(torch.float64) * pow2_f64(low * LIMB_BITS)


def add_round_f32(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """fl32(x + y), one rounding, for exact finite float64 x, y (TwoSum, round to odd, once)."""
    x = x.to(torch.float64)
    y = y.to(torch.float64)
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    bits = s.contiguous().view(torch.int64)
    odd_fix = (err != 0) & ((bits & 1) == 0)
    toward = torch.where(torch.signbit(err) == torch.signbit(s), 1, -1)
    bits = torch.where(odd_fix, bits + toward, bits)
    return bits.view(torch.float64).to(torch.float32)


def sum_heads(x: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """((x_0 + x_1) + x_2) + ... over ``dim`` in float64 (``arithmetic.sum_heads``)."""
    x = x.to(torch.float64).movedim(dim, 0)
    if x.shape[0] == 0:
        return torch.zeros(x.shape[1:], dtype=torch.float64, device=x.device)
    acc = x[0].clone()
    for h in range(1, x.shape[0]):
        acc += x[h]
    return acc


def weighted_heads(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """sum_h w[r, h] * x[r, h, t] left to right in float64 (``arithmetic.weighted_heads``)."""
    w = w.to(torch.float64)
    x = x.to(torch.float64)
    acc = w[:, 0, None] * x[:, 0]
    for h in range(1, x.shape[1]):
        acc += w[:, h, None] * x[:, h]
    return acc


def exact_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64, for operands whose products and partial sums the oracle proves exact
    (integer-valued dots): exact in any order, so any BLAS gives the oracle's values. float64
    also keeps clear of TF32, which a float32 matmul on a GPU may use."""
    return torch.matmul(a.to(torch.float64), b.to(torch.float64))
