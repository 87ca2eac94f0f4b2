"""MX block quantization: groups of ``group`` float32 -> packed E2M1 codes + one e8m0 byte."""

from __future__ import annotations

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.parallel import run_ranges
from mxgate.oracle.arguments import as_float32, as_uint8, check_group
from mxgate.oracle.bits import ABS32, EXP32
from mxgate.oracle.formats import e2m1
from mxgate.oracle.formats.e8m0 import decode_e8m0
from mxgate.oracle.rounding import CHUNK, lookup
from mxgate.oracle.scales import e8m0_scale


def _amax_rows(groups: np.ndarray, first: int, last: int, out: np.ndarray, ignore_nan: bool) -> None:
    """out[first:last] = max magnitude bits of groups[first:last], chunked to stay in cache."""
    rows = max(CHUNK // groups.shape[1], 1)
    for start in range(first, last, rows):
        stop = min(start + rows, last)
        magnitude = groups[start:stop] & ABS32
        if ignore_nan:
            magnitude[magnitude > EXP32] = 0
        np.max(magnitude, axis=1, out=out[start:stop])


def quantize_mx(
    x: np.ndarray, profile: str | _profiles.Profile = "gfx950", group: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """x [..., N] (float32 or bf16) -> (packed uint8 [..., N/2], e8m0 uint8 [..., N/group]).

    Each group's scale follows the profile's policy from the group's amax; each element is
    divided by the scale in float32 and rounded to E2M1 under the profile.
    """
    p = _profiles.get(profile)
    x32 = as_float32(x, "x")
    if x32.ndim == 0:
        raise ValueError("x must have at least one dimension")
    check_group(x32.shape[-1], group, "x")
    groups = np.ascontiguousarray(x32).reshape(-1, group)
    bits = groups.view(np.uint32)
    amax = np.empty(groups.shape[0], dtype=np.uint32)
    scales = np.empty(groups.shape[0], dtype=np.uint8)
    packed = np.empty((groups.shape[0], group // 2), dtype=np.uint8)
    table = e2m1.table(p)
    reciprocals = e2m1.e8m0_divisor_reciprocals(p)
    rows_per_chunk = max(CHUNK // group, 1)

    def work(first: int, last: int) -> None:
        # One thread does every stage for its rows: amax, scales, then scale-and-round, so the
        # scale arithmetic is parallel too and each chunk is read while it is still in cache.
        _amax_rows(bits, first, last, amax, p.amax_nan == "ignore")
        scales[first:last] = e8m0_scale(amax[first:last].view(np.float32), p)
        factor = reciprocals[scales[first:last]]
        codes = np.empty((rows_per_chunk, group), dtype=np.uint8)
        for start in range(first, last, rows_per_chunk):
            stop = min(start + rows_per_chunk, last)
            part = codes[: stop - start]
            scaled = groups[start:stop] * factor[start - first : stop - first, None]
            lookup(scaled.view(np.uint32), table, 11, out=part)
            _pack_into(part, packed[start:stop])

    run_ranges(groups.shape[0], work, weight=group)
    if p.nan_scale == "nan":
        # Blocks under a NaN scale take the slow path, which picks the surviving NaN explicitly.
        nan_blocks = scales.reshape(-1) == 0xFF
        if nan_blocks.any():
            slow = e2m1.encode_e2m1(groups[nan_blocks], p, scale=scales.reshape(-1)[nan_blocks, None])
            packed[nan_blocks] = e2m1.pack_nibbles(slow)
    packed = packed.reshape(x32.shape[:-1] + (x32.shape[-1] // 2,))
    return packed, scales.reshape(x32.shape[:-1] + (x32.shape[-1] // group,))


def _pack_into(codes: np.ndarray, out: np.ndarray) -> None:
    # A little-endian uint16 pair is c0 | c1 << 8 with codes < 16, so (pair >> 4) | pair has
    # c0 | c1 << 4 in its low byte; the cast keeps exactly that byte.
    pairs = codes.view(np.uint16)
    merged = pairs >> np.uint16(4)
    merged |= pairs
    np.copyto(out, merged, casting="unsafe")


def dequantize_mx(
    packed: np.ndarray, e8m0: np.ndarray, profile: str | _profiles.Profile = "gfx950", group: int = 32
) -> np.ndarray:
    """(packed [..., N/2], e8m0 [..., N/group]) -> float32 [..., N] under the profile's e8m0 decoding."""
    p = _profiles.get(profile)
    packed = as_uint8(packed, "packed")
    e8m0 = as_uint8(e8m0, "e8m0")
    codes = e2m1.unpack_nibbles(packed)
    check_group(codes.shape[-1], group, "packed (unpacked)")
    if e8m0.shape != codes.shape[:-1] + (codes.shape[-1] // group,):
        raise ValueError(
            f"e8m0 must have shape {codes.shape[:-1] + (codes.shape[-1] // group,)} for packed {packed.shape}, got {e8m0.shape}"
        )
    if codes.size == 0:
        return np.zeros(codes.shape, dtype=np.float32)
    values = e2m1.VALUES[codes].reshape(codes.shape[:-1] + (-1, group))
    scale = decode_e8m0(e8m0, p)[..., None]
    return (values * scale).astype(np.float32).reshape(codes.shape)
