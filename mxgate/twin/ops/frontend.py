"""The float32 front end of the indexer op on torch tensors: the oracle's ``ops.frontend``
(RoPE, LayerNorm, rounding points), one IEEE rounding per operation, NaN bits by ``Arith``."""

from __future__ import annotations

import torch

from mxgate.oracle.ops.frontend import HALF, HEAD_DIM, ROPE_DIM, FrontEnd, ScalarKind
from mxgate.twin._bits import bits_f32
from mxgate.twin.formats.bf16 import round_bf16
from mxgate.twin.ops.f32math import Arith, f16_bits_to_f32, neg, nextafter_down, nextafter_up, round_f16, rsqrt32

__all__ = ["HEAD_DIM", "ROPE_DIM", "k_frontend", "q_frontend", "round_to", "to_f32"]

_TINY = 2.0**-126
_HUGE = float(torch.finfo(torch.float32).max)


def to_f32(raw: torch.Tensor, kind: ScalarKind) -> torch.Tensor:
    """Stored values (bf16 as int16/uint16 bit patterns or torch.bfloat16, float16 as its
    bits or torch.float16, float32) -> a new float32 tensor, exactly."""
    if kind == "bf16":
        return bits_f32((raw.view(torch.int16).to(torch.int32) & 0xFFFF) << 16)
    if kind == "fp16":
        return f16_bits_to_f32(raw.view(torch.int16).to(torch.int32) & 0xFFFF)
    return raw.to(torch.float32).clone()


def round_to(x: torch.Tensor, kind: ScalarKind) -> torch.Tensor:
    """float32 -> the nearest scalar_t value (nearest even), as float32 (the oracle's NaN rules)."""
    if kind == "bf16":
        return round_bf16(x)
    if kind == "fp16":
        return round_f16(x)
    return x


def _mul_add(ar: Arith, x: torch.Tensor, c: torch.Tensor, other: torch.Tensor, fma: bool,
             exact_products: bool) -> torch.Tensor:
    product = ar.mul(x, c)
    out = ar.add(product, other)
    if not fma:
        return out
    if not exact_products:
        return ar.fma(x, c, other)
    magnitude = product.abs()
    suspect = (magnitude < _TINY) | (magnitude > _HUGE)
    where = torch.nonzero(suspect.reshape(-1)).reshape(-1)
    if where.numel():
        shape = out.shape
        xb, cb, ob = (torch.broadcast_to(t, shape).reshape(-1)[where] for t in (x, c, other))
        out = out.reshape(-1).clone()
        out[where] = ar.fma(xb, cb, ob)
        out = out.reshape(shape)
    return out


def rope(ar: Arith, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, is_neox: bool, fma: bool,
         exact_products: bool) -> torch.Tensor:
    """The oracle's ``rope``: the first 64 dims of x rotated (a new float32 [..., 64])."""
    if is_neox:
        lead, trail = x[..., :HALF], x[..., HALF:ROPE_DIM]
    else:
        lead, trail = x[..., 0:ROPE_DIM:2], x[..., 1:ROPE_DIM:2]
    new_lead = _mul_add(ar, lead, cos, neg(ar.mul(trail, sin)), fma, exact_products)
    new_trail = _mul_add(ar, trail, cos, ar.mul(lead, sin), fma, exact_products)
    if is_neox:
        return torch.cat([new_lead, new_trail], dim=-1)
    return torch.stack([new_lead, new_trail], dim=-1).reshape(x.shape[:-1] + (ROPE_DIM,))


def q_frontend(ar: Arith, q32: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, is_neox: bool,
               kind: ScalarKind, fma: bool) -> torch.Tensor:
    """Q rows [n, H, 128] float32 (modified in place and returned): RoPE on dims < 64, rounded."""
    rotated = rope(ar, q32, cos[:, None, :], sin[:, None, :], is_neox, fma, kind != "fp32")
    q32[..., :ROPE_DIM] = round_to(rotated, kind)
    return q32


def tree_sum(ar: Arith, x: torch.Tensor) -> torch.Tensor:
    """Balanced pairwise sum over the last axis (a power of two), natural order, float32."""
    while x.shape[-1] > 1:
        x = ar.add(x[..., 0::2], x[..., 1::2])
    return x[..., 0]


def layer_norm(ar: Arith, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, epsilon: torch.Tensor,
               variant: FrontEnd) -> torch.Tensor:
    n = torch.tensor(float(x.shape[-1]), dtype=torch.float32, device=x.device)
    mean = ar.div(tree_sum(ar, x), n)
    centered = ar.sub(x, mean[:, None])
    variance = ar.add(ar.div(tree_sum(ar, ar.mul(centered, centered)), n), epsilon)
    inv = rsqrt32(variance)
    if variant.rsqrt == "down":
        inv = nextafter_down(inv)
    elif variant.rsqrt == "up":
        inv = nextafter_up(inv)
    scaled = ar.mul(centered, inv[:, None])
    if variant.fma:
        return ar.fma(scaled, weight, bias)
    return ar.add(ar.mul(scaled, weight), bias)


def k_frontend(ar: Arith, k32: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, epsilon: torch.Tensor,
               cos: torch.Tensor, sin: torch.Tensor, is_neox: bool, kind: ScalarKind,
               variant: FrontEnd) -> torch.Tensor:
    """K rows [n, 128] float32 -> the values the quantizer sees (the oracle's ``k_frontend``)."""
    normed = round_to(layer_norm(ar, k32, weight, bias, epsilon, variant), kind)
    rotated = rope(ar, normed, cos, sin, is_neox, variant.fma, kind != "fp32")
    normed = normed.clone()
    normed[:, :ROPE_DIM] = round_to(rotated, kind)
    return normed
