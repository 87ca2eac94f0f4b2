"""Layout machinery shared by every cache/scale layout: fields, validation, scatter, gather,
index maps, region maps and the byte -> logical inverse.

Two independent descriptions of each layout live in its subclass:
  * ``_offsets``: SPEC section 5's formula, evaluated on int64 coordinate arrays. ``index_map``,
    ``offset_of`` and ``regions`` use it.
  * ``_views``: strided views of a buffer whose leading axes are the slot's mixed-radix digits
    and whose trailing axes are the row's bytes. Taken once of a phantom buffer, each becomes a
    placement (shape, strides, offset, radices) that ``scatter`` and ``gather`` apply with the
    array's own strided view (NumPy's ``as_strided``, torch's), so they run unchanged on NumPy
    arrays and on torch tensors of any device (one advanced-index assignment per field);
    ``locate`` divides offsets by the same strides.
The tests check that the two agree byte for byte, so a typo in either shows up.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import numpy as np

from mxgate.oracle.arguments import MAX_BYTES, allocation, integer, is_tensor, shown
from mxgate.oracle.xp import device as device_of
from mxgate.oracle.xp import bits, floats, namespace, on_device

POISON = 0xA5
"""Byte used to pre-fill buffers, so untouched bytes can be told apart from written ones."""

UNWRITTEN, DATA, SCALE, ZERO_PAD = 0, 1, 2, 3
REGION_NAMES: dict[int, str] = {UNWRITTEN: "unwritten", DATA: "data", SCALE: "scale",
                                ZERO_PAD: "zero_pad"}

Unit = Literal["nibble", "byte", "f32le", "i32le"]
_WORD_UNITS = ("f32le", "i32le")
_WORD_DTYPES = {"f32le": np.dtype("<f4"), "i32le": np.dtype("<i4")}

SlotRule = Literal["slot", "row_mask"]
Dims = dict[str, int]


@dataclass(frozen=True)
class Field:
    """One logical array stored in a layout (or a zero-padding region of it).

    axes:  logical axes of one element; axes[0] is the slot/token/row axis. For a nibble field
           the last axis counts dims (two per stored byte), for a word field there is no
           per-byte axis (the 4 bytes of the word are one element).
    unit:  nibble (two dims per byte, low nibble = even dim), byte, f32le / i32le (a 4-byte
           little-endian word per element).
    dtype: dtype of the logical array handed to scatter / returned by gather.
    role:  region code of its bytes (DATA, SCALE or ZERO_PAD).
    """

    name: str
    role: int
    axes: tuple[str, ...]
    unit: Unit
    dtype: np.dtype
    doc: str


class IndexMap(NamedTuple):
    """Flat byte offset (int64) of every logical coordinate, and the nibble (uint8, 0 low /
    1 high) for nibble units, else None. For word units the offset is the word's first byte."""

    offset: np.ndarray
    nibble: np.ndarray | None


@dataclass(frozen=True)
class Location:
    """What sits at some flat byte offsets of a buffer (``Layout.locate``'s answer).

    region:    region code per offset (UNWRITTEN where no field owns the byte).
    field:     field name per offset ('' where none).
    coords:    axis name -> int64 array of that logical coordinate, -1 where the axis does
               not belong to the byte's field. For nibble fields 'dim' is the dim in the
               nibble asked about (the low nibble's even dim by default).
    word_byte: byte index inside a 4-byte word (0 = least significant), -1 otherwise.
    """

    offset: np.ndarray
    region: np.ndarray
    field: np.ndarray
    coords: dict[str, np.ndarray]
    word_byte: np.ndarray


@dataclass(frozen=True)
class _View:
    """A strided view of the buffer: slot digits (outermost first) then row bytes."""

    array: np.ndarray
    radices: tuple[int, ...]


