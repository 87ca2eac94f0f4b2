"""Fast path of the FP4 quantization of the indexer op with bf16 inputs (the production case).

Bit-identical to ``frontend.q_frontend`` + ``quant.quantize_fp4`` (tests compare the two on
random and boundary data); it only reorganises the work so that one core sustains more than a
million Q rows a second:

* A chunk is transposed to quad-major order [32 quads, rows, 4 dims] (a transpose of 64-bit
  words: four bf16 at a time), so every elementwise step and the amax of each group of 32
  (8 quads x 4 lanes) run over long contiguous runs. RoPE is one formula for both pairings,
  x*cos + partner*(-/+sin): the partner is the quad block 32 dims away (NeoX) or the
  neighbouring lane (GPT-J, a 32-bit rotation of each 64-bit lane pair).
* Every value reaching the quantizer is a bf16 value (RoPE results are rounded to bf16, the
  other dims are inputs; K values are rounded to bf16 too). So a group's amax is a bf16
  pattern, whose e8m0 byte and divisor 2^(127-E) come from 65,536-entry tables built with
  ``e8m0_scale``; and x * 2^(127-E) is again a bf16 value (exact while normal), whose E2M1
  code comes from a 65,536-entry table built with ``encode_e2m1``. A product below 2^-126
  rounds to a float32 subnormal, whose code is zero, signed or not by the profile's rule; the
  table gives it from the top 16 bits whenever that rule reads only the sign bit (so not for
  ``zero_sign="if_negative"``, which takes the general path).
* Anything unusual sends the whole chunk back to the general path, which handles every case:
  a NaN or Inf in a group (its byte comes out 0xFF), or, with FMA contraction, an operand of a
  RoPE product outside [2^-63, 2^63] (zero included), where fl(x*cos) might be inexact.
  NaNs need no earlier check: all operands are bf16 values, so a NaN result carries a payload
  whose low 16 bits are zero (propagated from a bf16 input, or the default NaN), which the
  rounding below leaves a NaN.
"""

from __future__ import annotations

import threading
from functools import cache

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats.bf16 import bf16_to_f32
from mxgate.oracle.formats.e2m1 import e8m0_divisor_reciprocals, encode_e2m1
from mxgate.oracle.geometry import HEAD_DIM, ROPE_DIM, ROW_BYTES, ROW_GROUPS
from mxgate.oracle.scales import e8m0_scale

_U16 = np.uint32(16)
_TINY, _HUGE = np.float32(2.0**-63), np.float32(2.0**63)


