"""What explain knows besides the two buffers: the profile, each side's e8m0 scales, the
input the quantizer saw, and which rows the slot mapping wrote. All lined up with the frame's
logical rows (a row is one token / slot / (token, head), holding D dims and D/32 groups)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mxgate import oracle
from mxgate.explain.frame import E8M0, E8M0_WORD, FP4, GROUP, Frame, infer_dims
from mxgate.oracle import layouts

try:  # bf16 inputs arrive as ml_dtypes arrays when ml_dtypes is installed
    import ml_dtypes

    _BF16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BF16 = None


@dataclass
class Context:
    profile: oracle.profiles.Profile
    ref_index: int  # field whose rows/groups scales and input describe (-1: none)
    rows: int
    groups: int
    exp_scales: np.ndarray | None  # [rows, groups] uint8
    act_scales: np.ndarray | None
    scale_source: str
    x: np.ndarray | None  # [n, groups*32] float32
    row_to_input: np.ndarray | None  # [rows] int64, -1 where the input has no row
    written: np.ndarray | None  # bool per first-axis coordinate (slot / token) when slots given

    @property
    def has_input(self) -> bool:
        return self.x is not None

    def input_row(self, rows: np.ndarray) -> np.ndarray:
        if self.row_to_input is None:
            return np.full(np.shape(rows), -1, np.int64)
        return self.row_to_input[rows]

    def group_values(self, in_rows: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """[n, 32] float32 input of (input row, group) pairs."""
        cols = groups[:, None] * GROUP + np.arange(GROUP)
        return self.x[in_rows[:, None], cols]

    def scales(self, rows: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(expected, actual, expected_derived) e8m0 per (row, group); -1 where unknown.

        Without a known expected scale, the input (when it covers the row) gives it under the
        profile: that one is flagged as derived.
        """
        n = np.size(rows)
        se = np.full(n, -1, np.int16)
        sa = np.full(n, -1, np.int16)
        derived = np.zeros(n, bool)
        if self.exp_scales is not None:
            se[:] = self.exp_scales[rows, groups]
        elif self.has_input:
            ir = self.input_row(rows)
            ok = np.flatnonzero(ir >= 0)
            if ok.size:
                se[ok] = self.derive(ir[ok], groups[ok], self.profile)
                derived[ok] = True
        if self.act_scales is not None:
            sa[:] = self.act_scales[rows, groups]
        return se, sa, derived

    def derive(self, in_rows: np.ndarray, groups: np.ndarray, profile: object) -> np.ndarray:
        """e8m0 the profile computes for (input row, group) pairs (the oracle's own
        quantize_mx, so its amax and scale rules are used as they are)."""
        _, scales = oracle.quantize_mx(self.group_values(in_rows, groups), profile, GROUP)
        return scales[:, 0].astype(np.int16)


# ---- construction ------------------------------------------------------------------------


def _as_float_input(x: object) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"input must be a numpy array (float32, bfloat16 or float16), "
                        f"got {type(x).__name__}")
    if x.dtype == np.float32:
        return x
    if x.dtype == np.float16 or (_BF16 is not None and x.dtype == _BF16):
        return x.astype(np.float32)
    raise TypeError(f"input must have dtype float32, bfloat16 or float16, got {x.dtype}")


def _ref_field(frame: Frame) -> int:
    i = frame.index_of((FP4,))
    return i if i >= 0 else frame.index_of((E8M0, E8M0_WORD))


