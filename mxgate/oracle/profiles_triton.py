"""The profile of triton_kernels' torch reference quantizer (docs/findings/peers.md).

Registered whenever mxgate.oracle.profiles is imported (its last lines import this module), so
the set of profile names never depends on what else a process imported; like the AITER and vLLM
profiles it is not in the base table, so the golden vectors carry no results for it.
"""

from __future__ import annotations

from mxgate.oracle import profiles

TRITON_KERNELS_ROUND_UP = profiles.register(profiles.derive(
    "triton-kernels-round-up",
    "triton-lang/triton python/triton_kernels numerics_details/mxfp.py downcast_to_mxfp_torch "
    "(DequantScaleRoundingMode.ROUND_UP, e8m0 scales)",
    scale_arithmetic="divide",
    amax_floor=None,
    nan_scale="inf",
    notes="byte = field of (bits(amax / max_q) + 0x7FFFFF) & 0x7F800000 (the bitwise ceil_pow2 of the quotient; a "
          "zero quotient gives byte 0 and a zero multiplier); elements multiplied by 1 / scale (exact: a power of "
          "two), encoded by bit manipulation with round to nearest even, saturating, NaN and Inf to +-6 with their "
          "sign. An Inf block's scale is +Inf: 1 / Inf = 0 zeroes its finite elements and turns the Inf into the "
          "default NaN (nan_scale 'inf'). A NaN amax overflows the sum into the sign and gives byte 0x00, where "
          "this profile gives 0xFF: a known finding (docs/findings/peers.md).",
    evidence="read + measured: downcast_to_mxfp_torch of triton-lang/triton 018a674f6d run by the "
             "triton-kernels-round-up backend, docs/findings/peers.md",
))