@cache
def _tables(profile_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bf16 pattern: its E2M1 code, and (as a group amax) the e8m0 byte and 2^(127-E)."""
    values = bf16_to_f32(np.arange(1 << 16, dtype=np.uint16))
    code = encode_e2m1(values, profile_name)
    with np.errstate(invalid="ignore"):
        scale = e8m0_scale(np.abs(values), profile_name)
    factor = e8m0_divisor_reciprocals()[scale]
    for table in (code, scale, factor):
        table.setflags(write=False)
    return code, scale, factor


@cache
def _divisor_reciprocals() -> np.ndarray:
    table = np.ascontiguousarray(e8m0_divisor_reciprocals(), dtype=np.float32)
    assert table.shape == (256,)
    table.setflags(write=False)
    return table


@cache
def _pair_tables(profile_name: str) -> tuple[np.ndarray, np.ndarray]:
    """The code table's share of a packed byte: for the even lane c | c >> 4, for the odd c << 4."""
    code = _tables(profile_name)[0]
    low = code | (code >> np.uint8(4))
    high = code << np.uint8(4)
    for table in (low, high):
        table.setflags(write=False)
    return low, high


def applies(kind: str, profile: _profiles.Profile) -> bool:
    """Whether the fast path models ``profile`` exactly for inputs of this kind."""
    registered = profile.name in _profiles.names() and _profiles.get(profile.name) == profile
    # the bit-pattern group max lets a NaN win: right only where a NaN element makes the amax NaN
    return kind == "bf16" and profile.zero_sign != "if_negative" and profile.amax_nan == "propagate" and registered


class _Workspace:
    """Buffers reused from chunk to chunk (fresh temporaries page-fault on every chunk)."""

    def __init__(self, rows: int) -> None:
        quads = HEAD_DIM // 4
        self.raw = np.empty((rows, HEAD_DIM), dtype=np.uint16)
        self.t64 = np.empty((quads, rows), dtype=np.uint64)
        self.xs = np.empty((quads, rows, 4), dtype=np.uint32)
        self.partner = np.empty((quads // 2, rows, 4), dtype=np.float32)
        self.cos = np.empty((quads // 2, rows, 4), dtype=np.float32)
        self.sin = np.empty((quads // 2, rows, 4), dtype=np.float32)
        self.bits = np.empty((quads // 2, rows, 4), dtype=np.uint32)
        self.rope_bits = np.empty((rows, ROPE_DIM), dtype=np.uint16)
        self.high = np.empty((ROW_GROUPS, rows * 4), dtype=np.float32)
        self.low = np.empty((ROW_GROUPS, rows * 4), dtype=np.float32)
        self.factor = np.empty((ROW_GROUPS, rows, 4), dtype=np.float32)
        self.absbits = np.empty((quads, rows, 4), dtype=np.uint32)
        self.amax2 = np.empty((ROW_GROUPS, rows), dtype=np.uint32)
        self.amax = np.empty((ROW_GROUPS, rows), dtype=np.uint32)
        self.index = np.empty((ROW_GROUPS, rows), dtype=np.intp)
        self.amaxf = np.empty((ROW_GROUPS, rows), dtype=np.float32)
        self.codes = np.empty((quads, rows, 4), dtype=np.uint8)
        self.pairs = np.empty((quads, rows, 2), dtype=np.uint16)
        self.packed = np.empty((quads, rows, 2), dtype=np.uint8)
        self.low_codes = np.empty((quads, rows, 2), dtype=np.uint8)
        self.pair_index = np.empty((quads, rows, 2), dtype=np.intp)
        self.out = np.empty((rows, quads), dtype=np.uint16)


_local = threading.local()


def _workspace(rows: int) -> _Workspace:
    spaces = getattr(_local, "spaces", None)
    if spaces is None:
        spaces = _local.spaces = {}
    if rows not in spaces:
        if len(spaces) > 4:
            spaces.clear()
        spaces[rows] = _Workspace(rows)
    return spaces[rows]


def _outside(bits: np.ndarray, scratch: np.ndarray) -> bool:
    """Any bf16 magnitude below 2^-63 (zero included: conservative) or above 2^63?
    A product of two values inside [2^-63, 2^63] is normal, hence exact for bf16 operands."""
    np.bitwise_and(bits, np.uint16(0x7FFF), out=scratch)
    scratch -= np.uint16(0x2000)
    return bool(scratch.max() > np.uint16(0x3F00))


def _load(raw16: np.ndarray, w: _Workspace) -> np.ndarray:
    """bf16 bits [rows, 128] -> float32 bits in quad-major order [32, rows, 4] (w.xs)."""
    rows = raw16.shape[0]
    np.copyto(w.t64, raw16.view(np.uint64).reshape(rows, HEAD_DIM // 4).T)
    np.left_shift(w.t64.view(np.uint16).reshape(HEAD_DIM // 4, rows, 4), _U16, out=w.xs, dtype=np.uint32)
    return w.xs


def _quantize(xs: np.ndarray, w: _Workspace, profile: _profiles.Profile) -> tuple[np.ndarray, np.ndarray] | None:
    """xs: float32 bits [32, rows, 4] of bf16 values (destroyed) -> (packed [rows, 64] (a view
    of w.out), e8m0 [rows, 4]) or None when a group holds NaN or Inf."""
    name = _profiles.get(profile.name).name  # the registered str: the tables' canonical key
    code_table, scale_table, factor_table = _tables(name)
    rows = xs.shape[1]
    groups = xs.view(np.float32).reshape(ROW_GROUPS, 8, rows * 4)
    # |x| as bits: for bf16 values (NaN: see module) their uint32 order is that of |x|, and a
    # NaN or Inf is above every finite value, so the maximum's pattern gives byte 0xFF as before
    np.bitwise_and(xs, np.uint32(0x7FFFFFFF), out=w.absbits)
    high = w.high.view(np.uint32)
    np.max(w.absbits.reshape(ROW_GROUPS, 8, rows * 4), axis=1, out=high)
    lanes = high.reshape(ROW_GROUPS, rows, 4)  # max over the 4 lanes, one lane at a time
    np.maximum(lanes[..., 0], lanes[..., 1], out=w.amax)
    np.maximum(lanes[..., 2], lanes[..., 3], out=w.amax2)
    np.maximum(w.amax, w.amax2, out=w.amax)
    w.amax >>= _U16
    np.copyto(w.index, w.amax)
    scales = np.take(scale_table, w.index, mode="wrap")
    if scales.max() == 0xFF:
        return None
    # the factor table is 2^(127-E) of the e8m0 byte E (see _tables): look it up by the byte
    np.take(_divisor_reciprocals(), scales, out=w.amaxf, mode="wrap")
    for lane in range(4):
        np.copyto(w.factor[..., lane], w.amaxf)
    groups *= w.factor.reshape(ROW_GROUPS, 1, rows * 4)
    # byte j of a quad = code(lane 2j) | code(lane 2j+1) << 4, as the low byte of
    # (c0 | c1 << 8) | (c0 | c1 << 8) >> 4: one lookup per lane of a 64-bit lane pair, each
    # in a table of that lane's share of the byte, indexed by the top 16 bits of the lane
    low_table, high_table = _pair_tables(name)
    xs >>= _U16
    lane_pairs = xs.view(np.uint64)
    index = w.pair_index.view(np.uint64)
    np.right_shift(lane_pairs, np.uint64(32), out=index)
    np.take(high_table, w.pair_index, out=w.packed, mode="wrap")
    np.bitwise_and(lane_pairs, np.uint64(0xFFFF), out=index)
    np.take(low_table, w.pair_index, out=w.low_codes, mode="wrap")
    w.packed |= w.low_codes
    np.copyto(w.out, w.packed.view(np.uint16).reshape(HEAD_DIM // 4, rows).T)
    return w.out.view(np.uint8), np.ascontiguousarray(scales.T)


def _round_bf16_in_place(bits: np.ndarray, scratch: np.ndarray) -> None:
    """Round float32 bits to nearest even at bit 16, clearing the low half (NaN: see module)."""
    np.right_shift(bits, _U16, out=scratch)
    scratch &= np.uint32(1)
    bits += np.uint32(0x7FFF)
    bits += scratch
    bits &= np.uint32(0xFFFF0000)


def _expand(table: np.ndarray, target: np.ndarray, heads: int) -> None:
    """Per-token values [n, 64] (dims < 64) -> target [16, n*heads, 4], repeated over heads.
    Each quad of float32 moves as one 16-byte complex value, so the copy runs over heads."""
    n = table.shape[0]
    quads = np.ascontiguousarray(table, dtype=np.float32).view(np.complex128)  # [n, 16]
    np.copyto(target.view(np.complex128).reshape(ROPE_DIM // 4, n, heads), quads.T[:, :, None])


def _dim_tables(cos: np.ndarray, sin: np.ndarray, is_neox: bool) -> tuple[np.ndarray, np.ndarray]:
    """cos and signed sin per rotated dim [n, 64]: out = x*cos_d + partner*sin_d."""
    if is_neox:
        c = np.concatenate([cos, cos], axis=1)
        s = np.concatenate([-sin, sin], axis=1)
    else:
        c = np.repeat(cos, 2, axis=1)
        s = np.repeat(sin, 2, axis=1)
        s[:, 0::2] *= np.float32(-1)
    return c, s


def q_fp4_chunk(raw: np.ndarray, cos: np.ndarray, sin: np.ndarray, is_neox: bool, fma: bool,
                profile: _profiles.Profile) -> tuple[np.ndarray, np.ndarray] | None:
    """Q rows: raw bf16 bits [n, H, 128], cos/sin float32 [n, 32] (bf16 values) ->
    (packed [n, H, 64], e8m0 [n, H, 4]), or None when the chunk needs the general path.
    packed is a view of this thread's workspace: copy it before the next call."""
    n, h, _ = raw.shape
    rows = n * h
    w = _workspace(rows)
    np.copyto(w.raw, raw.reshape(rows, HEAD_DIM))  # sequential read; the transpose then hits cache
    if fma:  # fl(x*cos) must be exact, as it is for bf16 operands unless tiny or huge
        # float test of cos/sin: never looser than the bf16-pattern one (NaN fails it too)
        trig = np.abs(np.concatenate([cos, sin]), dtype=np.float32)
        if not (trig.min() >= _TINY and trig.max() <= _HUGE):
            return None
    xs = _load(w.raw, w)
    # the rotated dims 0..63 are quads 0..15 of the transposed chunk: a contiguous run
    if fma and _outside(w.t64[: ROPE_DIM // 4].reshape(-1).view(np.uint16), w.rope_bits.reshape(-1)):
        return None
    xf = xs.view(np.float32)
    rot = xf[: ROPE_DIM // 4]  # dims 0..63: quads 0..15
    c, s = _dim_tables(cos, sin, is_neox)
    _expand(c, w.cos, h)
    _expand(s, w.sin, h)
    with np.errstate(over="ignore", invalid="ignore"):
        if is_neox:  # partner of dim d < 32 is d + 32 (quad + 8), and back: partner*sin at once
            np.multiply(rot[8:], w.sin[:8], out=w.partner[:8])
            np.multiply(rot[:8], w.sin[8:], out=w.partner[8:])
        else:  # partner of lane 2i is lane 2i+1: swap the two float32 in each 64-bit word
            pairs = rot.view(np.uint64)
            np.left_shift(pairs, np.uint64(32), out=w.partner.view(np.uint64))
            w.partner.view(np.uint64)[...] |= pairs >> np.uint64(32)
            w.partner *= w.sin
        np.multiply(rot, w.cos, out=rot)
        rot += w.partner
    _round_bf16_in_place(xs[: ROPE_DIM // 4], w.bits)
    done = _quantize(xs, w, profile)
    if done is None:
        return None
    packed, scales = done
    return packed.reshape(n, h, ROW_BYTES), scales.reshape(n, h, ROW_GROUPS)


def quantize_rows(values: np.ndarray, profile: _profiles.Profile) -> tuple[np.ndarray, np.ndarray] | None:
    """K rows: float32 [n, 128] holding bf16 values -> (packed [n, 64], e8m0 [n, 4]) or None."""
    n = values.shape[0]
    w = _workspace(n)
    np.right_shift(np.ascontiguousarray(values).view(np.uint32), _U16, out=w.raw, casting="unsafe")
    done = _quantize(_load(w.raw, w), w, profile)
    if done is None:
        return None
    packed, scales = done
    return packed.copy(), scales
