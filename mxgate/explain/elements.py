"""Element-level rules on code pairs (vectorised over differing units).

Each function returns a boolean mask; the classifier applies them in precedence order to the
units no earlier rule took. ``covered`` marks units whose input element is known: there the
input decides and the no-input fallback does not apply.
"""

from __future__ import annotations

import numpy as np

from mxgate.explain import codes

E8M0_NAN = 255


# ---- E2M1 (4-bit data) ---------------------------------------------------------------------


def fp4_nan_inf(ec: np.ndarray, ac: np.ndarray, se: np.ndarray, sa: np.ndarray,
                x: np.ndarray, covered: np.ndarray) -> np.ndarray:
    nan_scale = (se == E8M0_NAN) | (sa == E8M0_NAN)
    special_input = covered & ~np.isfinite(x)
    # Without input the only code-level trace of a NaN/Inf rule is the max code flipping sign
    # (pos_max / neg_max rules against sign-keeping ones).
    flipped_max = ~covered & ((ec & 7) == codes.E2M1_MAX) & ((ac & 7) == codes.E2M1_MAX)
    return nan_scale | special_input | flipped_max


def fp4_sign_of_zero(ec: np.ndarray, ac: np.ndarray) -> np.ndarray:
    return ((ec & 7) == 0) & ((ac & 7) == 0)


def same_scale(se: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """The two sides used one scale (or the actual one is unknown)."""
    return (sa < 0) | (sa == se)


def fp4_saturation(ec: np.ndarray, ac: np.ndarray, xs: np.ndarray, x: np.ndarray,
                   covered: np.ndarray, same: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        beyond = covered & np.isfinite(x) & (np.abs(xs) > 6.0)
    top = np.where(np.signbit(xs), 0x8 | codes.E2M1_MAX, codes.E2M1_MAX).astype(np.uint8)
    with_input = beyond & same & ((ec == top) | (ac == top))
    me, ma = ec & 7, ac & 7
    se_, sa_ = ec >> 3, ac >> 3

    def wrapped(m1, s1, m2, s2):  # one side is +-6, the other far below it (or a zero)
        return (m1 == codes.E2M1_MAX) & (m2 <= 5) & ((s1 == s2) | (m2 == 0))

    without = ~covered & same & (wrapped(me, se_, ma, sa_) | wrapped(ma, sa_, me, se_))
    return with_input | without


def fp4_tie(ec: np.ndarray, ac: np.ndarray, xs: np.ndarray, covered: np.ndarray,
            same: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask, midpoint index k or -1). With input: |x/S| is midpoint k and the codes are
    magnitudes k and k+1 with x's sign (a zero may carry either sign)."""
    me, ma = (ec & 7).astype(np.int8), (ac & 7).astype(np.int8)
    lo, hi = np.minimum(me, ma), np.maximum(me, ma)
    adjacent = (hi - lo == 1) & (((ec >> 3) == (ac >> 3)) | (lo == 0))
    k = np.full(ec.shape, -1, np.int16)
    cov = np.flatnonzero(covered)
    with_input = np.zeros(ec.shape, bool)
    if cov.size:  # only units with input can be checked against a midpoint
        kc = codes.midpoint_index(xs[cov])
        neg = np.signbit(xs[cov])
        e_ok = ((ec[cov] >> 3).astype(bool) == neg) | (me[cov] == 0)
        a_ok = ((ac[cov] >> 3).astype(bool) == neg) | (ma[cov] == 0)
        hit = same[cov] & (kc >= 0) & (lo[cov] == kc) & (hi[cov] == kc + 1) & e_ok & a_ok
        with_input[cov] = hit
        k[cov] = np.where(hit, kc, -1)
    without = ~covered & same & adjacent
    return with_input | without, k


def fp4_group_consistent(exp_codes: np.ndarray, act_codes: np.ndarray, se: np.ndarray,
                         sa: np.ndarray) -> np.ndarray:
    """Per group ([n, 32] codes, [n] scales): could one input give the expected codes at se
    and the actual codes at sa? (Every element's two rounding intervals overlap.)"""
    elo, ehi = codes.e2m1_interval(exp_codes, se[:, None])
    alo, ahi = codes.e2m1_interval(act_codes, sa[:, None])
    return np.all((elo <= ahi) & (alo <= ehi), axis=1)


# ---- E4M3 (FP8 data bytes) -----------------------------------------------------------------


def fp8_rules(ec: np.ndarray, ac: np.ndarray, variant: str) -> dict[str, np.ndarray]:
    """Masks for nan_inf, sign_of_zero, saturation, tie_direction (no input: unverified)."""
    en, an = codes.e4m3_nan(ec, variant), codes.e4m3_nan(ac, variant)
    em, eneg = codes.e4m3_magnitude(ec, variant)
    am, aneg = codes.e4m3_magnitude(ac, variant)
    top = codes.e4m3_max_index(variant)
    # overflow: one side saturated to +-max, the other gave NaN (AMD's non-saturating cvt)
    sat = (en & ~an & (am == top)) | (an & ~en & (em == top))
    nan = (en | an) & ~sat
    zero = np.zeros(ec.shape, bool) if variant == "fnuz" else ((ec & 0x7F) == 0) & ((ac & 0x7F) == 0)
    tie = ~en & ~an & (eneg == aneg) & (np.abs(em - am) == 1)
    return {"nan_inf": nan, "sign_of_zero": zero, "saturation": sat, "tie_direction": tie}


# ---- scales ---------------------------------------------------------------------------------


def e8m0_rules(eb: np.ndarray, ab: np.ndarray) -> dict[str, np.ndarray]:
    nan = (eb == E8M0_NAN) | (ab == E8M0_NAN)
    off1 = ~nan & (np.abs(eb.astype(np.int16) - ab.astype(np.int16)) == 1)
    return {"nan_inf": nan, "scale_off_by_one": off1}


def f32_scale_rules(ew: np.ndarray, aw: np.ndarray) -> dict[str, np.ndarray]:
    """Per float32 scale word: NaN/Inf on either side, or one binade apart."""
    nan = ~np.isfinite(ew) | ~np.isfinite(aw)
    with np.errstate(invalid="ignore", over="ignore"):
        binade = ~nan & (ew != 0) & ((aw == ew * 2) | (aw * 2 == ew))
    return {"nan_inf": nan, "scale_off_by_one": binade}
