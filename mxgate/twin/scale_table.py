"""The e8m0 scale of a block as a step function of its amax bit pattern.

On the finite-or-Inf amax patterns a in [0, 0x7F800000], the oracle's ``e8m0_scale`` (run on
the tensors) is non-decreasing for
every combination of profile fields: the floor is a max, a multiply or divide by a positive
constant rounds monotonically, the exponent of a ceiling or floor power of two, the mantissa
rounding of the "even" policy and the clamps are monotone, and Inf gives the top byte. So
bisection finds, for each byte b, the first pattern whose byte is >= b. On the 2^23 - 1 NaN
patterns the byte is one constant: 0xFF, moved only by a "clamped" profile's exp_clamp. The result is a list of segment starts and the byte on each:

    byte(a) = values[i]  for the last i with starts[i] <= a          (512 entries, padded)

``check`` evaluates the profile's scale on both sides of every start; tests compare the table
with the oracle on every one of the 2^31 patterns (GPU) and on a strided sample plus every
start's neighbours (CPU).
"""

from __future__ import annotations

from functools import cache

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.scales import e8m0_scale
from mxgate.oracle.xp import floats

DOMAIN = 1 << 31  # magnitude patterns +0 .. 0x7FFFFFFF; a padding start is never reached
INF = 0x7F800000
SIZE = 512  # bisection in 9 steps


def _scale_of(patterns: torch.Tensor, p: _profiles.Profile) -> torch.Tensor:
    return e8m0_scale(floats(patterns.to(torch.int32)), p).to(torch.int64)


def _finite_starts(p: _profiles.Profile, device: str) -> torch.Tensor:
    """First pattern in [0, INF] with byte >= b, for every b reached there (monotone part)."""
    targets = torch.arange(256, dtype=torch.int64, device=device)
    lo = torch.zeros(256, dtype=torch.int64, device=device)
    hi = torch.full((256,), INF + 1, dtype=torch.int64, device=device)  # INF + 1: not reached
    for _ in range(32):
        mid = (lo + hi) // 2
        above = (_scale_of(torch.clamp(mid, max=INF), p) >= targets) & (mid <= INF)
        hi = torch.where(above, mid, hi)
        lo = torch.where(above, lo, mid + 1)
    return torch.unique(lo[lo <= INF])


_SCALE_FIELDS = ("scale_policy", "scale_arithmetic", "amax_floor", "floor_where", "exp_clamp", "special_scale")


def _scale_key(p: _profiles.Profile) -> tuple:
    """The fields e8m0_scale reads: profiles that agree on them share one table."""
    return tuple(getattr(p, f) for f in _SCALE_FIELDS)


def _segments(p: _profiles.Profile, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _segments_for(_scale_key(p), p, device)


@cache
def _segments_for(key: tuple, p: _profiles.Profile, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    nan = torch.tensor([INF + 1], dtype=torch.int64, device=device)  # every NaN amax: one byte
    starts = torch.cat([_finite_starts(p, device), nan])
    values = _scale_of(starts, p)
    keep = torch.ones_like(starts, dtype=torch.bool)
    keep[1:] = values[1:] != values[:-1]  # merge runs that continue across the two parts
    starts, values = starts[keep], values[keep]
    if starts.numel() > SIZE:
        raise RuntimeError(f"profile {p.name}: the e8m0 byte changes {starts.numel()} times over the amax patterns")
    del key  # the cache key only
    pad = SIZE - starts.numel()
    starts = torch.cat([starts, torch.full((pad,), DOMAIN, dtype=torch.int64, device=device)])
    values = torch.cat([values, values[-1:].expand(pad)]).to(torch.uint8)
    check(starts, values, p)
    return starts, values


def segments(profile: str | _profiles.Profile, device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(starts int64 [512], values uint8 [512]): the byte is values[i] on [starts[i], starts[i+1])."""
    return _segments(_profiles.get(profile), str(torch.device(device)))


def check(starts: torch.Tensor, values: torch.Tensor, p: _profiles.Profile) -> None:
    """At each start the byte is its segment's, just below it the previous segment's."""
    inside = starts < DOMAIN
    s = starts[inside]
    v = values[inside].to(torch.int64)
    ok = bool((s[0] == 0).item()) and bool((s[1:] > s[:-1]).all())
    ok = ok and bool((_scale_of(s, p) == v).all()) and bool((_scale_of(s[1:] - 1, p) == v[:-1]).all())
    if not ok:
        raise RuntimeError(f"profile {p.name}: e8m0_scale is not the step function its table describes")


def scale_from_table(amax_bits: torch.Tensor, profile: str | _profiles.Profile) -> torch.Tensor:
    """uint8 bytes for int32 magnitude patterns (>= 0) by the segment table (the fused kernel's rule)."""
    starts, values = segments(profile, amax_bits.device)
    return values[torch.searchsorted(starts, amax_bits.to(torch.int64), right=True) - 1]


def binades(profile: str | _profiles.Profile, device: str | torch.device = "cpu") -> torch.Tensor | None:
    """The step table per binade of the amax pattern, for a one-gather lookup in the fused kernel.

    int64 [256], entry f for the patterns f << 23 .. (f + 1) << 23 - 1: (first pattern of the
    binade's upper step << 16) | (upper byte << 8) | lower byte. None where some binade holds
    more than one step (the kernel bisects then)."""
    return _binades(_profiles.get(profile), str(torch.device(device)))


@cache
def _binades(p: _profiles.Profile, device: str) -> torch.Tensor | None:
    starts, values = (t.cpu() for t in segments(p))
    inside = starts < DOMAIN
    starts, values = starts[inside].tolist(), values[inside].tolist()
    table = []
    for field in range(256):
        first, end = field << 23, (field + 1) << 23
        below = max(i for i, s in enumerate(starts) if s <= first)  # the step holding the binade's start
        steps = [i for i, s in enumerate(starts) if first < s < end]
        if len(steps) > 1:
            return None
        upper = steps[0] if steps else below
        threshold = starts[upper] if steps else end
        table.append((threshold << 16) | (values[upper] << 8) | values[below])
    return torch.tensor(table, dtype=torch.int64, device=device)


def scale_from_binades(amax_bits: torch.Tensor, profile: str | _profiles.Profile) -> torch.Tensor | None:
    """uint8 bytes for int32 magnitude patterns by the binade table (the fused kernel's fast rule)."""
    table = binades(profile, amax_bits.device)
    if table is None:
        return None
    entry = table[amax_bits.to(torch.int64) >> 23]
    upper = amax_bits.to(torch.int64) >= (entry >> 16)
    return torch.where(upper, (entry >> 8) & 0xFF, entry & 0xFF).to(torch.uint8)
