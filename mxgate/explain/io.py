"""Loading arrays for ``mxgate explain``: .npy, .npz (one array, or ``file.npz:key``) and raw
files (with an explicit shape and dtype). Never unpickles: object arrays are refused."""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK"
_DTYPES = ("uint8", "int8", "int32", "int64", "float16", "float32", "bfloat16")


def parse_dtype(name: str, what: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover
            raise ValueError(f"{what}: bfloat16 needs the ml_dtypes package") from None
        return np.dtype(ml_dtypes.bfloat16)
    if name not in _DTYPES:
        raise ValueError(f"{what} must be one of {', '.join(_DTYPES)}; got {name!r}")
    return np.dtype(name)


def parse_shape(text: str, what: str) -> tuple[int, ...]:
    """'4,1,4,64,16' or '4x1x4x64x16' -> (4, 1, 4, 64, 16)."""
    parts = text.replace("x", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts if p.strip())
    except ValueError:
        raise ValueError(f"{what} must be integers separated by ',' or 'x', got {text!r}") from None
    if not shape or any(n < 0 for n in shape):
        raise ValueError(f"{what} must be non-negative integers, got {text!r}")
    return shape


def _split_key(spec: str) -> tuple[Path, str | None]:
    # 'file.npz:key' picks one array of an archive; a plain path has no ':' after '.npz'
    head, sep, key = spec.rpartition(":")
    if sep and head.lower().endswith(".npz"):
        return Path(head), key
    return Path(spec), None


def check_file(path: Path, what: str) -> None:
    """ValueError naming ``what`` unless ``path`` is an existing regular file."""
    if path.is_dir():
        raise ValueError(f"{what}: {str(path)!r} is a directory, not a file")
    if not path.exists():
        raise ValueError(f"{what}: no such file {str(path)!r}")
    if not path.is_file():
        raise ValueError(f"{what}: {str(path)!r} is not a regular file")


def check_writable(spec: str | Path, what: str) -> Path:
    """The path an output file will be written to; ValueError naming ``what`` when it cannot
    be (a missing or unwritable folder, a directory in its place). Checked before any work so
    a long run never ends in a failed write."""
    path = Path(spec)
    if str(spec) == "" or path.name in ("", ".", ".."):
        raise ValueError(f"{what}: {str(spec)!r} names no file")
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"{what}: {str(path)!r} is a directory")
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"{what}: folder {str(folder)!r} {why}")
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{what}: cannot write {str(path)!r} (permission denied)")
    return path


def _sniff(path: Path, what: str, suffix: str) -> None:
    """Refuse a file whose content is not what its suffix says (np.load would otherwise try
    other formats and fail with a misleading message, or not at all)."""
    with path.open("rb") as fh:
        head = fh.read(len(_NPY_MAGIC))
    if not head:
        raise ValueError(f"{what}: {path.name} is empty (0 bytes), not a {suffix} file")
    if suffix == ".npy" and head != _NPY_MAGIC:
        raise ValueError(f"{what}: {path.name} is not a .npy file (no NumPy header)")
    if suffix == ".npz" and not head.startswith(_ZIP_MAGIC):
        raise ValueError(f"{what}: {path.name} is not an .npz archive (not a zip file)")


def check_npy_header(fh: BinaryIO, size: int, what: str, name: str) -> None:
    """ValueError unless the .npy stream ``fh`` (at its start, ``size`` bytes long) holds all
    the data its header claims. Without this a header claiming a huge shape makes NumPy try to
    allocate it (MemoryError) before it notices the file is short."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    else:  # 2.0 and 3.0 share the header's framing (3.0 only allows utf-8 field names)
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    need = math.prod(shape) * dtype.itemsize  # Python ints: a huge shape cannot wrap
    have = size - fh.tell()
    if need > have:
        raise ValueError(f"{what}: {name} claims shape {shape} of {dtype} ({need} bytes) but holds "
                         f"{max(have, 0)} bytes of data: a truncated or damaged .npy file")


def _member(archive: Any, key: str) -> str:
    names = archive.zip.namelist()
    return key if key in names else f"{key}.npy"


def _archive_array(archive: Any, path: Path, what: str, key: str) -> np.ndarray:
    """One array of an open .npz, its header checked against the member's size first."""
    member = _member(archive, key)
    with archive.zip.open(member) as fh:
        check_npy_header(fh, archive.zip.getinfo(member).file_size, what, f"{path.name}:{key}")
    return archive[key]


