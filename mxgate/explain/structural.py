"""Buffer-level signatures: index overflow, untouched bytes, layout permutation, nibble swap.

Each works on the differing bytes (sorted flat offsets) and returns a mask over them: these
explain whole regions, so they are decided before any per-element rule.
"""

from __future__ import annotations

import numpy as np

from mxgate.explain.frame import PAD, FieldInfo, Frame, Located, build_frame
from mxgate.oracle import layouts

# Index overflow: where a 32-bit index goes wrong, in bytes of a uint8 buffer. A signed index
# of nibbles wraps at 2^31 nibbles (byte 2^30), of bytes at 2^31; unsigned ones at 2^32
# nibbles (byte 2^31) and 2^32 bytes.
OVERFLOW_BOUNDARIES = (30, 31, 32)
# A wrapped write lands 2^32 units early: 2^31 bytes for a nibble index, 2^32 for a byte index.
WRAP_DISTANCES = (31, 32)
OVERFLOW_WINDOW = 1 << 20  # larger than one row / block / page of every registered layout
SUPPORT = 0.5  # share of the remaining differing bytes a buffer-wide hypothesis must explain
_MIN_WRAPPED = 16
_SAMPLE = 1 << 16  # differing bytes a permutation candidate is screened on

UNTOUCHED_PAD, UNTOUCHED_UNOWNED, UNTOUCHED_SLOT = 0, 1, 2


def index_overflow(off: np.ndarray, expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """aux per differing byte: k > 0 for the tail past byte 2^k, -k for a byte holding the
    expected byte 2^k further on, 0 where no overflow signature applies."""
    aux = np.zeros(off.size, np.int8)
    n = expected.size
    for k in WRAP_DISTANCES:
        dist = 1 << k
        cand = np.flatnonzero(off < n - dist)
        if cand.size == 0:
            continue
        hit = actual[off[cand]] == expected[off[cand] + dist]
        if hit.sum() >= max(_MIN_WRAPPED, SUPPORT * cand.size):
            aux[cand[hit & (aux[cand] == 0)]] = -k
    for k in OVERFLOW_BOUNDARIES:
        b = 1 << k
        if b >= n:
            break
        others = aux == 0
        i = np.searchsorted(off, b)
        before = off[:i][others[:i]]
        if i == off.size or off[i] >= b + OVERFLOW_WINDOW:
            continue
        if before.size and before[-1] >= b - OVERFLOW_WINDOW:
            continue
        tail = np.arange(i, off.size)
        aux[tail[aux[tail] == 0]] = k
        break
    return aux


def untouched(loc: Located, written: np.ndarray | None) -> np.ndarray:
    """aux per differing byte: -1 where the byte may be written, else why it may not."""
    fid, region = loc.field, loc.region
    aux = np.full(fid.size, -1, np.int8)
    aux[region == layouts.ZERO_PAD] = UNTOUCHED_PAD
    aux[(region == layouts.UNWRITTEN) | (fid < 0)] = UNTOUCHED_UNOWNED
    if written is not None:  # only then are the slot coordinates needed
        idx = np.flatnonzero((fid >= 0) & (aux < 0))
        aux[idx[~written[loc.axis0[idx]]]] = UNTOUCHED_SLOT
    return aux


def _counterpart(frame: Frame, f2: FieldInfo) -> int:
    """Index of the frame's field that ``f2`` (of another layout) holds the same data as."""
    for i, f in enumerate(frame.fields):
        if (f.name == f2.name and f.kind == f2.kind and len(f.axes) == len(f2.axes)
                and f.kind != PAD):
            return i
    return -1


def _candidate_bytes(frame: Frame, other: Frame, off: np.ndarray) -> np.ndarray:
    """The byte ``other``'s layout would hold at each offset if fed the expected logical
    arrays (int16, -1 where it holds nothing comparable)."""
    loc = other.locate(off)
    out = np.full(off.size, -1, np.int16)
    for j, f2 in enumerate(other.fields):
        hit = np.flatnonzero(loc.field == j)
        if hit.size == 0:
            continue
        if f2.kind == PAD:
            out[hit] = 0
            continue
        i = _counterpart(frame, f2)
        if i < 0:
            continue
        f = frame.fields[i]
        row, col = loc.row[hit], loc.col[hit]
        ok = (row >= 0) & (row < f.nrows) & (col >= 0) & (col < (f.extents[-1] if not f.is_word
                                                                  else 4))
        if not ok.any():
            continue
        src = frame.offsets(i, row[ok], col[ok])
        out[hit[ok]] = frame.expected[src]
    return out


def permutation_candidates(frame: Frame) -> list[Frame]:
    """Frames of the registered layouts, other than the frame's, that read a buffer of the
    same shape and store the frame's main field."""
    if frame.layout is None:
        return []
    out = []
    shaped_e = frame.expected.reshape(frame.shape)
    shaped_a = frame.actual.reshape(frame.shape)
    for name in layouts.names():
        if name == frame.name:
            continue
        try:
            other = build_frame(shaped_e, shaped_a, name, None)
        except (ValueError, TypeError):
            continue
        if any(_counterpart(frame, f2) == 0 for f2 in other.fields):
            out.append(other)
    return out


def layout_permutation(frame: Frame, off: np.ndarray) -> tuple[str, np.ndarray]:
    """(layout name, mask over ``off``) of the candidate layout reproducing the most actual
    bytes, when it reproduces at least SUPPORT of them; ('', all False) otherwise.

    A candidate is first tried on an evenly spaced sample of the bytes: one that cannot come
    near SUPPORT there is dropped without touching the rest.
    """
    best = ("", np.zeros(off.size, bool))
    if off.size == 0:
        return best
    step = max(1, off.size // _SAMPLE)
    for other in permutation_candidates(frame):
        sample = off[::step]
        if (_candidate_bytes(frame, other, sample) == frame.actual[sample]).mean() < 0.8 * SUPPORT:
            continue
        hit = _candidate_bytes(frame, other, off) == frame.actual[off]
        if hit.sum() >= SUPPORT * off.size and hit.sum() > best[1].sum():
            best = (other.name, hit)
    return best


def nibble_swap(eb: np.ndarray, ab: np.ndarray, fp4: np.ndarray) -> np.ndarray:
    """Mask of FP4 bytes whose nibbles are exchanged, when such bytes are at least SUPPORT of
    the FP4 bytes considered; else all False."""
    swapped = ((eb << 4) | (eb >> 4)).astype(np.uint8)
    hit = fp4 & (swapped == ab) & ((eb & 0xF) != (eb >> 4))
    if fp4.sum() == 0 or hit.sum() < SUPPORT * fp4.sum():
        return np.zeros(eb.size, bool)
    return hit