@dataclass(frozen=True)
class _Placement:
    """A field's _View as numbers, for any buffer of the dims: shape, strides and offset in
    bytes (the buffer is uint8) and the radices of the leading slot axes."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    radices: tuple[int, ...]


_PLACEMENTS: dict[tuple[type, tuple[tuple[str, int], ...]], Mapping[str, _Placement]] = {}


class Layout(ABC):
    """A named byte layout. Subclasses fill in the class attributes and the hooks below."""

    name: str = ""
    title: str = ""
    source: str = ""
    shape_doc: str = ""
    fields: tuple[Field, ...] = ()
    pads: tuple[Field, ...] = ()
    dim_defaults: dict[str, int | None] = {}
    slot_rule: SlotRule = "slot"
    notes: tuple[str, ...] = ()

    # ---- hooks -------------------------------------------------------------------------------

    @abstractmethod
    def _derive(self, d: Dims) -> Dims:
        """Validate the dims keywords and add derived values (k_tiles, qs_pad, ...)."""

    @abstractmethod
    def _shape(self, d: Dims) -> tuple[int, ...]:
        """Buffer shape."""

    @abstractmethod
    def _num_slots(self, d: Dims) -> int:
        """Extent of the slot/token/row axis."""

    @abstractmethod
    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        """Per axis [start, stop) in storage units (packed bytes for nibble fields; no axis
        for the bytes of a word)."""

    @abstractmethod
    def _offsets(self, field: str, coords: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        """SPEC 5 formula: flat byte offset of each storage coordinate (int64, broadcast;
        NumPy arrays or tensors: only + - * // % on them)."""

    @abstractmethod
    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        """Strided views of ``buf`` (a NumPy phantom buffer) per field and pad (see _View)."""

    @abstractmethod
    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        """Dims implied by a buffer shape (and by the logical arrays, when given)."""

    @abstractmethod
    def _formulas(self) -> dict[str, str]:
        """Human-readable index formula per field, for describe()."""

    # ---- dims --------------------------------------------------------------------------------

    @property
    def logical_axes(self) -> tuple[str, ...]:
        """Axes of the first (main) field; see ``fields`` for the others."""
        return self.fields[0].axes

    @property
    def unit(self) -> Unit:
        """Unit of the first (main) field."""
        return self.fields[0].unit

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(self.dim_defaults)

    def _resolve(self, dims: Mapping[str, object]) -> Dims:
        self._check_known(dims)
        d: Dims = {}
        for key, default in self.dim_defaults.items():
            value = dims.get(key, default)
            if value is None:
                raise TypeError(f"{self.name}: missing dims keyword {key}")
            d[key] = integer(value, key)
        d = self._derive(d)
        self._check_size(d)
        return d

    def _check_known(self, dims: Mapping[str, object]) -> None:
        unknown = sorted(set(dims) - set(self.dim_defaults))
        if unknown:
            raise TypeError(f"{self.name}: unknown dims keyword(s) {', '.join(unknown)}; "
                            f"expected {', '.join(self.dim_names)}")

    def _check_size(self, d: Dims) -> None:
        """A buffer no machine could hold is out of range (a ValueError naming the dims), not a
        MemoryError or an int64 overflow later."""
        shape = self._shape(d)
        nbytes = 1
        for n in shape:
            nbytes *= n
        if nbytes > MAX_BYTES or max(shape, default=0) > MAX_BYTES:
            given = ", ".join(f"{k}={shown(d[k])}" for k in self.dim_defaults)
            raise ValueError(f"{self.name}: dims {given} give a buffer of {shown(nbytes)} bytes, "
                             f"more than the {MAX_BYTES} bytes (2^47) any machine can address")

    def dims(self, **dims: int) -> Dims:
        """The resolved dims (defaults filled in, derived values added)."""
        return dict(self._resolve(dims))

    def buffer_shape(self, **dims: int) -> tuple[int, ...]:
        return self._shape(self._resolve(dims))

    def num_slots(self, **dims: int) -> int:
        return self._num_slots(self._resolve(dims))

    def new_buffer(self, fill: int = POISON, *, device: Any = None, **dims: int) -> Any:
        """A buffer of the layout's shape with every byte ``fill`` (an int in [0, 255]): a NumPy
        array, or with ``device`` (a torch device or its name) a torch tensor there."""
        byte = integer(fill, "fill", minimum=0, maximum=255)
        shape = self.buffer_shape(**dims)
        if device is None:
            return np.full(shape, byte, dtype=np.uint8)
        xp = on_device(device)
        return xp.full(shape, byte, dtype=xp.uint8, device=device)

    def _field(self, name: str | None) -> Field:
        if name is None:
            return self.fields[0]
        for f in self.fields + self.pads:
            if f.name == name:
                return f
        valid = ", ".join(f.name for f in self.fields + self.pads)
        raise ValueError(f"{self.name}: unknown field {name!r}; valid fields: {valid}")

    # ---- index maps (SPEC 5 formulas) ----------------------------------------------------------

    def index_map(self, field: str | None = None, *, device: Any = None,
                  **dims: int) -> IndexMap:
        """Offset (and nibble) of every logical coordinate of ``field`` (default: the first).

        Arrays have the field's logical shape: e.g. [num_slots, head_dim] for a nibble field.
        NumPy arrays, or with ``device`` (a torch device or its name) torch tensors there.
        """
        f = self._field(field)
        d = self._resolve(dims)
        _check_map_size(self, d, f, "index_map")
        xp = np if device is None else on_device(device)
        coords = _open_grid(self._grid(f.name, d), xp, device)
        offset = xp.broadcast_to(self._offsets(f.name, coords, d), _grid_shape(coords))
        return _expand_nibbles(f, _dense(offset, xp.int64), xp)

    def offset_of(self, *coords: object, field: str | None = None, **dims: int) -> IndexMap:
        """Offset (and nibble) of the given logical coordinates (broadcast int arrays).

        Coordinates are logical: a nibble field takes dims, not packed bytes.
        """
        f = self._field(field)
        d = self._resolve(dims)
        grid = self._grid(f.name, d)
        if len(coords) != len(f.axes):
            raise TypeError(f"{self.name}.{f.name}: expected {len(f.axes)} coordinates "
                            f"({', '.join(f.axes)}), got {len(coords)}")
        arrays = [np.asarray(c) for c in coords]
        for axis, a in zip(f.axes, arrays):
            if not np.issubdtype(a.dtype, np.integer):
                raise TypeError(f"{axis} must be an integer array, got {a.dtype}")
        arrays = [a.astype(np.int64) for a in arrays]
        nibble = None
        if f.unit == "nibble":
            nibble = (arrays[-1] & 1).astype(np.uint8)
            arrays[-1] = arrays[-1] >> 1
        for axis, a, (lo, hi) in zip(f.axes, arrays, grid):
            if a.size and (a.min() < lo or a.max() >= hi):
                scale = 2 if (f.unit == "nibble" and axis == f.axes[-1]) else 1
                raise ValueError(f"{axis} must be in [{lo * scale}, {hi * scale}), "
                                 f"got values in [{a.min() * scale}, {a.max() * scale}]")
        offset = self._offsets(f.name, tuple(np.broadcast_arrays(*arrays)), d)
        offset = np.asarray(offset, dtype=np.int64)
        if nibble is not None:
            nibble = np.broadcast_to(nibble, offset.shape).copy()
        return IndexMap(offset, nibble)

    def field_bytes(self, field: str | None = None, slots: object = None,
                    **dims: int) -> np.ndarray:
        """Sorted int64 offsets of every byte ``field`` occupies (restricted to the rows a
        scatter with ``slots`` would write)."""
        f = self._field(field)
        d = self._resolve(dims)
        grid = list(self._grid(f.name, d))
        _check_map_size(self, d, f, "field_bytes")
        rows = None if slots is None else self._written_rows(slots, d)
        coords = list(_open_grid(tuple(grid), np, None))
        if rows is not None:
            coords[0] = rows.reshape((-1,) + (1,) * (len(grid) - 1))
        offset = np.broadcast_to(self._offsets(f.name, tuple(coords), d),
                                 _grid_shape(tuple(coords))).astype(np.int64)
        if f.unit in _WORD_UNITS:
            offset = offset[..., None] + np.arange(4, dtype=np.int64)
        return np.sort(offset, axis=None)

    def regions(self, slots: object = None, **dims: int) -> np.ndarray:
        """uint8 array of the buffer's shape with a region code per byte.

        Without ``slots``: the role of every byte in a full buffer. With ``slots``: the bytes a
        scatter with these slots writes get their role, every other byte is UNWRITTEN (the
        gate's "must keep the poison" set).
        """
        d = self._resolve(dims)
        for f in self.fields + self.pads:  # every offset list fits before the buffer is made
            _check_map_size(self, d, f, "field_bytes")
        out = np.zeros(int(np.prod(self._shape(d), dtype=np.int64)), dtype=np.uint8)
        for f in self.fields + self.pads:
            out[self.field_bytes(f.name, slots, **dims)] = f.role
        return out.reshape(self._shape(d))

    # ---- scatter / gather (strided views) ----------------------------------------------------

    def scatter(self, buffer: Any, *logical: Any, slots: object = None, **dims: int) -> Any:
        """Write the logical arrays into ``buffer`` in place, touching only the bytes the
        contract writes: rows whose slot is < 0 are skipped, pads of written rows become 0.
        NumPy arrays, or torch tensors on the buffer's device. Returns ``buffer``."""
        _check_buffer(buffer, writeable=True)
        arrays = self._check_logical(logical, buffer)
        d = self._dims_for(buffer, arrays, dims)
        n = arrays[0].shape[0]
        for f, a in zip(self.fields, arrays):
            check_rows(f, a, (n,) + self._row_shape(f, d))
        slot_arr = self._check_slots(slots, n, d, buffer)
        keep = slot_arr >= 0
        rows = self._destinations(slot_arr, keep)
        places = self._placements(d)
        every = bool(namespace(keep).all(keep))
        for f, a in zip(self.fields, arrays):
            place = places[f.name]
            data = _to_bytes(f, a if every else a[keep])
            _strided(buffer, place)[_digits(rows, place.radices)] = data.reshape(
                (rows.shape[0],) + place.shape[len(place.radices):])
        for pad in self.pads:
            place = places[pad.name]
            if 0 not in place.shape:  # no padding heads when num_heads/16 fills QS_PAD
                _strided(buffer, place)[_digits(rows, place.radices)] = 0
        return buffer

    def gather(self, buffer: Any, slots: object = None, **dims: int) -> tuple[Any, ...]:
        """Read the logical arrays back, one row per entry of ``slots`` (default: every slot).

        Rows whose slot is < 0 come back as if read from a fresh ``new_buffer()``: every byte
        POISON. Always returns a tuple, in the order scatter takes the arrays (tensors on the
        buffer's device for a tensor buffer).
        """
        _check_buffer(buffer, writeable=False)
        buffer = np.ascontiguousarray(buffer) if isinstance(buffer, np.ndarray) else buffer.contiguous()
        xp, dev = namespace(buffer), device_of(buffer)
        d = self._dims_for(buffer, None, dims)
        if slots is None:
            slot_arr = _arange(self._num_slots(d), buffer)
        else:
            slot_arr = self._check_slots(slots, None, d, buffer, unique=False)
        keep = slot_arr >= 0
        rows = self._destinations(slot_arr, keep)
        places = self._placements(d)
        out = []
        for f in self.fields:
            place = places[f.name]
            got = _strided(buffer, place)[_digits(rows, place.radices)]
            row_shape = self._row_shape(f, d) + word_axis(f)
            full = xp.full((slot_arr.shape[0],) + row_shape, POISON, dtype=xp.uint8, device=dev)
            full[keep] = got.reshape((rows.shape[0],) + row_shape)
            out.append(_from_bytes(f, full))
        return tuple(out)

    def _placements(self, d: Dims) -> Mapping[str, _Placement]:
        """Each field's and pad's _View of a phantom buffer of the dims, as numbers (cached:
        a layout's views depend only on its class and the dims)."""
        key = (type(self), tuple(d.items()))
        hit = _PLACEMENTS.get(key)
        if hit is None:
            shadow = phantom_buffer(self._shape(d))
            base = shadow.__array_interface__["data"][0]
            hit = MappingProxyType({
                name: _Placement(tuple(v.array.shape), tuple(v.array.strides),
                                 v.array.__array_interface__["data"][0] - base, tuple(v.radices))
                for name, v in self._views(shadow, d).items()})
            if len(_PLACEMENTS) >= 1024:  # a sweep over many dims must not grow it without end
                _PLACEMENTS.clear()
            _PLACEMENTS[key] = hit
        return hit

    # ---- inverse -----------------------------------------------------------------------------

    def locate(self, offsets: object, nibble: object = None, **dims: int) -> Location:
        """Flat byte offsets -> field, logical coordinates and region (vectorised).

        ``nibble`` (0/1, broadcast) picks which dim of a nibble byte 'dim' reports.
        """
        d = self._resolve(dims)
        off = np.asarray(offsets)
        if not np.issubdtype(off.dtype, np.integer):
            raise TypeError(f"offsets must be an integer array, got {off.dtype}")
        off = off.astype(np.int64)
        nbytes = int(np.prod(self._shape(d), dtype=np.int64))
        if off.size and (off.min() < 0 or off.max() >= nbytes):
            raise ValueError(f"offsets must be in [0, {nbytes}), got values in "
                             f"[{off.min()}, {off.max()}]")
        nib = np.zeros_like(off) if nibble is None else _nibbles(nibble, off.shape)
        places = self._placements(d)
        region = np.zeros(off.shape, np.uint8)
        names = np.full(off.shape, "", dtype=object)
        axes = dict.fromkeys(a for f in self.fields + self.pads for a in f.axes)
        coords = {a: np.full(off.shape, -1, np.int64) for a in axes}
        word_byte = np.full(off.shape, -1, np.int64)
        for f in self.fields + self.pads:
            hit, values, wb = self._decode(f, places[f.name], off, nib, d)
            region[hit] = f.role
            names[hit] = f.name
            for axis, v in zip(f.axes, values):
                coords[axis][hit] = v
            if wb is not None:
                word_byte[hit] = wb
        return Location(off, region, names.astype(str), coords, word_byte)

    def describe_byte(self, offset: int, nibble: int | None = None, **dims: int) -> str:
        """One line naming what byte ``offset`` holds, for humans (mxgate explain)."""
        offset = integer(offset, "offset", minimum=0)
        if nibble is not None:
            nibble = integer(nibble, "nibble", minimum=0, maximum=1)
        nbytes = int(np.prod(self.buffer_shape(**dims), dtype=np.int64))
        if offset >= nbytes:
            raise ValueError(f"offset must be in [0, {nbytes}), got {shown(offset)}")
        loc = self.locate(np.array([offset], dtype=np.int64), nibble, **dims)
        index = np.unravel_index(int(offset), self.buffer_shape(**dims))
        head = f"byte {int(offset)} {list(map(int, index))}"
        if loc.field[0] == "":
            return f"{head}: {REGION_NAMES[int(loc.region[0])]}"
        f = self._field(str(loc.field[0]))
        parts = [f"{a} {int(loc.coords[a][0])}" for a in f.axes]
        if f.unit == "nibble":
            dim = int(loc.coords[f.axes[-1]][0])
            parts[-1] = (f"{f.axes[-1]}s {dim} (low nibble), {dim + 1} (high nibble)"
                         if nibble is None else f"{f.axes[-1]} {dim} "
                         f"({'high' if dim & 1 else 'low'} nibble)")
        if f.unit in _WORD_UNITS:
            parts.append(f"byte {int(loc.word_byte[0])} of the {f.unit} word")
        return f"{head}: {f.name} ({REGION_NAMES[f.role]}) " + ", ".join(parts)

    # ---- description -------------------------------------------------------------------------

    def describe(self, **dims: int) -> str:
        """Human-readable description: buffer shape, logical arrays, formulas, regions."""
        lines = [f"{self.name}: {self.title}", f"  source: {self.source}",
                 f"  buffer: uint8 {self.shape_doc}"]
        self._check_known(dims)
        # without every dims keyword the description is generic; given keywords must be valid
        complete = all(dims.get(k, v) is not None for k, v in self.dim_defaults.items())
        d = self._resolve(dims) if complete else None
        if not complete:
            for key, value in dims.items():
                integer(value, key)
        if d is not None:
            shape = self._shape(d)
            nbytes = int(np.prod(shape, dtype=np.int64))
            shown = ", ".join(f"{k}={v}" for k, v in d.items())
            lines.append(f"  dims: {shown}")
            lines.append(f"  buffer shape {shape} = {nbytes} bytes; "
                         f"{self._num_slots(d)} {self.fields[0].axes[0]}s")
        lines.append(f"  {self._slot_doc()}")
        formulas = self._formulas()
        for f in self.fields + self.pads:
            kind = "logical" if f.role != ZERO_PAD else "padding"
            lines.append(f"  {kind} {f.name}: {np.dtype(f.dtype).name}{self._row_doc(f, d)}, "
                         f"axes {f.axes}, unit {f.unit}, region {REGION_NAMES[f.role]}")
            lines.append(f"    {f.doc}")
            lines.append(f"    at {formulas[f.name]}")
        if d is not None:
            counts = self._region_counts(d)
            lines.append("  regions: " + ", ".join(
                f"{REGION_NAMES[c]} {counts[c]} bytes" for c in sorted(REGION_NAMES)))
        else:
            lines.append("  regions: " + ", ".join(sorted(
                {REGION_NAMES[f.role] for f in self.fields + self.pads})) + "; others never")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Layout {self.name}>"

    def _slot_doc(self) -> str:
        if self.slot_rule == "row_mask":
            return ("rows: row t of the logical arrays is token t; slots (optional, [T]) only "
                    "mask: tokens with slot < 0 are not written at all")
        return (f"slots: optional int [n]; logical row i goes to {self.fields[0].axes[0]} "
                "slots[i] (default i); rows with slot < 0 are skipped; slots >= 0 must be "
                "distinct")

    def _region_counts(self, d: Dims) -> dict[int, int]:
        """Bytes per region in a full buffer, from the grids (no buffer built)."""
        counts = dict.fromkeys(REGION_NAMES, 0)
        for f in self.fields + self.pads:
            n = 1
            for lo, hi in self._grid(f.name, d):
                n *= hi - lo
            counts[f.role] += n * (4 if f.unit in _WORD_UNITS else 1)
        total = 1
        for n in self._shape(d):
            total *= n
        counts[UNWRITTEN] = total - sum(counts.values())
        return counts

    def _row_doc(self, f: Field, d: Dims | None) -> str:
        if d is None:
            return ""
        return " [" + ", ".join(["n"] + [str(x) for x in self._row_shape(f, d)]) + "]"

    # ---- internals ---------------------------------------------------------------------------

    def _row_shape(self, f: Field, d: Dims) -> tuple[int, ...]:
        """Per-row shape of the logical array (storage units: packed bytes for nibbles)."""
        return tuple(hi - lo for lo, hi in self._grid(f.name, d)[1:])

    def _check_logical(self, logical: tuple[object, ...], buffer: Any) -> tuple[Any, ...]:
        """NumPy arrays for a NumPy buffer, tensors on its device for a tensor buffer."""
        names = ", ".join(f.name for f in self.fields)
        if len(logical) != len(self.fields):
            raise TypeError(f"{self.name}.scatter takes {len(self.fields)} logical array(s) "
                            f"({names}), got {len(logical)}")
        tensors = is_tensor(buffer)
        for f, a in zip(self.fields, logical):
            if not (is_tensor(a) if tensors else isinstance(a, np.ndarray)):
                kind = "tensor, as the buffer is" if tensors else "numpy array"
                raise TypeError(f"{f.name} must be a {kind}, got {type(a).__name__}")
            if _dtype_name(a) != np.dtype(f.dtype).name:
                raise TypeError(f"{f.name} must have dtype {np.dtype(f.dtype).name}, "
                                f"got {_dtype_name(a)}")
            if a.ndim < 1:
                raise ValueError(f"{f.name} must have a leading {f.axes[0]} axis, got a scalar")
            if tensors:
                _check_device(a, buffer, f.name)
        return tuple(logical)

    def _dims_for(self, buffer: Any, arrays: tuple[Any, ...] | None,
                  dims: Mapping[str, object]) -> Dims:
        """Dims from the buffer shape (and arrays), reconciled with explicit keywords."""
        inferred = self._infer(tuple(buffer.shape), arrays)
        for key, value in inferred.items():
            if key in dims and integer(dims[key], key) != value:
                raise ValueError(f"{key}={dims[key]} does not match the buffer/arrays, "
                                 f"which imply {key}={value}")
        d = self._resolve({**inferred, **dims})
        expected = self._shape(d)
        if tuple(buffer.shape) != expected:
            raise ValueError(f"buffer must have shape {expected} ({self.shape_doc}), "
                             f"got {tuple(buffer.shape)}")
        return d

    def _check_slots(self, slots: object, n: int | None, d: Dims, like: Any = None,
                     unique: bool = True) -> Any:
        """int64 slots in the namespace and on the device of ``like`` (the buffer; None: NumPy).
        A tensor buffer takes tensor slots on its device, or slots NumPy reads (moved there)."""
        total = self._num_slots(d)
        if slots is None:
            if self.slot_rule == "row_mask" and n != total:
                raise ValueError(f"the logical arrays must have {total} rows (one per "
                                 f"{self.fields[0].axes[0]} of the buffer), got {n}")
            if n is None or n > total:
                raise ValueError(f"{n} logical rows do not fit {total} "
                                 f"{self.fields[0].axes[0]}s; pass slots=")
            return _arange(n, like)
        s = slots if is_tensor(slots) and is_tensor(like) else np.asarray(slots)
        xp = namespace(s)
        if not xp.isdtype(s.dtype, "integral"):
            raise TypeError(f"slots must be an integer array, got {_dtype_name(s)}")
        if s.ndim != 1 or (n is not None and s.shape[0] != n):
            want = f"({n},)" if n is not None else "1-D"
            raise ValueError(f"slots must have shape {want}, got {tuple(s.shape)}")
        if is_tensor(s):
            _check_device(s, like, "slots")
            s = xp.astype(s, xp.int64, copy=False)
        else:
            s = s.astype(np.int64, copy=False)
            if is_tensor(like):
                xp = namespace(like)
                s = xp.asarray(s, device=device_of(like))
        if self.slot_rule == "row_mask":
            if s.shape[0] != total:
                raise ValueError(f"slots must have shape ({total},) (one per token), "
                                 f"got {tuple(s.shape)}")
            return s
        top = int(xp.max(s)) if s.shape[0] else -1
        if top >= total:
            raise ValueError(f"slots must be < {total} (the buffer's "
                             f"{self.fields[0].axes[0]} count), got {top}")
        if unique:
            _check_distinct(s[s >= 0], total)
        return s

    def _destinations(self, slots: Any, keep: Any) -> Any:
        """Index along the buffer's slot axis for each kept row."""
        if self.slot_rule == "row_mask":
            xp = namespace(keep)
            return xp.astype(xp.nonzero(keep)[0], xp.int64)
        return slots[keep]

    def _written_rows(self, slots: object, d: Dims) -> np.ndarray:
        s = self._check_slots(slots, None, d, unique=False)
        return np.unique(self._destinations(s, s >= 0))

    def _decode(self, f: Field, place: _Placement, off: np.ndarray, nib: np.ndarray, d: Dims
                ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray | None]:
        """Offsets inside one field's placement -> hit mask, logical coordinates, word byte."""
        if 0 in place.shape:  # e.g. no padding heads when num_heads/16 fills QS_PAD
            nothing = np.zeros(off.shape, bool)
            empty = np.zeros(0, np.int64)
            return nothing, [empty for _ in f.axes], (empty if f.unit in _WORD_UNITS else None)
        digits, hit = _unstride(place, off)
        nslot = len(place.radices)
        slot = _ravel(digits[:nslot], place.radices)
        row_bytes = self._row_shape(f, d) + word_axis(f)
        flat = _ravel(digits[nslot:], place.shape[nslot:])
        row = np.unravel_index(flat, row_bytes) if row_bytes else ()
        grid = self._grid(f.name, d)
        values = [slot[hit] + grid[0][0]]
        n_axes = len(f.axes) - 1
        for k in range(n_axes):
            values.append(row[k][hit] + grid[k + 1][0])
        if f.unit == "nibble":
            values[-1] = values[-1] * 2 + nib[hit]
        wb = row[-1][hit] if f.unit in _WORD_UNITS else None
        return hit, values, wb


# ---- helpers ---------------------------------------------------------------------------------


def _check_map_size(layout: Layout, d: Dims, f: Field, what: str) -> None:
    """An int64 offset per logical coordinate (per nibble, per word byte) must fit MAX_BYTES."""
    count = 1
    for lo, hi in layout._grid(f.name, d):
        count *= max(hi - lo, 0)
    count *= 2 if f.unit == "nibble" else 4 if f.unit in _WORD_UNITS else 1
    given = ", ".join(f"{k}={shown(d[k])}" for k in layout.dim_defaults)
    allocation(count, 8, f"{layout.name}: dims {given}", f"the int64 {what} of field {f.name}")


def _nibbles(nibble: object, shape: tuple[int, ...]) -> np.ndarray:
    """locate's nibble argument: 0 (low) or 1 (high), an int or an integer array."""
    nib = np.asarray(nibble)
    if nib.dtype == np.bool_ or not np.issubdtype(nib.dtype, np.integer):
        raise TypeError(f"nibble must be 0 or 1 (an int or an integer array), got {nib.dtype}")
    if nib.size and (nib.min() < 0 or nib.max() > 1):
        raise ValueError(f"nibble must be 0 (low) or 1 (high), got values in [{nib.min()}, {nib.max()}]")
    return np.broadcast_to(nib.astype(np.int64), shape)


def _check_buffer(buffer: object, writeable: bool) -> None:
    tensor = is_tensor(buffer)
    if not (tensor or isinstance(buffer, np.ndarray)):
        raise TypeError(f"buffer must be a numpy uint8 array (or a uint8 tensor), "
                        f"got {type(buffer).__name__}")
    if _dtype_name(buffer) != "uint8":
        raise TypeError(f"buffer must have dtype uint8, got {_dtype_name(buffer)}")
    contiguous = buffer.is_contiguous() if tensor else (buffer.flags.c_contiguous
                                                         and buffer.flags.writeable)
    if writeable and not contiguous:
        raise ValueError("buffer must be C-contiguous and writeable (scatter writes in place)")


def _check_device(a: Any, like: Any, name: str) -> None:
    """Every tensor argument on the buffer's device (nothing is moved behind the caller's back)."""
    if device_of(a) != device_of(like):
        raise ValueError(f"{name} must be on the buffer's device ({device_of(like)}), "
                         f"got {device_of(a)}")


def _dtype_name(a: Any) -> str:
    """The dtype's NumPy name (uint8, float32, ...) for a NumPy array or a tensor."""
    return str(a.dtype).removeprefix("torch.")


def _arange(n: int, like: Any) -> Any:
    """int64 0..n-1 in the namespace and on the device of ``like`` (NumPy for None)."""
    if like is None or isinstance(like, np.ndarray):
        return np.arange(n, dtype=np.int64)
    xp = namespace(like)
    return xp.arange(n, dtype=xp.int64, device=device_of(like))


def _dense(a: Any, dtype: Any) -> Any:
    """A C-contiguous copy of ``a`` (a broadcast view) with ``dtype``."""
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a, dtype=dtype)
    return namespace(a).astype(a, dtype).contiguous()


