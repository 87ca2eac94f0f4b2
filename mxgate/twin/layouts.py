"""Scatter and gather of every oracle layout on torch buffers (any device).

Each twin layout wraps the oracle's ``Layout`` and reuses its own description of the bytes:
the strided views its ``_views`` hook builds over a phantom buffer give, per field, the shape,
strides and starting offset, which become ``torch.as_strided`` views of the torch buffer.
Scatter and gather then do what the oracle's do (one indexed assignment or read per field),
with the same checks and messages; slots are checked on the slots' device.

    kv = twin.layouts.get("aiter-fp4-kv")
    buf = kv.new_buffer(num_blocks=4, device="cuda")
    kv.scatter(buf, packed, slots=slot_mapping)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mxgate.oracle import layouts as _oracle_layouts
from mxgate.oracle.layouts import POISON, Field, Layout, check_rows, phantom_buffer, word_axis

_WORD_DTYPES = {"f32le": torch.float32, "i32le": torch.int32}
_TORCH_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.float32): torch.float32,
                 np.dtype(np.int32): torch.int32}


@dataclass(frozen=True)
class _Strided:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    radices: tuple[int, ...]


def _strided_views(layout: Layout, d: dict[str, int]) -> dict[str, _Strided]:
    """Per field and pad: the oracle's strided view of a buffer, as sizes/strides/offset."""
    shadow = phantom_buffer(layout._shape(d))
    base = shadow.__array_interface__["data"][0]
    out = {}
    for name, view in layout._views(shadow, d).items():
        a = view.array
        out[name] = _Strided(tuple(a.shape), tuple(int(s) for s in a.strides),
                             a.__array_interface__["data"][0] - base, tuple(view.radices))
    return out


class _Proxy:
    """Shape-only stand-in for a logical tensor where the oracle's checks read ndim/shape."""

    def __init__(self, t: torch.Tensor) -> None:
        self.shape = tuple(t.shape)
        self.ndim = t.dim()


