"""explain's arguments, read and checked: the two buffers seen through a layout (Frame), and
what is known besides them (Context): the profile, each side's e8m0 scales, the input the
quantizer saw, and which rows the slot mapping wrote.

A Frame answers two questions for the classifier, both vectorised:
  * ``locate(offsets)``: which field, region, logical row and column each byte holds;
  * ``offsets(field, rows, cols)``: the byte offsets of logical coordinates.
The index arithmetic is the layout module's (``Layout.locate`` / ``Layout.offset_of``). For
speed, a layout whose buffer repeats one block pattern along its first axis is located once
per block pattern and tiled; the repetition is checked on the second and last block first.

The plain form (layout "packed-row" given a 2-D [rows, N/2] array) is rows of packed E2M1 codes,
element 2i in the low nibble of byte i: the form ``oracle.quantize_mx`` returns.

The Context is lined up with the frame's logical rows (a row is one token / slot /
(token, head), holding D dims and D/32 groups).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mxgate import oracle
from mxgate.oracle import layouts
from mxgate.oracle.arguments import BF16_NAME
from mxgate.oracle.geometry import GROUP


# ---- Frame: the two buffers through a layout ----------------------------------------------

# Field kinds: what the bytes of a field hold.
FP4, FP8, E8M0, E8M0_WORD, F32_SCALE, PAD = "fp4", "fp8", "e8m0", "e8m0_word", "f32_scale", "pad"
KINDS = (FP4, FP8, E8M0, E8M0_WORD, F32_SCALE, PAD)
PLAIN = "packed-row"  # layout name that also accepts the plain [rows, N/2] form
_DIRECT_CHUNK = 1 << 18


@dataclass(frozen=True)
class FieldInfo:
    """One field of the buffer in the terms the classifier uses.

    axes/extents/starts: logical axes, their extents and first values (a nibble field's last
    axis counts dims, not bytes; a word field has no per-byte axis).
    """

    name: str
    kind: str
    role: int
    axes: tuple[str, ...]
    extents: tuple[int, ...]
    starts: tuple[int, ...]

    @property
    def is_word(self) -> bool:
        return self.kind in (E8M0_WORD, F32_SCALE)

    @property
    def row_axes(self) -> tuple[str, ...]:
        return self.axes if self.is_word else self.axes[:-1]

    @property
    def row_extents(self) -> tuple[int, ...]:
        return self.extents if self.is_word else self.extents[:-1]

    @property
    def nrows(self) -> int:
        return int(np.prod(self.row_extents, dtype=np.int64))

    @property
    def width(self) -> int:
        """Columns of a row: dims (data), groups (scales; a word's 4 bytes)."""
        return 4 if self.is_word else self.extents[-1]


@dataclass
class Located:
    """What sits at some byte offsets: field index (-1: none), region, row, column.

    row: linear index over the field's row axes (-1 for pads and unowned bytes); col: the
    even dim of a nibble byte, the dim of an FP8 byte, the group of a scale byte, the byte
    of a word. coords[j]: the j-th logical coordinate of the byte's field, -1 where absent
    (one 1-D array per axis position: column slices of a 2-D array are slow to gather).
    """

    field: np.ndarray
    region: np.ndarray
    row: np.ndarray
    col: np.ndarray
    _coords: list[np.ndarray] | Callable[[], list[np.ndarray]]

    @cached_property
    def coords(self) -> list[np.ndarray]:
        # the periodic path builds coordinates only when a report asks for them
        return self._coords() if callable(self._coords) else self._coords

    @property
    def axis0(self) -> np.ndarray:
        """First logical coordinate (slot / token / row), for slot masks."""
        return self.coords[0]


@dataclass
class Frame:
    """Both buffers flat, with the layout, its dims and the fields the classifier reads."""

    name: str
    layout: layouts.Layout | None
    dims: dict[str, int]
    shape: tuple[int, ...]
    expected: np.ndarray  # flat uint8
    actual: np.ndarray
    fields: tuple[FieldInfo, ...]

    @property
    def nbytes(self) -> int:
        return int(self.expected.size)

    @property
    def main(self) -> FieldInfo:
        return self.fields[0]

    def index_of(self, kinds: tuple[str, ...]) -> int:
        """Index of the first field of one of ``kinds``, -1 if none."""
        for i, f in enumerate(self.fields):
            if f.kind in kinds:
                return i
        return -1

    @property
    def max_axes(self) -> int:
        return max(len(f.axes) for f in self.fields)

    def describe_dims(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.dims.items())

    # ---- byte -> logical -------------------------------------------------------------------

    def locate(self, off: np.ndarray) -> Located:
        off = np.asarray(off, dtype=np.int64)
        if self.layout is None:
            return self._locate_plain(off)
        table = self._period_table
        if table is not None:
            return self._locate_periodic(off, table)
        return self._locate_direct(off)

    def _locate_plain(self, off: np.ndarray) -> Located:
        # one row-major field: packed E2M1 rows, or the logical e8m0 array of a scales argument
        f = self.main
        per_row = f.extents[-1] // 2 if f.kind == FP4 else f.width
        row = off // per_row
        col = off - row * per_row
        if f.kind == FP4:
            col = col * 2
        n = off.size
        lead = list(np.unravel_index(row, f.row_extents)) if len(f.row_extents) > 1 else [row]
        lead = [c + s if s else c for c, s in zip(lead, f.starts)]
        return Located(np.zeros(n, np.int8), np.full(n, f.role, np.uint8), row, col,
                       lead + [col])

    def _raw_locate(self, off: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
        """The layout's own inverse: (field index, region, coords per axis position, word byte)."""
        loc = self.layout.locate(off, **self.dims)
        fid = np.full(off.size, -1, np.int8)
        coords = [np.full(off.size, -1, np.int64) for _ in range(self.max_axes)]
        for i, f in enumerate(self.fields):
            hit = loc.field == f.name
            fid[hit] = i
            for j, axis in enumerate(f.axes):
                coords[j][hit] = loc.coords[axis][hit]
        return fid, loc.region.astype(np.uint8), coords, loc.word_byte.astype(np.int64)

    def _locate_direct(self, off: np.ndarray) -> Located:
        parts = [self._raw_locate(off[i:i + _DIRECT_CHUNK])
                 for i in range(0, max(off.size, 1), _DIRECT_CHUNK)]
        fid = np.concatenate([p[0] for p in parts])
        region = np.concatenate([p[1] for p in parts])
        coords = [np.concatenate([p[2][j] for p in parts]) for j in range(self.max_axes)]
        wb = np.concatenate([p[3] for p in parts])
        return self._finish(fid, region, coords, wb)

    @cached_property
    def _period_table(self) -> tuple | None:
        """Per-byte locate answer of one block, and the first-axis step per block, when the
        layout's map repeats block by block (checked on blocks 1 and last); else None."""
        blocks = self.shape[0] if len(self.shape) > 1 else 1
        if blocks < 3:
            return None
        period = self.nbytes // blocks
        base = np.arange(period, dtype=np.int64)
        fid, region, coords, wb = self._raw_locate(base)
        owned = fid >= 0
        if not owned.any():
            return None
        step = None
        for k in (1, blocks - 1):
            f2, r2, c2, w2 = self._raw_locate(base + k * period)
            if not (np.array_equal(f2, fid) and np.array_equal(r2, region)
                    and np.array_equal(w2, wb)):
                return None
            shift = c2[0][owned] - coords[0][owned]
            if shift.size == 0 or shift.min() != shift.max() or shift[0] % k:
                return None
            if step is None:
                step = int(shift[0]) // k
            elif step * k != int(shift[0]):
                return None
            if not all(np.array_equal(a, b) for a, b in zip(c2[1:], coords[1:])):
                return None
        base_loc = self._finish(fid, region, coords, wb)
        # moving the first axis by `step` moves a field's row index by step * inner rows
        inner = np.array([int(np.prod(f.row_extents[1:], dtype=np.int64)) if f.kind != PAD else 0
                          for f in self.fields] + [0], dtype=np.int64)
        row_step = np.where(base_loc.row >= 0, inner[fid] * step, 0)
        return period, step, fid, region, coords, base_loc.row, base_loc.col, row_step

    def _locate_periodic(self, off: np.ndarray, table: tuple) -> Located:
        period, step, fid, region, coords_t, row_t, col_t, row_step = table
        if period & (period - 1) == 0:  # shifts beat int64 division
            shift = period.bit_length() - 1
            block = off >> shift
            r = off & (period - 1)
        else:
            block = off // period
            r = off - block * period
        f = fid[r]
        steps = row_step[r]
        row = row_t[r] + block * steps

        def lazy_coords() -> list[np.ndarray]:
            c = [a[r] for a in coords_t]
            c[0] += np.where(f >= 0, block * step, 0)
            return c

        return Located(f, region[r], row, col_t[r], lazy_coords)

    def _finish(self, fid: np.ndarray, region: np.ndarray, coords: list[np.ndarray],
                wb: np.ndarray) -> Located:
        row = np.full(fid.size, -1, np.int64)
        col = np.full(fid.size, -1, np.int64)
        for i, f in enumerate(self.fields):
            if f.kind == PAD:
                continue
            every = bool(fid.size) and bool((fid == i).all())
            hit = slice(None) if every else np.flatnonzero(fid == i)
            if not every and hit.size == 0:
                continue
            nrow = len(f.row_axes)
            rel = [coords[j][hit] - f.starts[j] for j in range(nrow)]
            row[hit] = np.ravel_multi_index(rel, f.row_extents) if nrow > 1 else rel[0]
            col[hit] = wb[hit] if f.is_word else coords[nrow][hit]
        return Located(fid, region, row, col, coords)

    # ---- logical -> byte -------------------------------------------------------------------

    def row_coords(self, index: int, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        f = self.fields[index]
        rows = np.asarray(rows, dtype=np.int64)
        parts = np.unravel_index(rows, f.row_extents) if len(f.row_extents) > 1 else (rows,)
        return tuple(p + s for p, s in zip(parts, f.starts))

    def offsets(self, index: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Flat byte offsets of (row, col) pairs of field ``index`` (broadcast).

        cols: dims for data fields (a nibble dim names its byte), groups for e8m0 bytes and
        words (the word's byte g holds group g), bytes for float32 words.
        """
        rows, cols = np.broadcast_arrays(np.asarray(rows, np.int64), np.asarray(cols, np.int64))
        f = self.fields[index]
        if self.layout is None:
            if f.kind == FP4:
                return rows * (f.extents[-1] // 2) + cols // 2
            return rows * f.width + cols
        coords = self.row_coords(index, rows)
        if f.is_word:
            return self.layout.offset_of(*coords, field=f.name, **self.dims).offset + cols
        return self.layout.offset_of(*coords, cols, field=f.name, **self.dims).offset


# ---- Frame construction --------------------------------------------------------------------


def _as_bytes(a: object, name: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of uint8, got {type(a).__name__}")
    if a.dtype == np.int8:
        a = a.view(np.uint8)
    if a.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8 (raw bytes), got {a.dtype}")
    return a


def _kind(f: layouts.Field) -> str:
    if f.role == layouts.ZERO_PAD:
        return PAD
    if f.role == layouts.DATA:
        return FP4 if f.unit == "nibble" else FP8
    return {"byte": E8M0, "i32le": E8M0_WORD, "f32le": F32_SCALE}[f.unit]


def infer_dims(layout: layouts.Layout, shape: tuple[int, ...],
               dims: dict[str, int]) -> dict[str, int]:
    """Dims of ``layout`` for a buffer of ``shape`` (explicit ``dims`` win); ValueError if the
    shape is not one of the layout's buffer shapes."""
    # Layout has no public shape -> dims inverse yet; _infer is its own rule for it.
    inferred = dict(layout._infer(tuple(shape), None))
    for key, value in dims.items():
        if key in inferred and inferred[key] != value:
            raise ValueError(f"dims {key}={value} does not match the buffer shape {shape}, "
                             f"which implies {key}={inferred[key]}")
    merged = {**inferred, **dims}
    if not inferred:
        raise ValueError(f"expected: shape {tuple(shape)} is not a buffer shape of layout "
                         f"{layout.name} ({layout.shape_doc})")
    try:
        resolved = layout.dims(**merged)
        want = layout.buffer_shape(**merged)
    except TypeError as exc:
        raise ValueError(f"dims: {exc} (pass it in dims=)") from None
    if tuple(want) != tuple(shape):
        raise ValueError(f"layout {layout.name} expects a buffer of shape {tuple(want)} "
                         f"({layout.shape_doc}), got {tuple(shape)}")
    return {k: resolved[k] for k in layout.dim_names}


def _field_info(layout: layouts.Layout, f: layouts.Field, dims: dict[str, int]) -> FieldInfo:
    # Layout exposes no public per-field grid yet; _grid holds the logical extents.
    grid = layout._grid(f.name, layout.dims(**dims))
    starts = [lo for lo, _ in grid]
    extents = [hi - lo for lo, hi in grid]
    if f.unit == "nibble":
        extents[-1] *= 2
        starts[-1] *= 2
    return FieldInfo(f.name, _kind(f), f.role, tuple(f.axes), tuple(extents), tuple(starts))


def plain_frame(name: str, expected: np.ndarray, actual: np.ndarray, field: FieldInfo,
                dims: dict[str, int] | None = None) -> Frame:
    """A Frame over one row-major array of ``field`` (no layout): the plain packed rows, or
    both sides' e8m0 bytes of a scales argument in their logical shape. ``dims`` (default:
    the field's axes and extents) is what the report shows."""
    shape = field.row_extents + (field.width // 2 if field.kind == FP4 else field.width,)
    dims = dict(zip(field.axes, field.extents)) if dims is None else dims
    return Frame(name, None, dims, shape, np.ascontiguousarray(expected).reshape(-1),
                 np.ascontiguousarray(actual).reshape(-1), (field,))


def build_frame(expected: np.ndarray, actual: np.ndarray, layout: object,
                dims: dict[str, int] | None) -> Frame:
    expected = _as_bytes(expected, "expected")
    actual = _as_bytes(actual, "actual")
    if expected.shape != actual.shape:
        raise ValueError(f"actual must have the shape of expected {expected.shape}, "
                         f"got {actual.shape}")
    dims = dict(dims or {})
    if isinstance(layout, layouts.Layout):
        layout = layout.name
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a layout name, got {type(layout).__name__}")
    if layout == PLAIN and expected.ndim == 2:
        if dims:
            raise ValueError("dims: the plain packed-row form takes no dims")
        rows, half = expected.shape
        if half * 2 % GROUP:
            raise ValueError(f"expected: a plain packed row must hold a multiple of {GROUP} "
                             f"codes (N/2 a multiple of {GROUP // 2}), got N/2 = {half}")
        info = FieldInfo("packed", FP4, layouts.DATA, ("row", "dim"), (rows, half * 2), (0, 0))
        return plain_frame(PLAIN, expected, actual, info, {"rows": rows, "n": half * 2})
    try:
        lay = layouts.get(layout)
    except ValueError as exc:
        raise ValueError(f"layout: {exc}") from None
    resolved = infer_dims(lay, expected.shape, dims)
    infos = tuple(_field_info(lay, f, resolved) for f in lay.fields + lay.pads)
    return Frame(lay.name, lay, resolved, expected.shape,
                 np.ascontiguousarray(expected).reshape(-1),
                 np.ascontiguousarray(actual).reshape(-1), infos)


# ---- Context: what is known besides the buffers ---------------------------------------------


@dataclass
class Context:
    """The profile, both sides' e8m0 scales, the input and the written rows, per logical row of
    the reference field (the FP4 data, or the e8m0 bytes of a scale layout)."""

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

    def scales(self, rows: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(expected, actual) e8m0 per (row, group); -1 where unknown.

        Without a known expected scale, the input (when it covers the row) gives it under the
        profile.
        """
        n = np.size(rows)
        se = np.full(n, -1, np.int16)
        sa = np.full(n, -1, np.int16)
        if self.exp_scales is not None:
            se[:] = self.exp_scales[rows, groups]
        elif self.has_input:
            ir = self.input_row(rows)
            ok = np.flatnonzero(ir >= 0)
            if ok.size:
                se[ok] = self.derive(ir[ok], groups[ok], self.profile)
        if self.act_scales is not None:
            sa[:] = self.act_scales[rows, groups]
        return se, sa

    def derive(self, in_rows: np.ndarray, groups: np.ndarray, profile: object) -> np.ndarray:
        """e8m0 the profile computes for (input row, group) pairs (the oracle's own
        quantize_mx, so its amax and scale rules are used as they are)."""
        _, scales = oracle.quantize_mx(self.group_values(in_rows, groups), profile, GROUP)
        return scales[:, 0].astype(np.int16)


# ---- Context construction ------------------------------------------------------------------


def _as_float_input(x: object) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"input must be a numpy array (float32, bfloat16 or float16), "
                        f"got {type(x).__name__}")
    if x.dtype == np.float32:
        return x
    # bf16 arrives as an ml_dtypes array, known by its dtype's name: such an array exists only where
    # ml_dtypes is loaded, so explain never imports it (over half a second of every gate run that
    # explains a cell)
    if x.dtype == np.float16 or x.dtype.name == BF16_NAME:
        return x.astype(np.float32)
    hint = ""
    if x.dtype in (np.dtype(np.uint16), np.dtype(np.int16)):
        hint = "; bf16 bit patterns are read as bf16 with x.view(ml_dtypes.bfloat16)"
    elif x.dtype.kind == "V" and x.dtype.itemsize == 2:
        hint = "; np.load gives |V2 for a saved ml_dtypes bfloat16 array: x.view(ml_dtypes.bfloat16)"
    raise TypeError(f"input must have dtype float32, bfloat16 or float16, got {x.dtype}{hint}")


def _groups(f: FieldInfo) -> int:
    """Scale groups per row of the reference field: D/32 of FP4 data, the bytes of a scale row."""
    return f.extents[-1] // GROUP if f.kind == FP4 else f.width


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
    groups = _groups(f)
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
    groups = _groups(f)
    es, as_, source = _scales(frame, ref, scales)
    xs, row_to_input = _input(frame, ref, x, slot_arr)
    return Context(prof, ref, f.nrows, groups, es, as_, source, xs, row_to_input, written)
