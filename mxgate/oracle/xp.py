"""The array namespace the oracle computes in, and what the array API standard lacks.

Every bit-defining function of the oracle is written once against a namespace ``xp``: NumPy
itself for NumPy arrays (the default, and the fast path: NumPy's own functions, ``out=``
buffers, threads), array-api-compat's torch namespace for torch tensors on the CPU or a GPU.
The oracle never imports torch: a tensor argument means the caller has imported it, and
array-api-compat only looks at modules already loaded.

What the standard has no word for lives here, once:

* bit casts between float32 and int32 (``bits`` / ``floats``) and float64 and int64. Bit
  patterns in generic code are **int32**: torch has no uint32 shifts or comparisons on every
  device. Magnitudes (``u & ABS``) are non-negative, so their signed order is the unsigned
  one; ``srl`` is the logical right shift uint32 would give, ``i32`` spells a uint32
  constant as the int32 with the same bits.
* tables built once in NumPy and used on the device (``table_on``: moved once per device).
* the NaN each host leaves behind (``x86_nan``, ``quiet_or_default``): CUDA's arithmetic
  returns its canonical NaN where x86 keeps an operand's, so the oracle fixes NaNs by bits.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import array_api_compat
import numpy as np

ABS = 0x7FFFFFFF
EXP = 0x7F800000
MANT = 0x007FFFFF
QUIET = 0x00400000
SIGN = -0x80000000  # 0x80000000 as int32
DEFAULT_NAN = 0x7FC00000
INDEFINITE = -0x00400000  # 0xFFC00000 as int32: x86's NaN for inf - inf and 0 * inf

_PLAIN = (int, float, bool, complex, str, bytes, type(None), np.ndarray, np.generic, list, tuple, dict)


def namespace(*arrays: Any) -> ModuleType:
    """NumPy, unless an argument is another library's array (then that library's namespace).

    Python scalars, NumPy arrays, lists and None never decide; mixing a tensor with a NumPy
    array is allowed (the NumPy one is a table or a constant the caller moves).
    """
    others = [a for a in arrays if not isinstance(a, _PLAIN)]
    if not others:
        return np
    return array_api_compat.array_namespace(*others)


def on_device(device: Any) -> ModuleType:
    """The namespace of arrays made on ``device`` (a torch device or its name), for functions
    that create arrays from sizes alone: torch's, which the caller must have imported."""
    if "torch" not in sys.modules:
        raise TypeError(f"device={device!r} asks for a torch tensor, but torch is not imported")
    return importlib.import_module("array_api_compat.torch")


def is_numpy(xp: ModuleType) -> bool:
    return xp is np or array_api_compat.is_numpy_namespace(xp)


def device(x: Any) -> Any:
    return array_api_compat.device(x)