def _check_distinct(valid: Any, total: int) -> None:
    """Two rows aimed at one slot would race on a device: reject them."""
    n = valid.shape[0]
    if n <= 1:
        return
    if isinstance(valid, np.ndarray) and total <= 8 * n + (1 << 20):
        # counting beats sorting when the range is small (NumPy's bincount; the same slot)
        counts = np.bincount(valid, minlength=total)
        repeated = np.flatnonzero(counts > 1)
    else:
        ordered = namespace(valid).sort(valid)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.shape[0]:
        raise ValueError(f"slots must not repeat a slot >= 0; slot {int(repeated[0])} appears "
                         "more than once")


def check_rows(f: Field, a: Any, want: tuple[int, ...]) -> None:
    """A logical array of the field's rows has the shape ``want`` (one-line error naming its axes)."""
    if tuple(a.shape) != want:
        raise ValueError(f"{f.name} must have shape {want} ({', '.join(f.axes)}), "
                         f"got {tuple(a.shape)}")


def word_axis(f: Field) -> tuple[int, ...]:
    """The trailing byte axis of a field stored in 4-byte words (empty for byte fields)."""
    return (4,) if f.unit in _WORD_UNITS else ()


def _to_bytes(f: Field, a: Any) -> Any:
    """Logical array -> its stored bytes (little-endian words get a trailing axis of 4)."""
    if f.unit not in _WORD_UNITS:
        return a
    if isinstance(a, np.ndarray):
        word = np.ascontiguousarray(a, dtype=_WORD_DTYPES[f.unit])
        return word.view(np.uint8).reshape(a.shape + (4,))
    # a tensor of the field's dtype (checked): byte k of each word by shifts (a dtype view
    # would refuse the zero strides an empty tensor may have)
    xp = namespace(a)
    u = bits(a) if f.unit == "f32le" else a
    return xp.stack([xp.astype((u >> 8 * k) & 0xFF, xp.uint8) for k in range(4)], axis=-1)


