"""MX block quantization: groups of ``group`` float32 -> packed E2M1 codes (MXFP4) or e4m3fn
codes (MXFP8) + one e8m0 byte."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.parallel import run_blocks, scratch
from mxgate.oracle.arguments import as_float32, as_uint8, check_group
from mxgate.oracle.bits import ABS32, EXP32
from mxgate.oracle.block_element import E4M3FN
from mxgate.oracle.formats import e2m1
from mxgate.oracle.formats.e4m3 import encode_e4m3
from mxgate.oracle.formats.e8m0 import decode_e8m0
from mxgate.oracle.scales import e8m0_scale, e8m0_scale_of_bits
from mxgate.oracle.xp import ABS, EXP, bits, device, floats, is_numpy, namespace, table_on, take, x86_nan


_BLOCK_ELEMENTS = 1 << 19  # elements per scheduled block: one e8m0_scale call, threads' unit of work
# elements per pass inside a block. Each pass is a NumPy call that holds the GIL between its
# loops, and two threads wait on each other there: at 2^18 (2^24 inputs, 9 interleaved runs, twice)
# 3.45x ml_dtypes on two threads where 2^17 gave 3.05x, and 2.4x against 2.3x on one (2^16: 2.3x
# on two)
_CHUNK_ELEMENTS = 1 << 18
_LOW32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_SHIFT = np.uint32(31 - e2m1.KEEP_BITS)  # e2m1's rounding index (see rounding.lookup)
_STICKY = np.uint32((1 << (31 - e2m1.KEEP_BITS)) - 1)


def _block_input(x: Any, profile: str | _profiles.Profile, group: int) -> tuple[_profiles.Profile, Any, int]:
    """The MX quantizers' checked arguments: (profile, x as float32, group)."""
    p = _profiles.get(profile)
    x32 = as_float32(x, "x")
    if x32.ndim == 0:
        raise ValueError("x must have at least one dimension")
    return p, x32, check_group(x32.shape[-1], group, "x")


