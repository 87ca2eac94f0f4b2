"""Input checks shared by every public oracle function: same rules, same messages."""

from __future__ import annotations

import numpy as np

try:  # ml_dtypes is optional: bf16 arrays are accepted when it is installed.
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _BF16 = None


def as_float32(x: object, name: str) -> np.ndarray:
    """x as a float32 array; bf16/fp16 convert exactly, anything lossy is refused."""
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        value = np.float32(x)
        if float(value) != float(x) and not np.isnan(value):
            raise ValueError(f"{name} must be exactly representable in float32, got {x!r}")
        return np.asarray(value)
    if isinstance(x, np.generic):  # a NumPy scalar: same dtype rules as an array
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of float32 (or bfloat16/float16), got {type(x).__name__}")
    if x.dtype == np.float32:
        return x
    if x.dtype == np.float16 or (_BF16 is not None and x.dtype == _BF16):
        return x.astype(np.float32)
    raise TypeError(
        f"{name} must have dtype float32, bfloat16 or float16, got {x.dtype}; "
        "convert explicitly (a float64 -> float32 rounding is the caller's decision)"
    )


def as_uint8(x: object, name: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of uint8, got {type(x).__name__}")
    if x.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {x.dtype}")
    return x


def check_group(n: int, group: int, name: str) -> None:
    if not isinstance(group, int) or isinstance(group, bool) or group <= 0 or group % 2:
        raise ValueError(f"group must be a positive even integer, got {group!r}")
    if n % group:
        raise ValueError(f"{name} last dimension must be a multiple of group={group}, got {n}")


def check_choice(value: object, name: str, choices: tuple[object, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
