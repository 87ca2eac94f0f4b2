"""AITER's ``indexer_k_quant_and_cache`` (its op test's ``run_torch``): each K row quantized to
FP8 with one power-of-two scale, written into the FP8 K cache at its slot.

Per token, in float32 as ``run_torch`` computes it: amax = max |k|, s = fl(amax / max) with max
the e4m3 maximum of the profile's ``fp8_variant`` (``torch.finfo(dtypes.fp8).max``), rounded up
to a power of two by the profile's ``ue8m0_rounding`` (``torch.pow(2, torch.ceil(torch.log2(s)))``
is ``log2f``); codes = e4m3(fl(k / s)) under the profile's ``fp8_variant`` and ``fp8_overflow``.
A zero or NaN amax keeps s = fl(amax / max) (0 or NaN: log2 and pow carry them), so every code of
that row is an e4m3 NaN (of the sign the host's division gives; torch's vectorised log2 and pow
may give a NaN scale of either sign). Slots below 0 are skipped; the scale is stored as float32.
"""

from __future__ import annotations

import numpy as np

from mxgate.oracle import layouts, profiles
from mxgate.oracle.formats import e4m3
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW
from mxgate.oracle.scales import ue8m0_round

HEAD_DIM = 128  # one scale per token: quant_block_size == head_dim


def token_scales(amax: np.ndarray, profile: profiles.Profile) -> np.ndarray:
    """float32 [T]: the power-of-two scale of each row's amax (0 and NaN carried through)."""
    s = (amax / np.float32(e4m3.max_value(profile.fp8_variant))).astype(np.float32)
    positive = s > 0  # False for 0 and NaN
    rounded = ue8m0_round(np.where(positive, s, np.float32(1.0)), profile.ue8m0_rounding)
    return np.where(positive, rounded, s).astype(np.float32)


def indexer_k_quant_and_cache(k_bf16: np.ndarray, kv_cache: np.ndarray, slot_mapping: np.ndarray, *,
                              preshuffle: bool = False, profile: str | profiles.Profile = "gfx950") -> np.ndarray:
    """k_bf16 uint16 [T, 128] (bf16 bit patterns); kv_cache uint8 [num_blocks, block_size, 132]
    (``aiter-fp8-kv``, or ``aiter-fp8-kv-preshuffle``); slot_mapping int [T]. -> the cache with
    the rows written (a copy)."""
    p = profiles.get(profile) if isinstance(profile, str) else profile
    bits = np.asarray(k_bf16)
    if bits.dtype != np.uint16 or bits.ndim != 2 or bits.shape[1] != HEAD_DIM:
        raise ValueError(f"k_bf16 must be uint16 bf16 bit patterns [T, {HEAD_DIM}], got {bits.dtype} {bits.shape}")
    k = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    amax = np.max(np.abs(k), axis=1)  # NumPy's max carries NaN, as torch.max does
    s = token_scales(amax, p)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scaled = (k / s[:, None]).astype(np.float32)
    codes = e4m3.encode_e4m3(scaled, p.fp8_variant, saturate=SATURATE_OF_OVERFLOW[p.fp8_overflow])
    out = np.array(kv_cache, dtype=np.uint8, copy=True)
    layouts.get("aiter-fp8-kv-preshuffle" if preshuffle else "aiter-fp8-kv").scatter(
        out, codes, s, slots=np.asarray(slot_mapping, np.int64))
    return out
