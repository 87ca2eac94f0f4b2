"""Which profiles the twin computes: every one, since the oracle's own code runs on the tensors.

Kept for its callers (the gate's device reference, the device tests) until they stop asking;
``unmodelled`` names nothing and ``models`` is True for every profile.
"""

from __future__ import annotations

from mxgate.oracle import profiles as _profiles


def unmodelled(profile: str | _profiles.Profile) -> dict[str, str]:
    """field -> value for each rule of ``profile`` that the twin does not have: none."""
    if isinstance(profile, str):
        _profiles.get(profile)  # an unknown name is still an error
    return {}


def models(profile: str | _profiles.Profile) -> bool:
    return not unmodelled(profile)