def _in_buffer_scales(frame: Frame, ref: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Both sides' e8m0 bytes when the buffer carries them beside FP4 data."""
    si = frame.index_of((E8M0, E8M0_WORD))
    if si < 0 or si == ref:
        return None
    f = frame.fields[si]
    rows = np.arange(f.nrows, dtype=np.int64)[:, None]
    off = frame.offsets(si, rows, np.arange(f.width)[None, :])
    return frame.expected[off], frame.actual[off]


def _normalise_scales(frame: Frame, ref: int, s: object, name: str) -> np.ndarray:
    """One side's scales as [rows, groups] uint8, from the logical form, int32 words, or the
    companion scale layout's buffer."""
    f = frame.fields[ref]
    groups = f.extents[-1] // GROUP if f.kind == FP4 else f.width
    want = f.row_extents + (groups,)
    if not isinstance(s, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(s).__name__}")
    if s.dtype == np.int32 and groups == 4 and s.shape == f.row_extents:
        return layouts.word_to_e8m0(s).reshape(-1, groups)
    if s.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8 (e8m0 bytes), got {s.dtype}")
    if s.shape == want:
        return s.reshape(-1, groups)
    if frame.layout is not None and f"{frame.name}-scale" in layouts.names():
        comp = layouts.get(f"{frame.name}-scale")
        shared = {k: v for k, v in frame.dims.items() if k in comp.dim_names}
        try:
            d = infer_dims(comp, s.shape, shared)
        except ValueError as exc:
            raise ValueError(f"{name} must have shape {want} (logical) or be a "
                             f"{comp.name} buffer: {exc}") from None
        (logical,) = comp.gather(s, **d)
        return np.ascontiguousarray(logical).reshape(-1, groups)
    raise ValueError(f"{name} must have shape {want} ({', '.join(f.row_axes)}, group), "
                     f"got {s.shape}")


def _scales(frame: Frame, ref: int, scales: object) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    inbuf = _in_buffer_scales(frame, ref)
    if inbuf is not None:
        if scales is not None:
            raise ValueError(f"scales: layout {frame.name} carries its scales in the buffer; "
                             "do not pass scales")
        return inbuf[0], inbuf[1], "buffer"
    if scales is None:
        return None, None, "none"
    if frame.fields[ref].kind != FP4:
        raise ValueError(f"scales: layout {frame.name} holds scales itself; scales= is for "
                         "FP4 data layouts")
    if isinstance(scales, (tuple, list)):
        if len(scales) != 2:
            raise ValueError("scales must be one array or a pair (expected_scales, actual_scales)")
        e = None if scales[0] is None else _normalise_scales(frame, ref, scales[0], "scales[0]")
        a = None if scales[1] is None else _normalise_scales(frame, ref, scales[1], "scales[1]")
        return e, a, "argument"
    s = _normalise_scales(frame, ref, scales, "scales")
    return s, s, "argument (shared)"


def _slots(frame: Frame, slots: object) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(slots as int64, written mask over the first axis) or (None, None)."""
    if slots is None:
        return None, None
    if frame.layout is None:
        raise ValueError("slots: the plain packed-row form has no slots")
    s = np.asarray(slots)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer):
        raise TypeError(f"slots must be a 1-D integer array, got {s.dtype} {s.shape}")
    s = s.astype(np.int64)
    extent = frame.main.extents[0]
    if frame.layout.slot_rule == "row_mask":
        if s.size != extent:
            raise ValueError(f"slots must have one entry per {frame.main.axes[0]} ({extent}), "
                             f"got {s.size}")
        return s, s >= 0
    if s.size and s.max() >= extent:
        raise ValueError(f"slots must be < {extent} (the buffer's {frame.main.axes[0]} count), "
                         f"got {s.max()}")
    written = np.zeros(extent, bool)
    written[s[s >= 0]] = True
    return s, written


def _input(frame: Frame, ref: int, x: object,
           slots: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    if x is None:
        return None, None
    f = frame.fields[ref]
    if f.kind not in (FP4, E8M0, E8M0_WORD):
        raise ValueError(f"input: re-deriving codes covers E2M1 data and e8m0 scales; "
                         f"layout {frame.name} holds {f.kind}")
    x32 = _as_float_input(x)
    width = f.extents[-1] if f.kind == FP4 else f.width * GROUP
    full = f.row_extents + (width,)
    rows = f.nrows
    by_slot = slots is not None and frame.layout.slot_rule != "row_mask"
    if not by_slot:
        # the buffers' logical shape exactly: a part of it would leave rows unchecked and
        # let every profile "match" the rows nobody compared
        if x32.shape != full:
            raise ValueError(f"input must have the buffers' logical shape {full} "
                             f"({', '.join(f.row_axes)}, dim), "
                             f"got {x32.shape}")
        if rows == 0:
            raise ValueError(f"input: the buffers hold no row ({full}): nothing to re-derive")
        return x32.reshape(rows, width), np.arange(rows, dtype=np.int64)
    if x32.ndim != 2 or x32.shape[1] != width or len(f.row_extents) != 1:
        raise ValueError(f"input must have shape [n, {width}] with slots (one row per slot "
                         f"entry), got {x32.shape}")
    n = x32.shape[0]
    if slots.size != n:
        raise ValueError(f"input has {n} rows but slots has {slots.size} entries")
    keep = slots >= 0
    if not keep.any():
        raise ValueError("input: covers no row of the buffers (slots has no entry >= 0): "
                         "nothing to re-derive")
    row_to_input = np.full(rows, -1, np.int64)
    row_to_input[slots[keep]] = np.flatnonzero(keep)
    return x32, row_to_input


def build_context(frame: Frame, profile: object, scales: object, x: object,
                  slots: object) -> Context:
    try:
        prof = oracle.profiles.get(profile)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"profile: {exc}") from None
    ref = _ref_field(frame)
    slot_arr, written = _slots(frame, slots)
    if ref < 0:
        if scales is not None or x is not None:
            raise ValueError(f"scales/input: layout {frame.name} holds neither E2M1 data nor "
                             "e8m0 scales")
        return Context(prof, -1, 0, 0, None, None, "none", None, None, written)
    f = frame.fields[ref]
    groups = f.extents[-1] // GROUP if f.kind == FP4 else f.width
    es, as_, source = _scales(frame, ref, scales)
    xs, row_to_input = _input(frame, ref, x, slot_arr)
    return Context(prof, ref, f.nrows, groups, es, as_, source, xs, row_to_input, written)
