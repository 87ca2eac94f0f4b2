"""Which profiles the twin computes: those whose rules it has, value by value.

A rule added to the oracle first (a new scale policy, a new byte-0 divisor) is not in the
twin until it is written there; for a profile that uses one, the gate's device reference
computes on the host with the oracle instead (``mxgate.twin.reference.on_device``), so the
verdict stays the oracle's, only slower. tests/test_twin.py proves the twin on every profile it
models and pins the list of those it does not.
"""

from __future__ import annotations

from mxgate.oracle import profiles as _profiles

# field -> the values the twin has rules for (fields not listed: every value)
MODELLED: dict[str, frozenset[str]] = {
    "scale_policy": frozenset({"rceil", "rceil_log2f", "floor", "ceil", "even"}),
    "special_scale": frozenset({"nan_byte", "clamped"}),
    "nan_scale": frozenset({"exponent", "nan"}),
    "scale0_divisor": frozenset({"pow2"}),
}


def unmodelled(profile: str | _profiles.Profile) -> dict[str, str]:
    """field -> value for each rule of ``profile`` that the twin does not have."""
    p = _profiles.get(profile) if isinstance(profile, str) else profile
    return {field: getattr(p, field) for field, values in MODELLED.items() if getattr(p, field) not in values}


def models(profile: str | _profiles.Profile) -> bool:
    return not unmodelled(profile)