def i32(value: int) -> int:
    """A uint32 constant as the int32 with the same bits."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _view(a: Any, source: str | None, target: str) -> Any:
    """``a`` (as ``source`` dtype, NumPy only; None keeps it) reinterpreted as ``target``."""
    if isinstance(a, np.ndarray | np.generic):
        return np.require(a, dtype=source, requirements="C").view(target)
    return a.contiguous().view(getattr(namespace(a), target))


def bits(x: Any) -> Any:
    """int32 bit patterns of a float32 array (a view where the layout allows)."""
    return _view(x, "float32", "int32")


def floats(u: Any) -> Any:
    """float32 values of int32 (or uint32) bit patterns."""
    return _view(u, None, "float32")


def bits64(x: Any) -> Any:
    """int64 bit patterns of a float64 array."""
    return _view(x, "float64", "int64")


def floats64(u: Any) -> Any:
    """float64 values of int64 bit patterns."""
    return _view(u, "int64", "float64")


def srl(u: Any, k: int) -> Any:
    """Logical (unsigned) right shift of int32 patterns by k in [1, 31]."""
    return (u >> k) & ((1 << (32 - k)) - 1)


def is_nan_bits(u: Any) -> Any:
    return (u & ABS) > EXP


def quiet_or_default(u: Any) -> Any:
    """The NaN x86 arithmetic leaves behind: an input NaN quieted, else +qNaN (0x7FC00000)."""
    xp = namespace(u)
    return xp.where(is_nan_bits(u), u | QUIET, xp.full_like(u, DEFAULT_NAN))


def x86_nan(result: Any, *operands: Any) -> Any:
    """``result`` with every NaN as x86 array arithmetic leaves it: the first NaN operand
    quieted, else the "indefinite" NaN 0xFFC00000 (inf - inf, 0 * inf)."""
    xp = namespace(result, *operands)
    u = bits(result)
    pick = xp.full_like(u, INDEFINITE)
    for operand in reversed(operands):
        v = xp.broadcast_to(bits(operand), u.shape)
        pick = xp.where(is_nan_bits(v), v | QUIET, pick)
    return floats(xp.where(is_nan_bits(u), pick, u))


def pow2_f32(exponent: Any) -> Any:
    """2**e as float32 for integer exponents in [-149, 127], built from bits (exact)."""
    xp = namespace(exponent)
    e = xp.astype(xp.asarray(exponent), xp.int64) if not is_numpy(xp) else np.asarray(exponent, dtype=np.int64)
    if _size(e) and (int(xp.min(e)) < -149 or int(xp.max(e)) > 127):
        raise ValueError("exponent must lie in [-149, 127] for a float32 power of two")
    normal = xp.clip(e + 127, 1, 254) << 23
    subnormal = xp.ones_like(e) << xp.clip(e + 149, 0, 22)
    return floats(xp.astype(xp.where(e >= -126, normal, subnormal), xp.int32))


def pow2_f64(exponent: Any) -> Any:
    """2**e as float64 for integer e in [-1022, 1023], from bits (exact, no exp2 call)."""
    xp = namespace(exponent)
    e = xp.astype(exponent, xp.int64) if not is_numpy(xp) else np.asarray(exponent, dtype=np.int64)
    if _size(e) and (int(xp.min(e)) < -1022 or int(xp.max(e)) > 1023):
        raise ValueError("exponent must lie in [-1022, 1023] for a normal float64 power of two")
    return floats64((e + 1023) << 52)


def _size(a: Any) -> int:
    return int(np.prod(a.shape)) if a.shape else 1


_ON_DEVICE: dict[tuple[int, str], tuple[np.ndarray, Any]] = {}


def table_on(table: np.ndarray, like: Any) -> Any:
    """A NumPy table in the namespace and on the device of ``like``: the table itself for NumPy,
    else moved there once (tables are built once, read-only, and kept alive by their caches)."""
    if isinstance(like, np.ndarray | np.generic) or not hasattr(like, "device"):
        return table
    xp = namespace(like)
    key = (id(table), str(like.device))
    hit = _ON_DEVICE.get(key)
    if hit is None or hit[0] is not table:
        source = np.ascontiguousarray(table)
        if source.dtype == np.uint32:  # torch's uint32 lacks indexing on some devices: same bits
            source = source.view(np.int32)
        elif source.dtype == np.uint16:
            source = source.view(np.int16)
        hit = (table, xp.asarray(source.copy(), device=like.device))
        _ON_DEVICE[key] = hit
    return hit[1]


def take(table: Any, index: Any) -> Any:
    """table[index] elementwise (any index shape); torch indexes with int64."""
    if isinstance(index, np.ndarray | np.generic):
        return table[index]
    xp = namespace(index)
    return table[xp.astype(index, xp.int64)]


@contextlib.contextmanager
def ieee_quiet(xp: ModuleType) -> Iterator[None]:
    """NumPy's floating-point warnings off (overflow to Inf and invalid results are by design);
    torch never warns."""
    if is_numpy(xp):
        with np.errstate(all="ignore"):
            yield
    else:
        yield


def to_numpy(a: Any) -> np.ndarray:
    """Any namespace's array as a NumPy array with the same bytes (small values the oracle
    inspects on the host, such as a maximum or a flag)."""
    if isinstance(a, np.ndarray):
        return a
    return np.asarray(array_api_compat.to_device(a, "cpu"))