def _from_bytes(f: Field, raw: Any) -> Any:
    if f.unit not in _WORD_UNITS:
        return raw
    if isinstance(raw, np.ndarray):
        word = np.ascontiguousarray(raw).view(_WORD_DTYPES[f.unit])[..., 0]
        return word.astype(f.dtype)
    xp = namespace(raw)
    b = xp.astype(raw, xp.int32)
    u = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)  # wraps to int32
    return floats(u) if f.unit == "f32le" else u


def _strided(buffer: Any, place: _Placement) -> Any:
    """The placement's view of a C-contiguous uint8 buffer (scatter writes through it)."""
    if isinstance(buffer, np.ndarray):
        return np.lib.stride_tricks.as_strided(buffer.reshape(-1)[place.offset:], place.shape,
                                               place.strides)
    return buffer.as_strided(place.shape, place.strides, buffer.storage_offset() + place.offset)


def _digits(index: Any, radices: tuple[int, ...]) -> tuple[Any, ...]:
    """Mixed-radix split of a non-negative int64 index, outermost digit first."""
    out = []
    rest = index
    for r in reversed(radices[1:]):
        out.append(rest % r)
        rest = rest // r
    out.append(rest)
    return tuple(reversed(out))


def _ravel(digits: tuple[np.ndarray, ...] | list[np.ndarray],
           radices: tuple[int, ...]) -> np.ndarray:
    acc = np.zeros_like(digits[0]) if digits else np.zeros((), np.int64)
    for dgt, r in zip(digits, radices):
        acc = acc * r + dgt
    return acc


