"""The float32 front end of ``indexer_qk_rope_quant_and_cache``: RoPE, LayerNorm and the
rounding points, plus the admissible set ("envelope") of K front ends.

Everything here is float32 arithmetic with one rounding per operation, as the kernel does it,
written once for NumPy arrays and tensors (``f32math.Arith`` keeps x86 NumPy's NaN bits).
The two places the kernel's bits are not pinned down by its source are modelled explicitly:

* ``rsqrtf`` is the hardware ``v_rsq_f32`` (about 1 ulp, not correctly rounded): a variant
  takes the correctly rounded value (``rn``) or its neighbour one ulp below / above.
* FP contraction (clang's default): ``fma`` evaluates LayerNorm's ``c*inv*w + b`` as
  ``fma(fl(c*inv), w, b)`` and RoPE's ``x*cos -/+ p*sin`` as ``fma(x, cos, -/+fl(p*sin))``;
  ``mul-add`` rounds every product and sum separately.

A ``FrontEnd`` names one member; ``envelope(profile)`` lists all six with the profile's
default first (rsqrt ``rn`` and the profile's ``fma_contraction``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import choice, flag
from mxgate.oracle.formats.bf16 import round_bf16
from mxgate.oracle.geometry import ROPE_DIM
from mxgate.oracle.ops.f32math import Arith, f16_bits_to_f32, fma32, nextafter, round_f16, rsqrt32
from mxgate.oracle.xp import device, floats, ieee_quiet, is_numpy, namespace

HALF = ROPE_DIM // 2

ScalarKind = Literal["bf16", "fp16", "fp32"]
Rsqrt = Literal["rn", "down", "up"]
_RSQRT_WORDS = {"rn": "correctly rounded", "down": "one ulp below", "up": "one ulp above"}
_TINY = 2.0**-126  # below this a product of two bf16/fp16 values may be inexact
_HUGE = float(np.finfo(np.float32).max)  # above it fl(x*c) overflowed where an FMA may not


@dataclass(frozen=True)
class FrontEnd:
    """One admissible evaluation of the front end: the rsqrtf result and FP contraction."""

    rsqrt: Rsqrt = "rn"
    fma: bool = True

    def __post_init__(self) -> None:
        # canonical field values: FrontEnd("rn", 1) would equal and hash like FrontEnd("rn", True)
        object.__setattr__(self, "rsqrt", choice(self.rsqrt, "rsqrt", tuple(_RSQRT_WORDS)))
        flag(self.fma, "fma")

    @property
    def name(self) -> str:
        return f"rsqrt-{self.rsqrt}+{'fma' if self.fma else 'mul-add'}"

    def describe(self) -> str:
        contraction = "fused multiply-add" if self.fma else "separate multiply and add"
        return f"rsqrtf {_RSQRT_WORDS[self.rsqrt]}, {contraction} in LayerNorm and RoPE"


VARIANTS: tuple[FrontEnd, ...] = tuple(FrontEnd(r, f) for r in ("rn", "down", "up") for f in (True, False))
VARIANT_NAMES: tuple[str, ...] = tuple(v.name for v in VARIANTS)


def default_variant(profile: str | _profiles.Profile = "gfx950") -> FrontEnd:
    """The member whose bytes are the ``exact`` answer under ``profile``."""
    return FrontEnd("rn", flag(_profiles.get(profile).fma_contraction, "profile.fma_contraction"))


def envelope(profile: str | _profiles.Profile = "gfx950") -> tuple[FrontEnd, ...]:
    """Every admissible member, the profile's default first."""
    first = default_variant(profile)
    return (first,) + tuple(v for v in VARIANTS if v != first)


def get_variant(variant: str | FrontEnd | None, profile: str | _profiles.Profile = "gfx950") -> FrontEnd:
    """A FrontEnd from its name (None: the profile's default)."""
    if variant is None:
        return default_variant(profile)
    if isinstance(variant, FrontEnd):
        return variant
    for v in VARIANTS:
        if v.name == variant:
            return v
    raise ValueError(f"variant must be one of {', '.join(VARIANT_NAMES)}; got {variant!r}")


# ---- scalar_t conversions ----------------------------------------------------------------------


def to_f32(raw: Any, kind: ScalarKind) -> Any:
    """Stored values (bf16 as 16-bit patterns or a bfloat16 array, float16, float32) -> a new
    float32 array, exactly (NaN payloads kept)."""
    xp = namespace(raw)
    if is_numpy(xp):
        if kind == "bf16":
            return np.left_shift(raw.view(np.uint16), np.uint32(16), dtype=np.uint32).view(np.float32)
        return raw.astype(np.float32)  # always a copy: callers modify the result in place
    if kind == "fp32":
        return xp.asarray(raw, dtype=xp.float32, copy=True)
    pattern = xp.astype(raw.view(xp.int16), xp.int32) & 0xFFFF
    return floats(pattern << 16) if kind == "bf16" else f16_bits_to_f32(pattern)


def round_to(x: Any, kind: ScalarKind) -> Any:
    """float32 -> the nearest scalar_t value (round to nearest even), returned as float32."""
    if kind == "bf16":
        return round_bf16(x)
    if kind == "fp16":
        return round_f16(x)
    return x


def _f32(value: Any, like: Any) -> Any:
    """A float32 scalar as a 0-d array beside ``like`` (operands of one namespace and device)."""
    xp = namespace(like)
    return xp.asarray(value, dtype=xp.float32, device=device(like))