def _open(path: Path, what: str, suffix: str, key: str | None) -> np.ndarray:
    if suffix == ".npy":
        with path.open("rb") as fh:
            check_npy_header(fh, path.stat().st_size, what, path.name)
        return np.load(path, allow_pickle=False)
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        if key is None:
            if len(names) != 1:
                raise ValueError(f"{what}: {path.name} holds {len(names)} arrays "
                                 f"({', '.join(names)}); pick one as {path.name}:KEY")
            key = names[0]
        if key not in names:
            raise ValueError(f"{what}: {path.name} has no array {key!r} "
                             f"(it holds {', '.join(names)})")
        return _archive_array(archive, path, what, key)


def load_archive(path: Path, what: str) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, by name (same checks and messages as load_array)."""
    check_file(path, what)
    _sniff(path, what, ".npz")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: _archive_array(archive, path, what, name) for name in archive.files}
    except (ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise _unreadable(path, what, ".npz", exc) from None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path.name}: {exc}") from None


def _unreadable(path: Path, what: str, suffix: str, exc: Exception) -> ValueError:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if msg.startswith(what):  # one of ours, already naming the argument
        return ValueError(msg)
    if "pickle" in msg.lower():
        return ValueError(f"{what}: {path.name} holds an object array; refusing to unpickle")
    return ValueError(f"{what}: {path.name} is not a readable {suffix} file ({msg})")


def load_array(spec: str, what: str, shape: tuple[int, ...] | None = None,
               dtype: np.dtype | None = None) -> np.ndarray:
    """Read one array. ``what`` names the argument in every error message."""
    path, key = _split_key(spec)
    check_file(path, what)
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".npz"):
        try:
            return _load_raw(path, what, shape, dtype)
        except OSError as exc:
            raise ValueError(f"{what}: cannot read {path.name}: {exc}") from None
    try:
        _sniff(path, what, suffix)
        arr = _open(path, what, suffix, key)
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        # EOFError: an empty or cut file; BadZipFile: a damaged archive member
        raise _unreadable(path, what, suffix, exc) from None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path.name}: {exc}") from None
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{what}: {path.name} has shape {arr.shape}, --shape says {shape}")
    return arr


def _load_raw(path: Path, what: str, shape: tuple[int, ...] | None,
              dtype: np.dtype | None) -> np.ndarray:
    if shape is None:
        raise ValueError(f"{what}: {path.name} is a raw file; give its shape (--shape and "
                         "friends) and dtype")
    dt = np.dtype(np.uint8) if dtype is None else dtype
    want = math.prod(shape) * dt.itemsize  # Python ints: a huge shape cannot wrap
    size = path.stat().st_size
    if size != want:
        raise ValueError(f"{what}: {path.name} has {size} bytes; shape {shape} of {dt.name} "
                         f"needs {want}")
    return np.fromfile(path, dtype=dt).reshape(shape)


def _bfloat16(what: str) -> np.dtype:
    return parse_dtype("bfloat16", what)


def as_input(arr: np.ndarray, spec: str, what: str, dtype_name: str | None) -> np.ndarray:
    """The quantizer's input as read from a file, given ``--input-dtype`` (None: not given).

    bf16 comes three ways: an ml_dtypes bfloat16 array (np.save writes it as the 2-byte void
    '|V2'), or the bit patterns of a torch bf16 tensor (``t.view(torch.uint16).numpy()``, or
    int16), which are bf16 only when ``--input-dtype bfloat16`` says so. Any other disagreement
    between the file's dtype and the flag is an error: nothing is converted silently."""
    name = _split_key(spec)[0].name
    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2 and arr.dtype.fields is None:
        if dtype_name not in (None, "bfloat16"):
            raise ValueError(f"{what}: {name} holds ml_dtypes bfloat16 (|V2), --input-dtype says {dtype_name}")
        return arr.view(_bfloat16(what))
    if arr.dtype in (np.dtype(np.uint16), np.dtype(np.int16)):
        if dtype_name == "bfloat16":
            return arr.view(_bfloat16(what))
        said = "" if dtype_name is None else f" (--input-dtype says {dtype_name})"
        raise ValueError(f"{what}: {name} holds {arr.dtype} values{said}; if they are bf16 bit patterns, "
                         "pass --input-dtype bfloat16")
    if dtype_name is not None and arr.dtype != parse_dtype(dtype_name, "--input-dtype"):
        raise ValueError(f"{what}: {name} holds {arr.dtype}, --input-dtype says {dtype_name}")
    return arr
