"""E8M0 (UE8M0) scale bytes: value 2^(e - 127); 0xFF is NaN; no zero, no sign.

Decoders disagree about byte 0 (2^-127, or 0.0 in Triton 3.6's Hopper emulation) and byte 255
(NaN, or Inf where a kernel computes exp2(128)): the profile says which.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_uint8, choice
from mxgate.oracle.xp import pow2_f32, table_on, take


def decode_e8m0(codes: Any, profile: str | _profiles.Profile = "gfx950") -> Any:
    """e8m0 bytes -> float32 scale values under the profile's byte-0 / byte-255 rules."""
    p = _profiles.get(profile)
    codes = as_uint8(codes, "codes")
    values = _values(choice(p.byte0, "profile.byte0", ("pow2", "zero")),
                     choice(p.byte255, "profile.byte255", ("nan", "inf")))
    return take(table_on(values, codes), codes)


@cache
def _values(byte0: str, byte255: str) -> np.ndarray:
    """float32 value of every byte: 2^(byte - 127), byte 255 NaN or Inf, byte 0 2^-127 or 0."""
    values = pow2_f32(np.arange(255) - 127)
    values = np.append(values, np.float32(np.inf if byte255 == "inf" else np.nan)).astype(np.float32)
    if byte0 == "zero":
        values[0] = 0.0
    values.setflags(write=False)
    return values
