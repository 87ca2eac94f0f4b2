"""E8M0 (UE8M0) scale bytes: value 2^(e - 127); 0xFF is NaN; no zero, no sign.

Decoders disagree about byte 0 (2^-127, or 0.0 in Triton 3.6's Hopper emulation) and byte 255
(NaN, or Inf where a kernel computes exp2(128)): the profile says which.
"""

from __future__ import annotations

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_uint8
from mxgate.oracle.bits import pow2_f32


def decode_e8m0(codes: np.ndarray, profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """e8m0 bytes -> float32 scale values under the profile's byte-0 / byte-255 rules."""
    p = _profiles.get(profile)
    codes = as_uint8(codes, "codes")
    values = pow2_f32(np.minimum(codes.astype(np.int64), 254) - 127)
    special = np.float32(np.inf if p.byte255 == "inf" else np.nan)
    values = np.where(codes == 0xFF, special, values)
    if p.byte0 == "zero":
        values = np.where(codes == 0, np.float32(0.0), values)
    return values.astype(np.float32)