def quantize_mx(x: Any, profile: str | _profiles.Profile = "gfx950", group: int = 32) -> tuple[Any, Any]:
    """x [..., N] (float32 or bf16) -> (packed uint8 [..., N/2], e8m0 uint8 [..., N/group]).

    Each group's scale follows the profile's policy from the group's amax; each element is
    divided by the scale in float32 and rounded to E2M1 under the profile.
    """
    p, x32, group = _block_input(x, profile, group)
    xp = namespace(x32)
    if not is_numpy(xp):
        return _quantize_mx(x32, p, group)
    groups = np.ascontiguousarray(x32).reshape(-1, group)
    count = groups.shape[0]
    scales = np.empty(count, dtype=np.uint8)
    packed = np.empty((count, group // 2), dtype=np.uint8)
    plan = _Plan(group, p)
    chunk_rows = max(_CHUNK_ELEMENTS // group, 1)
    block_rows = chunk_rows * max(_BLOCK_ELEMENTS // (chunk_rows * group), 1)

    def work(first: int, last: int) -> None:
        _quantize_block(groups, first, last, chunk_rows, plan, scales, packed)

    run_blocks(count, work, block_rows)
    if p.nan_scale != "exponent":
        # Blocks under a NaN (or Inf) scale take the slow path, which picks the surviving NaN explicitly.
        nan_blocks = scales == 0xFF
        if nan_blocks.any():
            slow = e2m1.encode_e2m1(groups[nan_blocks], p, scale=scales[nan_blocks, None])
            packed[nan_blocks] = e2m1.pack_nibbles(slow)
    packed = packed.reshape(x32.shape[:-1] + (x32.shape[-1] // 2,))
    return packed, scales.reshape(x32.shape[:-1] + (x32.shape[-1] // group,))


def _quantize_mx(x32: Any, p: _profiles.Profile, group: int) -> tuple[Any, Any]:
    """quantize_mx in whole-array steps, for any namespace: the rule the NumPy kernel below
    computes in cache-sized, transposed, threaded chunks."""
    xp = namespace(x32)
    lead, n = tuple(x32.shape[:-1]), x32.shape[-1]
    groups = xp.reshape(x32, (-1, group))
    if groups.shape[0] == 0:
        empty = xp.empty((0,), dtype=xp.uint8, device=device(x32))
        return xp.reshape(empty, lead + (n // 2,)), xp.reshape(empty, lead + (n // group,))
    scales = e8m0_scale(_group_amax(groups, p), p)
    codes = e2m1.encode_e2m1(groups, p, scale=scales[:, None])
    return xp.reshape(e2m1.pack_nibbles(codes), lead + (n // 2,)), xp.reshape(scales, lead + (n // group,))


def _group_amax(groups: Any, p: _profiles.Profile) -> Any:
    """float32 max |x| per row of groups [rows, group]; a NaN makes it NaN unless amax_nan ignores it."""
    xp = namespace(groups)
    magnitude = bits(groups) & ABS
    if p.amax_nan == "ignore":
        magnitude = xp.where(magnitude > EXP, 0, magnitude)
    return floats(xp.max(magnitude, axis=1))


def quantize_mx_e4m3fn(x: Any, profile: str | _profiles.Profile = "gfx950", group: int = 32) -> tuple[Any, Any]:
    """MXFP8: x [..., N] (float32 or bf16) -> (e4m3fn codes uint8 [..., N], e8m0 uint8 [..., N/group]).

    Each group's scale follows the profile's policy from the group's amax with E4M3FN's largest
    value 448 = 1.75 * 2^8 (where E2M1 has 6 = 1.5 * 2^2); each element is divided by the scale
    in float32 as quantize_mx divides (scale0_divisor, nan_scale) and encoded saturating:
    beyond +-448 and +-Inf to +-448, NaN keeps its sign (OCP MX v1.0 section 6.3 clamps).
    """
    p, x32, group = _block_input(x, profile, group)
    xp = namespace(x32)
    lead, n = tuple(x32.shape[:-1]), x32.shape[-1]
    groups = xp.reshape(x32, (-1, group))
    if groups.shape[0] == 0:
        empty = xp.empty((0,), dtype=xp.uint8, device=device(x32))
        return xp.reshape(empty, lead + (n,)), xp.reshape(empty, lead + (n // group,))
    with np.errstate(invalid="ignore"):  # a NaN amax or Inf / Inf: NaN by design
        scales = e8m0_scale(_group_amax(groups, p), p, element=E4M3FN)
        codes = encode_e4m3(e2m1.scaled_by_e8m0(groups, scales[:, None], p), "fn", saturate=True)
    return xp.reshape(codes, lead + (n,)), xp.reshape(scales, lead + (n // group,))


class _Plan:
    """What every block of one call shares: the layout of a transposed chunk and the tables.

    A chunk of r groups is transposed to unit-major order [units, r, lanes]: a unit is 4 lanes
    (16 bytes) when the group divides into them, else 2, and it moves as one complex128 or
    uint64 item, which copies raw bytes (NaN payloads included). Every elementwise step and
    the max over a group's units then run over long contiguous runs instead of rows of 32.
    """

    def __init__(self, group: int, p: _profiles.Profile) -> None:
        self.profile = p
        self.group = group
        self.lanes = 4 if group % 4 == 0 else 2
        self.units = group // self.lanes
        self.unit = np.dtype(np.complex128 if self.lanes == 4 else np.uint64)
        self.ignore_nan = p.amax_nan == "ignore"
        self.low, self.high = _nibble_tables(e2m1.table(p))
        # each e8m0 byte's divisor reciprocal repeated over a unit's lanes, one unit per entry:
        # one take per block gives every group's factor in the transposed chunks' lane order
        reciprocals = e2m1.e8m0_divisor_reciprocals(p)
        self.unit_reciprocals = np.repeat(reciprocals, self.lanes).view(self.unit)


def _nibble_tables(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The code table as the low nibble (even element) and the high nibble (odd element)."""
    high = (table << np.uint8(4)).astype(np.uint8)
    return table, high


def _quantize_block(groups: np.ndarray, first: int, last: int, chunk_rows: int, plan: _Plan,
                    scales: np.ndarray, packed: np.ndarray) -> None:
    """Groups [first, last): per-lane maxima per chunk into a transposed copy, the block's amax
    and scales from them, then scale-and-round each chunk from that copy straight into packed
    bytes. Work that is per group, not per element, runs once per block (fewer calls per chunk)."""
    group, lanes, units = plan.group, plan.lanes, plan.units
    rows = last - first
    # Per chunk, two buffers of its size stay in L2: ``copied`` (the sequential copy, then the
    # magnitudes) and the chunk of ``moved``; ``work`` (the indices) joins in the second pass,
    # whose even-element indices reuse the chunk of ``moved`` once its bits are read.
    moved = scratch("mx.moved", rows * group, np.uint32)  # the block, chunk by chunk transposed
    copied = scratch("mx.copied", min(rows, chunk_rows) * group, np.uint32)
    work = scratch("mx.work", min(rows, chunk_rows) * group, np.uint32)
    amax = scratch("mx.amax", rows, np.uint32)
    lane_max = scratch("mx.lane_max", rows * lanes, np.uint32)
    top = scratch("mx.top", rows, np.intp)
    low = scratch("mx.low", min(rows, chunk_rows) * group // 2, np.uint8)
    high = scratch("mx.high", min(rows, chunk_rows) * group // 2, np.uint8)
    factor = scratch("mx.factor", rows * lanes, np.float32)

    for start in range(0, rows, chunk_rows):
        r = min(chunk_rows, rows - start)
        n = r * group
        t = moved[start * group : start * group + n]
        # a sequential copy first: the transpose's strided reads then hit L2, not memory (measured)
        source = copied[:n]
        np.copyto(source.reshape(r, group), groups[first + start : first + start + r].view(np.uint32))
        np.copyto(t.view(plan.unit).reshape(units, r), source.view(plan.unit).reshape(r, units).T)
        magnitude = np.bitwise_and(t, ABS32, out=source)  # the copy is spent: reuse its buffer
        if plan.ignore_nan:
            nan = magnitude > EXP32
            if nan.any():
                magnitude[nan] = 0
        np.maximum.reduce(magnitude.reshape(units, r * lanes), axis=0, out=lane_max[start * lanes : (start + r) * lanes])

    per_lane = lane_max.reshape(rows, lanes)
    np.maximum(per_lane[:, 0], per_lane[:, 1], out=amax)
    for lane in range(2, lanes):
        np.maximum(amax, per_lane[:, lane], out=amax)
    block_scales = scales[first:last]
    e8m0_scale_of_bits(amax, plan.profile, out=block_scales, scratch=top)
    np.take(plan.unit_reciprocals, block_scales, out=factor.view(plan.unit), mode="wrap")  # every byte < 256

    # once around the loop: a signalling NaN raises the invalid flag; its code comes from its bits
    with np.errstate(invalid="ignore"):
        for start in range(0, rows, chunk_rows):
            r = min(chunk_rows, rows - start)
            n = r * group
            t = moved[start * group : start * group + n]
            values = t.view(np.float32).reshape(units, r * lanes)
            np.multiply(values, factor[start * lanes : (start + r) * lanes], out=values)
            # rounding.lookup's index: kept bits, the lowest of them OR'd with "any lower bit set"
            index = work[:n]
            np.bitwise_and(t, _STICKY, out=index)
            index += _STICKY
            index |= t
            index >>= _SHIFT
            # little-endian pairs: the even element's index is the low word, the odd one's the high
            pairs = index.view(np.uint64)
            e = np.bitwise_and(pairs, _LOW32, out=t.view(np.uint64))  # t is read: its buffer takes them
            pairs >>= _U32  # in place: now the odd elements' indices, as intp
            lo, hi = low[: n // 2], high[: n // 2]
            np.take(plan.low, e.view(np.intp), out=lo, mode="wrap")
            np.take(plan.high, pairs.view(np.intp), out=hi, mode="wrap")
            lo |= hi
            target = packed[first + start : first + start + r]
            if lanes == 4:  # two packed bytes per unit: move them as one uint16
                np.copyto(target.view(np.uint16).reshape(r, units), lo.view(np.uint16).reshape(units, r).T)
            else:
                np.copyto(target.reshape(r, units), lo.reshape(units, r).T)


def dequantize_mx(packed: Any, e8m0: Any, profile: str | _profiles.Profile = "gfx950", group: int = 32) -> Any:
    """(packed [..., N/2], e8m0 [..., N/group]) -> float32 [..., N] under the profile's e8m0 decoding."""
    p = _profiles.get(profile)
    packed = as_uint8(packed, "packed")
    e8m0 = as_uint8(e8m0, "e8m0")
    codes = e2m1.unpack_nibbles(packed)
    check_group(codes.shape[-1], group, "packed (unpacked)")
    want = tuple(codes.shape[:-1]) + (codes.shape[-1] // group,)
    if tuple(e8m0.shape) != want:
        raise ValueError(f"e8m0 must have shape {want} for packed {tuple(packed.shape)}, got {tuple(e8m0.shape)}")
    xp = namespace(codes)
    if not is_numpy(xp):
        e8m0 = e2m1.on_device_of(e8m0, codes, "e8m0", "packed")
    if math.prod(codes.shape) == 0:
        return xp.zeros(codes.shape, dtype=xp.float32, device=device(codes))
    values = xp.reshape(take(table_on(e2m1.VALUES, codes), codes), want + (group,))
    scale = decode_e8m0(e8m0, p)[..., None]
    product = values * scale if is_numpy(xp) else x86_nan(values * scale, values, scale)
    return xp.reshape(xp.astype(product, xp.float32), codes.shape)