def _digits(index: torch.Tensor, radices: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """Mixed-radix split of an int64 index, outermost digit first."""
    out = []
    rest = index
    for r in reversed(radices[1:]):
        out.append(rest % r)
        rest = rest // r
    out.append(rest)
    return tuple(reversed(out))


class TwinLayout:
    """Torch scatter / gather of one oracle layout (``.oracle`` is the oracle's object)."""

    def __init__(self, layout: Layout) -> None:
        self.oracle = layout
        self.name = layout.name
        self.fields: tuple[Field, ...] = layout.fields

    def __repr__(self) -> str:
        return f"<TwinLayout {self.name}>"

    def buffer_shape(self, **dims: int) -> tuple[int, ...]:
        return self.oracle.buffer_shape(**dims)

    def new_buffer(self, fill: int = POISON, device: str | torch.device = "cpu", **dims: int) -> torch.Tensor:
        if not 0 <= int(fill) <= 255:
            raise ValueError(f"fill must be a byte value in [0, 255], got {fill}")
        return torch.full(self.buffer_shape(**dims), int(fill), dtype=torch.uint8, device=device)

    # ---- checks ----------------------------------------------------------------------------

    def _check_buffer(self, buffer: object, writeable: bool) -> torch.Tensor:
        if not isinstance(buffer, torch.Tensor):
            raise TypeError(f"buffer must be a torch uint8 tensor, got {type(buffer).__name__}")
        if buffer.dtype != torch.uint8:
            raise TypeError(f"buffer must have dtype uint8, got {buffer.dtype}")
        if writeable and not buffer.is_contiguous():
            raise ValueError("buffer must be contiguous (scatter writes in place)")
        return buffer

    def _check_logical(self, logical: tuple[object, ...]) -> tuple[torch.Tensor, ...]:
        names = ", ".join(f.name for f in self.fields)
        if len(logical) != len(self.fields):
            raise TypeError(f"{self.name}.scatter takes {len(self.fields)} logical array(s) ({names}), got {len(logical)}")
        for f, a in zip(self.fields, logical):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{f.name} must be a torch tensor, got {type(a).__name__}")
            want = _TORCH_DTYPES[np.dtype(f.dtype)]
            if a.dtype != want:
                raise TypeError(f"{f.name} must have dtype {want}, got {a.dtype}")
            if a.dim() < 1:
                raise ValueError(f"{f.name} must have a leading {f.axes[0]} axis, got a scalar")
        return tuple(logical)  # type: ignore[return-value]

    def _dims(self, buffer: torch.Tensor, arrays: tuple[torch.Tensor, ...] | None, dims: dict) -> dict[str, int]:
        proxies = None if arrays is None else tuple(_Proxy(a) for a in arrays)
        return self.oracle._dims_for(phantom_buffer(tuple(buffer.shape)), proxies, dims)

    def _check_slots(self, slots: object, n: int | None, d: dict[str, int], device: torch.device,
                     unique: bool = True) -> torch.Tensor:
        layout = self.oracle
        total = layout._num_slots(d)
        axis = self.fields[0].axes[0]
        if slots is None:
            if layout.slot_rule == "row_mask" and n != total:
                raise ValueError(f"the logical arrays must have {total} rows (one per {axis} of the buffer), got {n}")
            if n is None or n > total:
                raise ValueError(f"{n} logical rows do not fit {total} {axis}s; pass slots=")
            return torch.arange(n, dtype=torch.int64, device=device)
        if not isinstance(slots, torch.Tensor):
            slots = torch.as_tensor(np.asarray(slots), device=device)
        if slots.dtype == torch.bool or slots.dtype.is_floating_point or slots.dtype.is_complex:
            raise TypeError(f"slots must be an integer array, got {slots.dtype}")
        if slots.dim() != 1 or (n is not None and slots.shape[0] != n):
            want = f"({n},)" if n is not None else "1-D"
            raise ValueError(f"slots must have shape {want}, got {tuple(slots.shape)}")
        s = slots.to(device=device, dtype=torch.int64)
        if layout.slot_rule == "row_mask":
            if s.shape[0] != total:
                raise ValueError(f"slots must have shape ({total},) (one per token), got {tuple(s.shape)}")
            return s
        if s.numel() and int(s.max()) >= total:
            raise ValueError(f"slots must be < {total} (the buffer's {axis} count), got {int(s.max())}")
        if unique:
            valid = torch.sort(s[s >= 0]).values
            repeated = valid[1:][valid[1:] == valid[:-1]]
            if repeated.numel():
                raise ValueError(f"slots must not repeat a slot >= 0; slot {int(repeated[0])} appears more than once")
        return s

    def _destinations(self, slots: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        if self.oracle.slot_rule == "row_mask":
            return torch.nonzero(keep).reshape(-1)
        return slots[keep]

    # ---- scatter / gather -----------------------------------------------------------------

    def _view(self, buffer: torch.Tensor, s: _Strided) -> torch.Tensor:
        return torch.as_strided(buffer, s.size, s.stride, buffer.storage_offset() + s.offset)

    def scatter(self, buffer: torch.Tensor, *logical: torch.Tensor, slots: object = None, **dims: int) -> torch.Tensor:
        """Write the logical tensors into ``buffer`` in place, as the oracle's scatter does
        (rows with slot < 0 skipped, pads of written rows zeroed). Returns ``buffer``."""
        buffer = self._check_buffer(buffer, writeable=True)
        arrays = self._check_logical(logical)
        d = self._dims(buffer, arrays, dims)
        n = arrays[0].shape[0]
        for f, a in zip(self.fields, arrays):
            check_rows(f, a, (n,) + self.oracle._row_shape(f, d))
        slot_arr = self._check_slots(slots, n, d, buffer.device)
        keep = slot_arr >= 0
        rows = self._destinations(slot_arr, keep)
        views = _strided_views(self.oracle, d)
        for f, a in zip(self.fields, arrays):
            s = views[f.name]
            data = _to_bytes(f, a.to(buffer.device)[keep])
            target = self._view(buffer, s)
            target[_digits(rows, s.radices)] = data.reshape((rows.numel(),) + s.size[len(s.radices):])
        for pad in self.oracle.pads:
            s = views[pad.name]
            if 0 in s.size:
                continue
            self._view(buffer, s)[_digits(rows, s.radices)] = 0
        return buffer

    def gather(self, buffer: torch.Tensor, slots: object = None, **dims: int) -> tuple[torch.Tensor, ...]:
        """Read the logical tensors back, one row per slot (rows of slot < 0 all POISON)."""
        buffer = self._check_buffer(buffer, writeable=False).contiguous()
        d = self._dims(buffer, None, dims)
        if slots is None:
            slot_arr = torch.arange(self.oracle._num_slots(d), dtype=torch.int64, device=buffer.device)
        else:
            slot_arr = self._check_slots(slots, None, d, buffer.device, unique=False)
        keep = slot_arr >= 0
        rows = self._destinations(slot_arr, keep)
        views = _strided_views(self.oracle, d)
        out = []
        for f in self.fields:
            s = views[f.name]
            got = self._view(buffer, s)[_digits(rows, s.radices)]
            row_shape = self.oracle._row_shape(f, d) + word_axis(f)
            full = torch.full((slot_arr.numel(),) + row_shape, POISON, dtype=torch.uint8, device=buffer.device)
            full[keep] = got.reshape((rows.numel(),) + row_shape)
            out.append(_from_bytes(f, full))
        return tuple(out)


def _to_bytes(f: Field, a: torch.Tensor) -> torch.Tensor:
    if f.unit in _WORD_DTYPES:
        word = a.to(_WORD_DTYPES[f.unit]).contiguous()
        return word.view(torch.uint8).reshape(tuple(a.shape) + (4,))
    return a


def _from_bytes(f: Field, raw: torch.Tensor) -> torch.Tensor:
    if f.unit in _WORD_DTYPES:
        return raw.contiguous().view(_WORD_DTYPES[f.unit])[..., 0]
    return raw


_REGISTRY = {name: TwinLayout(_oracle_layouts.get(name)) for name in _oracle_layouts.names()}


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> TwinLayout:
    """The twin of oracle layout ``name`` (same names, same errors)."""
    _oracle_layouts.get(name)  # raises the oracle's TypeError / ValueError for a bad name
    return _REGISTRY[name]