# ---- RoPE ---------------------------------------------------------------------------------------
# Every function takes the arithmetic as ``arith`` (default: x86 NumPy's NaN bits in any
# namespace); the indexer passes ``f32math.nan_exact``'s, which tracks NaNs only when needed.


def _mul_add(ar: Arith, x: Any, c: Any, other: Any, fma: bool, exact_products: bool) -> Any:
    """x*c + other in float32: fma(x, c, other) or fl(fl(x*c) + other).

    When x and c are bf16/fp16 values their product has at most 22 significant bits, so
    fl(x*c) is exact unless it is below 2^-126 or overflows; only those elements need the
    emulated FMA.
    """
    xp = ar.xp
    product = ar.mul(x, c)
    out = ar.add(product, other)
    if not fma:
        return out
    if not exact_products:
        return ar.fma(x, c, other)
    magnitude = xp.abs(product)
    suspect = (magnitude < _TINY) | (magnitude > _HUGE)
    if not is_numpy(xp):
        return xp.where(suspect, ar.fma(x, c, other), out)
    if np.any(suspect):  # rare: the emulated FMA on those elements only
        xb, cb, ob = np.broadcast_arrays(x, c, other)
        out[suspect] = fma32(xb[suspect], cb[suspect], ob[suspect])
    return out


def rope(x: Any, cos: Any, sin: Any, is_neox: bool, fma: bool, exact_products: bool, *,
         arith: Arith | None = None) -> Any:
    """Rotate the first 64 dims of x [..., >=64] (float32); partners come from the unrotated x.

    cos, sin: float32 [..., 32] broadcastable against x[..., :32]. is_neox pairs (i, i+32),
    else (2i, 2i+1); both use cos[i], sin[i]. Leading element: x*cos - p*sin; trailing
    element: x*cos + p*sin. Returns a new float32 [..., 64] array (not rounded).
    """
    ar = Arith(namespace(x)) if arith is None else arith
    xp = ar.xp
    if is_neox:
        lead, trail = x[..., :HALF], x[..., HALF:ROPE_DIM]
    else:
        lead, trail = x[..., 0:ROPE_DIM:2], x[..., 1:ROPE_DIM:2]
    new_lead = _mul_add(ar, lead, cos, ar.neg(ar.mul(trail, sin)), fma, exact_products)
    new_trail = _mul_add(ar, trail, cos, ar.mul(lead, sin), fma, exact_products)
    if is_neox:
        return xp.concat([new_lead, new_trail], axis=-1)
    return xp.reshape(xp.stack([new_lead, new_trail], axis=-1), tuple(new_lead.shape[:-1]) + (ROPE_DIM,))


# ---- Q and K pipelines --------------------------------------------------------------------------


def q_frontend(q32: Any, cos: Any, sin: Any, is_neox: bool, kind: ScalarKind, fma: bool, *,
               arith: Arith | None = None) -> Any:
    """Q rows [n, H, 128] (float32, modified in place and returned): RoPE on dims < 64 with the
    partners of the unrotated row, those 64 rounded to scalar_t; dims 64..127 pass through.

    cos, sin: float32 [n, 32] (the token's table rows)."""
    rotated = rope(q32, cos[:, None, :], sin[:, None, :], is_neox, fma, kind != "fp32", arith=arith)
    q32[..., :ROPE_DIM] = round_to(rotated, kind)
    return q32


def tree_sum(x: Any, *, arith: Arith | None = None) -> Any:
    """Sum over the last axis (a power of two) by the balanced pairwise tree in natural order:
    (0+1), (2+3), ... then pairs of pairs; float32 throughout."""
    ar = Arith(namespace(x)) if arith is None else arith
    while x.shape[-1] > 1:
        x = ar.add(x[..., 0::2], x[..., 1::2])
    return x[..., 0]


def layer_norm(x: Any, weight: Any, bias: Any, epsilon: Any, variant: FrontEnd, *,
               arith: Arith | None = None) -> Any:
    """LayerNorm of K rows [n, 128] in float32 (not rounded): mean = tree/128, c = x - mean,
    inv = rsqrtf(tree(c*c)/128 + eps) per the variant, n = c*inv*w + b per the variant."""
    ar = Arith(namespace(x)) if arith is None else arith
    n = _f32(x.shape[-1], x)
    mean = ar.div(tree_sum(x, arith=ar), n)
    centered = ar.sub(x, mean[:, None])
    variance = ar.add(ar.div(tree_sum(ar.mul(centered, centered), arith=ar), n), _f32(epsilon, x))
    inv = rsqrt32(variance)
    if variant.rsqrt == "down":
        inv = nextafter(inv, 0.0)
    elif variant.rsqrt == "up":
        inv = nextafter(inv, float("inf"))
    scaled = ar.mul(centered, inv[:, None])
    if variant.fma:
        return ar.fma(scaled, weight, bias)
    return ar.add(ar.mul(scaled, weight), bias)


def k_frontend(k32: Any, weight: Any, bias: Any, epsilon: Any, cos: Any, sin: Any, is_neox: bool,
               kind: ScalarKind, variant: FrontEnd, *, arith: Arith | None = None) -> Any:
    """K rows [n, 128] float32 -> the values the quantizer sees: LayerNorm, all 128 rounded to
    scalar_t, RoPE on dims < 64 (partners from the normalised row), those rounded again."""
    with ieee_quiet(namespace(k32)):
        normed = round_to(layer_norm(k32, weight, bias, epsilon, variant, arith=arith), kind)
        rotated = rope(normed, cos, sin, is_neox, variant.fma, kind != "fp32", arith=arith)
        normed[:, :ROPE_DIM] = round_to(rotated, kind)
    return normed
