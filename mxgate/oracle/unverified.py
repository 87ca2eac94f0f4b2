"""Alternatives a profile's unverified choices open, and the exact model that computes them.

A case whose outputs depend on such a choice (``Profile.unverified``) gets an ``acceptable``
result under that profile: the oracle's modelled output plus the outputs of the other values
the profile admits there. Alternatives that need a profile variant the fast oracle has no table
for are computed with the exact model (``mxgate.oracle.exact``), one value at a time: the cases
that need it are small.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mxgate.oracle import exact
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP

SCALE_255_REASON = (
    "SPEC 3 leaves the element codes of a block whose scale byte is 0xFF (NaN/Inf amax) unmeasured: the "
    "profile's nan_scale divides by 2^128 (hardware converters, which read the scale's exponent field) or by "
    "NaN (software quantizers: every element NaN, then the NaN rule)"
)


def reason(p: _profiles.Profile, field: str) -> str:
    """Why the profile's value of ``field`` is unverified, or "" when it is measured."""
    choice = p.unverified_choice(field)
    return choice.why if choice is not None else ""


def nan_variants(p: _profiles.Profile) -> list[tuple[str, _profiles.Profile]]:
    """(label, variant) for every other NaN rule, when the profile's own rule is unverified."""
    return [(f"NaN rule {rule!r}", replace(p, nan=rule)) for rule in p.admitted_values("nan")]


def exact_encode_e2m1(x: np.ndarray, p: _profiles.Profile) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).reshape(-1)
    codes = [exact.encode_e2m1(int(b), p) for b in bits]
    return np.array(codes, dtype=np.uint8).reshape(np.shape(x))


def exact_quantize_mx(x: np.ndarray, p: _profiles.Profile, group: int = GROUP) -> tuple[np.ndarray, np.ndarray]:
    rows = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).reshape(-1, np.shape(x)[-1])
    packed, scales = [], []
    for row in rows:
        pk, sc = exact.quantize_mx_row([int(b) for b in row], p, group)
        packed.append(pk)
        scales.append(sc)
    lead = np.shape(x)[:-1]
    return (
        np.array(packed, dtype=np.uint8).reshape(lead + (np.shape(x)[-1] // 2,)),
        np.array(scales, dtype=np.uint8).reshape(lead + (np.shape(x)[-1] // group,)),
    )
