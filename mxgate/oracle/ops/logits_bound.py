"""The rigorous error bounds of the scorers (derivations in docs/ops/logits.md).

Notation: u = 2^-24 (float32 unit roundoff), eta = 2^-150 (largest absolute error of a
float32 rounding that lands in the subnormal range), gamma_k = k u / (1 - k u).
Per cell (row, token): r_h = relu(qk_h) exact, w_h the weight, delta_h a bound on
|qk_h(backend) - qk_h| (the qk model), and
    R = sum_h r_h |w_h|,  D = sum_h delta_h |w_h|,  rho = sum_h r_h,  Delta = sum_h delta_h.
All bound arithmetic runs in float64 on non-negative terms; the result is multiplied by
(1 + 2^-40), which covers the float64 rounding of its own evaluation (at most a few hundred
operations of relative error 2^-53 each).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

U = math.ldexp(1.0, -24)
ETA = math.ldexp(1.0, -150)
U_BF16 = math.ldexp(1.0, -8)
ETA_BF16 = math.ldexp(1.0, -134)
PRESENTATION = math.ldexp(1.0, -51)  # |value - X| <= (2 u64 + u64^2) |X| for value = fl64(ws * fl64(Y))
INFLATE = 1.0 + math.ldexp(1.0, -40)
FP32_SAFE = math.ldexp(1.0, 125)  # above this the fp32 path may overflow: no finite bound is claimed
QK_MODELS = ("fp32-groups", "exact", "any-order")


def gamma(k: int, u: float = U) -> float:
    """gamma_k = k u / (1 - k u), rounded up to float64."""
    if k <= 0:
        return 0.0
    exact = Fraction(k) * Fraction(u) / (1 - Fraction(k) * Fraction(u))
    g = float(exact)
    return g if Fraction(g) >= exact else float(np.nextafter(g, np.inf))


def qk_coeffs(model: str, *, groups: int, k_tiles: int, head_dim: int) -> tuple[float, int]:
    """(c, n): delta_h = c * A_h + n * eta, where A_h is the model's absolute sum (below)."""
    if model == "exact":
        return gamma(k_tiles), k_tiles
    if model == "fp32-groups":
        return gamma(groups), groups
    if model == "any-order":
        return gamma(head_dim), head_dim
    raise ValueError(f"bound_model must be one of {', '.join(map(repr, QK_MODELS))}; got {model!r}")


def qk_delta(model: str, *, qk_abs: np.ndarray | None, group_abs: np.ndarray | None, groups: int,
             tile_abs: np.ndarray | None, k_tiles: int, dim_abs: np.ndarray | None,
             head_dim: int) -> np.ndarray:
    """delta_h, a bound on |qk(backend) - qk(exact)| under the named qk model.

    exact:        each 128-dim MFMA step is exact and rounds once into the fp32 accumulator:
                  gamma_{k_tiles} * sum_kt |dot_kt| + k_tiles * eta  (|qk| when k_tiles = 1).
    fp32-groups:  each 32-dim group dot is exact, rounded to fp32, and the groups are summed in
                  any fp32 order: gamma_G * sum_g |dot_g| + G * eta.  (Covers 'exact'.)
    any-order:    every product exact, the head_dim products summed in any fp32 order:
                  gamma_D * sum_d |q_d k_d| + D * eta.  (Covers both others.)
    """
    c, n = qk_coeffs(model, groups=groups, k_tiles=k_tiles, head_dim=head_dim)
    if model == "exact":
        a = qk_abs if tile_abs is None else tile_abs
    elif model == "fp32-groups":
        a = group_abs
    else:
        a = dim_abs
    return c * a + n * ETA


def decode_bound(*, R: np.ndarray, D: np.ndarray, rho: np.ndarray, Delta: np.ndarray,
                 value: np.ndarray, ws: float, heads: int) -> np.ndarray:
    """Bound on |out - X| for out = fl(sum_h fl(relu(qk_h) w_h) * ws) in any head order, and
    for the prefill arrangement (w' = fl(w ws) folded first, then products or fmas): the larger
    of the two, so a backend may place weight_scale either way.

    decode:  (1+u)|ws| [gamma_H (R + D) + D + 2 H eta] + u |X| + eta
    prefill: gamma_H [(1+u)|ws|(R + D) + eta (rho + Delta)] + (1+u)|ws| D + eta Delta
             + u |ws| R + eta (rho + 2 H)
    plus the float64 presentation error of ``value`` (2^-51 |value|).
    """
    a = abs(float(ws))
    g = gamma(heads)
    dec = (1 + U) * a * (g * (R + D) + D + 2 * heads * ETA) + U * np.abs(value) + ETA
    pre = prefill_bound(R=R, D=D, rho=rho, Delta=Delta, ws=ws, heads=heads, finish=False)
    return _finish(np.maximum(dec, pre), value, scale=R + D + rho + Delta, ws=ws)


def prefill_bound(*, R: np.ndarray, D: np.ndarray, rho: np.ndarray, Delta: np.ndarray,
                  ws: float, heads: int, value: np.ndarray | None = None,
                  finish: bool = True) -> np.ndarray:
    """The prefill arrangement alone (see decode_bound)."""
    a = abs(float(ws))
    g = gamma(heads)
    b = (g * ((1 + U) * a * (R + D) + ETA * (rho + Delta)) + (1 + U) * a * D + ETA * Delta
         + U * a * R + ETA * (rho + 2 * heads))
    if not finish:
        return b
    return _finish(b, value, scale=R + D + rho + Delta, ws=ws)


def fp8_bound(*, R: np.ndarray, Do: np.ndarray, value: np.ndarray, heads: int,
              scale: np.ndarray) -> np.ndarray:
    """FP8 scorer: out = sum_h fl(relu(fl(qk_h * ks)) * w_h), any head order, no final multiply.

    gamma_H (R + Do) + Do + 2 H eta, with Do = sum_h delta_o_h |w_h| and
    delta_o_h = |ks| (1+u) delta_h + u |ks| |qk_h| + eta (the rounding of qk * ks).
    """
    b = gamma(heads) * (R + Do) + Do + 2 * heads * ETA
    return _finish(b, value, scale=scale, ws=1.0)


def bf16_chain_bound(*, R: np.ndarray, Dp: np.ndarray, P: np.ndarray, value: np.ndarray,
                     heads: int, scale: np.ndarray) -> np.ndarray:
    """sglang profile: s = bf16(qk), p = bf16(relu(s) w), S = any-order fp32 sum, out = bf16(S).

    With Dp = sum_h |p_h - r_h w_h| bounds and P = sum_h |p_h| bounds (from the caller):
    (1 + u_b) [Dp + gamma_{H-1} P] + u_b |X| + eta_b.
    """
    b = (1 + U_BF16) * (Dp + gamma(heads - 1) * P) + U_BF16 * np.abs(value) + ETA_BF16
    return _finish(b, value, scale=scale, ws=1.0)


def _finish(b: np.ndarray, value: np.ndarray | None, *, scale: np.ndarray, ws: float) -> np.ndarray:
    """Add the presentation error, inflate for the bound's own rounding, and give up (inf)
    where the fp32 path could overflow or the value is not finite."""
    if value is not None:
        b = b + PRESENTATION * np.abs(np.where(np.isfinite(value), value, 0.0))
    b = b * INFLATE
    risky = scale * max(1.0, abs(float(ws))) >= FP32_SAFE
    if value is not None:
        risky = risky | ~np.isfinite(value)
    return np.where(risky, np.inf, b)
