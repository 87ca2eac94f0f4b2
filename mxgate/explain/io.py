"""Loading arrays for ``mxgate explain``: .npy, .npz (one array, or ``file.npz:key``) and raw
files (with an explicit shape and dtype). Never unpickles: object arrays are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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


def load_array(spec: str, what: str, shape: tuple[int, ...] | None = None,
               dtype: np.dtype | None = None) -> np.ndarray:
    """Read one array. ``what`` names the argument in every error message."""
    path, key = _split_key(spec)
    if not path.is_file():
        raise ValueError(f"{what}: no such file {str(path)!r}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
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
                arr = archive[key]
        else:
            return _load_raw(path, what, shape, dtype)
    except ValueError as exc:
        msg = str(exc)
        if "pickle" in msg.lower():
            raise ValueError(f"{what}: {path.name} holds an object array; "
                             "refusing to unpickle") from None
        raise ValueError(msg if msg.startswith(what) else f"{what}: {msg}") from None
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
    want = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    size = path.stat().st_size
    if size != want:
        raise ValueError(f"{what}: {path.name} has {size} bytes; shape {shape} of {dt.name} "
                         f"needs {want}")
    return np.fromfile(path, dtype=dt).reshape(shape)
