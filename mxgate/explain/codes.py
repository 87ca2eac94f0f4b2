"""Code arithmetic the classifier needs: decoding into sign / exponent / mantissa / value,
E2M1 midpoints and rounding intervals, E4M3 special codes."""

from __future__ import annotations

import numpy as np

from mxgate import oracle

E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_MAX = 7  # magnitude index of 6.0
# Rounding interval of each magnitude index (closed: ties may go either way). Zero covers both
# signs because profiles that clear the sign map small negatives to +0.
_E2M1_LO = np.array([0.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_E2M1_HI = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, np.inf])
MIDPOINTS = (E2M1_MAGNITUDES[:-1] + E2M1_MAGNITUDES[1:]) / 2  # 0.25 ... 5.0


def pow2(exponent: np.ndarray) -> np.ndarray:
    """2.0**exponent in float64 for int arrays (exact for |exponent| < 1022)."""
    return np.ldexp(np.ones(np.shape(exponent)), np.asarray(exponent, dtype=np.int64))


def e2m1_fields(codes: np.ndarray) -> Fields:
    """(sign, exponent field, mantissa bit, value) of 4-bit codes."""
    c = np.asarray(codes, dtype=np.uint8) & 0xF
    return c >> 3, (c >> 1) & 3, c & 1, oracle.decode_e2m1(c)


def e4m3_fields(codes: np.ndarray, variant: str) -> Fields:
    c = np.asarray(codes, dtype=np.uint8)
    return c >> 7, (c >> 3) & 0xF, c & 7, oracle.decode_e4m3(c, variant)


Fields = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def e8m0_fields(codes: np.ndarray, profile: object) -> Fields:
    c = np.asarray(codes, dtype=np.uint8)
    zero = np.zeros(c.shape, np.uint8)
    return zero, c, zero, oracle.decode_e8m0(c, profile)


def e2m1_interval(codes: np.ndarray, scale_exp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed interval [lo, hi] of real inputs that can round to each code at scale 2^(s-127).

    Used without input: two codes at two scales can come from one input only if their
    intervals overlap.
    """
    c = np.asarray(codes, dtype=np.uint8) & 0xF
    mag = c & 7
    factor = pow2(np.asarray(scale_exp, dtype=np.int64) - 127)
    lo, hi = _E2M1_LO[mag] * factor, _E2M1_HI[mag] * factor
    negative = (c >> 3).astype(bool) & (mag != 0)
    zero = mag == 0
    lo_s = np.where(negative, -hi, np.where(zero, -hi, lo))
    hi_s = np.where(negative, -lo, hi)
    return lo_s, hi_s


def midpoint_index(xs: np.ndarray) -> np.ndarray:
    """Index k of the midpoint between magnitudes k and k+1 that |xs| equals exactly, else -1."""
    a = np.abs(np.asarray(xs, dtype=np.float64))
    k = np.searchsorted(MIDPOINTS, a)
    k = np.minimum(k, len(MIDPOINTS) - 1)
    return np.where(MIDPOINTS[k] == a, k, -1)


def tie_rules(chosen_mag: np.ndarray, mid_k: np.ndarray, negative: np.ndarray) -> list[list[str]]:
    """Tie rules (profile ``tie`` values) that send midpoint k to magnitude ``chosen_mag``."""
    out: list[list[str]] = []
    for mag, k, neg in zip(np.asarray(chosen_mag).tolist(), np.asarray(mid_k).tolist(),
                           np.asarray(negative).tolist()):
        up = mag == k + 1  # away from zero
        rules = []
        if mag % 2 == 0:
            rules.append("even")
        rules.append("away" if up else "zero")
        if up == bool(neg):  # the lower value: away from zero when negative
            rules.append("down")
        out.append(rules)
    return out


def e4m3_nan(codes: np.ndarray, variant: str) -> np.ndarray:
    c = np.asarray(codes, dtype=np.uint8)
    if variant == "fnuz":
        return c == 0x80
    return (c & 0x7F) == 0x7F


def e4m3_magnitude(codes: np.ndarray, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """(magnitude index 0..127, negative) of E4M3 codes; fnuz's 0x80 (NaN) reads as 0."""
    c = np.asarray(codes, dtype=np.uint8)
    return (c & 0x7F).astype(np.int16), (c >> 7).astype(bool)


def e4m3_max_index(variant: str) -> int:
    return 0x7E if variant == "fn" else 0x7F
