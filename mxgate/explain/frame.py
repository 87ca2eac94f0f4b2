"""Expected and actual buffers seen through a layout: flat bytes plus the logical structure.

A Frame answers two questions for the classifier, both vectorised:
  * ``locate(offsets)``: which field, region, logical row and column each byte holds;
  * ``offsets(field, rows, cols)``: the byte offsets of logical coordinates.
The index arithmetic is the layout module's (``Layout.locate`` / ``Layout.offset_of``). For
speed, a layout whose buffer repeats one block pattern along its first axis is located once
per block pattern and tiled; the repetition is checked on the second and last block first.

The plain form (layout "packed-row" given a 2-D [rows, N/2] array) is rows of packed E2M1 codes,
element 2i in the low nibble of byte i: the form ``oracle.quantize_mx`` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mxgate.oracle import layouts

# Field kinds: what the bytes of a field hold.
FP4, FP8, E8M0, E8M0_WORD, F32_SCALE, PAD = "fp4", "fp8", "e8m0", "e8m0_word", "f32_scale", "pad"
KINDS = (FP4, FP8, E8M0, E8M0_WORD, F32_SCALE, PAD)
PLAIN = "packed-row"  # layout name that also accepts the plain [rows, N/2] form
GROUP = 32
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


# ---- construction ------------------------------------------------------------------------


def as_bytes(a: object, name: str) -> np.ndarray:
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


def plain_frame(name: str, expected: np.ndarray, actual: np.ndarray, field: FieldInfo) -> Frame:
    """A Frame over one row-major array of ``field`` (no layout): the plain packed rows, or
    both sides' e8m0 bytes of a scales argument in their logical shape."""
    shape = field.row_extents + (field.width // 2 if field.kind == FP4 else field.width,)
    dims = dict(zip(field.axes, field.extents))
    return Frame(name, None, dims, shape, np.ascontiguousarray(expected).reshape(-1),
                 np.ascontiguousarray(actual).reshape(-1), (field,))


def build_frame(expected: np.ndarray, actual: np.ndarray, layout: object,
                dims: dict[str, int] | None) -> Frame:
    expected = as_bytes(expected, "expected")
    actual = as_bytes(actual, "actual")
    if expected.shape != actual.shape:
        raise ValueError(f"actual must have the shape of expected {expected.shape}, "
                         f"got {actual.shape}")
    dims = dict(dims or {})
    if isinstance(layout, layouts.Layout):
        layout = layout.name
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a layout name, got {type(layout).__name__}")
    flat_e = np.ascontiguousarray(expected).reshape(-1)
    flat_a = np.ascontiguousarray(actual).reshape(-1)
    if layout == PLAIN and expected.ndim == 2:
        if dims:
            raise ValueError("dims: the plain packed-row form takes no dims")
        rows, half = expected.shape
        if half * 2 % GROUP:
            raise ValueError(f"expected: a plain packed row must hold a multiple of {GROUP} "
                             f"codes (N/2 a multiple of {GROUP // 2}), got N/2 = {half}")
        info = FieldInfo("packed", FP4, layouts.DATA, ("row", "dim"), (rows, half * 2), (0, 0))
        return Frame(PLAIN, None, {"rows": rows, "n": half * 2}, expected.shape, flat_e,
                     flat_a, (info,))
    try:
        lay = layouts.get(layout)
    except ValueError as exc:
        raise ValueError(f"layout: {exc}") from None
    resolved = infer_dims(lay, expected.shape, dims)
    infos = tuple(_field_info(lay, f, resolved) for f in lay.fields + lay.pads)
    return Frame(lay.name, lay, resolved, expected.shape, flat_e, flat_a, infos)