def _open_grid(grid: tuple[tuple[int, int], ...], xp: Any, on: Any) -> tuple[Any, ...]:
    """int64 coordinates of each axis, shaped to broadcast (``on``: the device, None for NumPy)."""
    n = len(grid)
    return tuple(xp.reshape(xp.arange(lo, hi, dtype=xp.int64, device=on),
                            (1,) * k + (-1,) + (1,) * (n - k - 1))
                 for k, (lo, hi) in enumerate(grid))


def _grid_shape(coords: tuple[np.ndarray, ...]) -> tuple[int, ...]:
    return np.broadcast_shapes(*(c.shape for c in coords))


def _expand_nibbles(f: Field, offset: Any, xp: Any) -> IndexMap:
    if f.unit != "nibble":
        return IndexMap(offset, None)
    # dim 2k sits in the low nibble of packed byte k, dim 2k+1 in its high nibble
    full = xp.repeat(offset, 2, axis=-1)
    parity = xp.arange(full.shape[-1], dtype=xp.int64, device=device_of(full)) & 1
    return IndexMap(full, _dense(xp.broadcast_to(parity, full.shape), xp.uint8))


def phantom_buffer(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of ``shape`` with C strides over one byte of memory: views of it
    give strides and base offsets without allocating a real buffer (never read it)."""
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=shape,
                                           strides=tuple(reversed(strides)), writeable=False)


def reshape_view(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Reshape that must not copy (scatter writes through these views)."""
    return np.reshape(a, shape, copy=False)


def _unstride(place: _Placement, off: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Split offsets into the placement's axis indices by its strides; hit marks offsets that
    lie on an element of it. Greedy division works because every layout nests its axes
    (each stride exceeds the span of all smaller-stride axes)."""
    rest = off - place.offset
    hit = rest >= 0
    digits = [np.zeros(off.shape, np.int64) for _ in place.shape]
    order = sorted(range(len(place.shape)), key=lambda k: -abs(place.strides[k]))
    for k in order:
        if place.shape[k] <= 1:
            hit &= place.shape[k] == 1
            continue
        q = np.where(hit, rest // place.strides[k], 0)
        hit &= (q >= 0) & (q < place.shape[k])
        digits[k] = np.where(hit, q, 0)
        rest = rest - digits[k] * place.strides[k]
    hit &= rest == 0
    return tuple(digits), hit
