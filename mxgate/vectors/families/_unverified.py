"""Profile choices SPEC.md marks unverified, and the admissible alternatives they open.

A case whose outputs depend on such a choice gets an ``acceptable`` result under that profile:
the oracle's modelled output plus the outputs of the other plausible choices. Alternatives
that need a profile variant the fast oracle has no table for are computed with the exact
model (``mxgate.oracle.exact``), one value at a time: the cases that need it are small.
"""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import numpy as np

from mxgate.oracle import exact
from mxgate.oracle import profiles as _profiles

NAN_RULES: tuple[str, ...] = get_args(_profiles.NanRule)

_GFX950_NAN = "SPEC 2: the gfx950 NaN rule (+-6 with the NaN's sign) comes from AMD's emulation and device test, not measured here"
_DEEPGEMM_NAN = "SPEC 2: the DeepGEMM reference's NaN code (min(|NaN|, 6)) is not measured here"
NAN_REASONS: dict[str, str] = {
    "gfx950": _GFX950_NAN,
    "aiter-per1x32": _GFX950_NAN,
    "deepgemm": _DEEPGEMM_NAN,
    "ocp": "OCP MX v1.0 leaves NaN conversion implementation-defined",
    "microxcaling": "microxcaling emulates in float: a NaN block stays NaN, which no E2M1 code represents",
}

LOG2F_REASON = (
    "SPEC 3: this scale is ceil(log2(amax/6)) with torch.log2, modelled as a correctly rounded log2f; "
    "a log2 that rounds differently near a power of two gives the bitwise ceil_pow2 scale"
)
UE8M0_REASON = (
    "SPEC 4: ceil(log2f(s)) on the device's v_log_f32 (~1 ulp) is unverified; "
    "the bitwise ceil_pow2 is also admissible"
)


def nan_variants(p: _profiles.Profile) -> list[tuple[str, _profiles.Profile]]:
    """(label, variant) for every other NaN rule, when the profile's own rule is unverified."""
    if p.name not in NAN_REASONS:
        return []
    return [(f"NaN rule {rule!r}", replace(p, nan=rule)) for rule in NAN_RULES if rule != p.nan]


def exact_encode_e2m1(x: np.ndarray, p: _profiles.Profile) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).reshape(-1)
    codes = [exact.encode_e2m1(int(b), p) for b in bits]
    return np.array(codes, dtype=np.uint8).reshape(np.shape(x))


def exact_quantize_mx(x: np.ndarray, p: _profiles.Profile, group: int = 32) -> tuple[np.ndarray, np.ndarray]:
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
