"""Input checks shared by every public oracle function: same rules, same messages.

Scalars, flags, choices and sizes are checked here, once, for the codecs, the layouts and the
ops alike. Each check returns the canonical value (a Python bool, int, the choice's own str,
a float32), so what a function computes with, and what a cache is keyed on, never depends on
which of several equal-hashing spellings (1, 1.0, True, np.True_) the caller used.
"""

from __future__ import annotations

import math
from numbers import Real

import array_api_compat
import numpy as np

# Extension float dtypes accepted by name (ml_dtypes' for NumPy, torch's own for tensors): an
# array can only carry one when its package is loaded, so the oracle never imports ml_dtypes
# itself (half a second of every start-up).
BF16_NAME = "bfloat16"
ONE_BYTE_FLOAT_NAMES = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                                  "float8_e8m0fnu"})

MAX_BYTES = 1 << 47
"""Largest array the oracle allocates from a caller's sizes: the user address space of x86-64
and AArch64 Linux (48-bit virtual addresses), so no machine can hold a bigger one. Sizes that
would need more are a ValueError, whatever this machine's memory."""


# ---- arrays -------------------------------------------------------------------------------------


def is_tensor(x: object) -> bool:
    """A torch tensor (without importing torch: only a module already loaded can make one)."""
    return array_api_compat.is_torch_array(x)


def _tensor_dtype(x: object) -> str:
    return str(x.dtype).removeprefix("torch.")


def as_float32(x: object, name: str) -> np.ndarray:
    """x as a float32 array (or tensor); bf16/fp16 convert exactly, anything lossy is refused."""
    if is_tensor(x):
        if _tensor_dtype(x) == "float32":
            return x
        if _tensor_dtype(x) in ("float16", "bfloat16"):
            return x.float()
        raise TypeError(
            f"{name} must have dtype float32, bfloat16 or float16, got {x.dtype}; "
            "convert explicitly (a float64 -> float32 rounding is the caller's decision)"
        )
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return np.asarray(_exact_float32(x, name))
    if isinstance(x, np.generic):  # a NumPy scalar: same dtype rules as an array
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of float32 (or bfloat16/float16), got {type(x).__name__}")
    if x.dtype == np.float32:
        return x
    if x.dtype == np.float16 or x.dtype.name == BF16_NAME:
        return x.astype(np.float32)
    raise TypeError(
        f"{name} must have dtype float32, bfloat16 or float16, got {x.dtype}; "
        "convert explicitly (a float64 -> float32 rounding is the caller's decision)"
    )


def _exact_float32(x: float | int, name: str) -> np.float32:
    """A Python float or int that is a float32 value exactly (NaN included), else ValueError."""
    refused = ValueError(f"{name} must be exactly representable in float32, got {shown(x)}")
    if isinstance(x, int):
        if abs(x) > int(np.finfo(np.float32).max):
            raise refused
        value = np.float32(float(x))  # float(x) is exact whenever the float32 is
        if int(value) != x:
            raise refused
        return value
    if math.isnan(x):
        return np.float32(x)
    with np.errstate(over="ignore"):
        value = np.float32(x)
    if float(value) != x:
        raise refused
    return value


def as_array(x: object, name: str) -> np.ndarray:
    """x itself when it is a NumPy array or a tensor (its dtype is the caller's next check)."""
    if not isinstance(x, np.ndarray) and not is_tensor(x):
        raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
    return x


def as_uint8(x: object, name: str) -> np.ndarray:
    if is_tensor(x):
        if _tensor_dtype(x) != "uint8":
            raise TypeError(f"{name} must have dtype uint8, got {x.dtype}")
        return x
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of uint8, got {type_name(x)}")
    if x.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {x.dtype}")
    return x


def allocation(count: int, itemsize: int, subject: str, what: str) -> None:
    """Refuse an allocation of ``count`` items of ``itemsize`` bytes beyond MAX_BYTES. subject
    names the argument(s) that asked for it ("max_seq_len=10**12"), what the array."""
    nbytes = int(count) * int(itemsize)
    if nbytes > MAX_BYTES:
        raise ValueError(f"{subject} is too large: {what} would take {shown(nbytes)} bytes, "
                         f"more than the {MAX_BYTES} bytes (2^47) any machine can address")


# ---- scalars ------------------------------------------------------------------------------------


def type_name(value: object) -> str:
    """int, float, numpy.bool, numpy.float64: NumPy's scalar types keep their module, so
    np.False_ does not read as a plain bool in a message."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def shown(value: object) -> str:
    """repr for messages; an int too long to print whole is summarised by its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    return repr(value)


def flag(value: object, name: str) -> bool:
    """A flag: exactly True or False. 0, 1 and numpy.bool_ are refused: they hash like the
    bools but are different arguments (bool() them explicitly)."""
    if not isinstance(value, bool):  # bool has no subclasses: this is type(value) is bool
        raise TypeError(f"{name} must be a bool, got {type_name(value)}")
    return value


def integer(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A Python or NumPy integer (not a bool) as a Python int, within [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type_name(value)}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {shown(number)}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {shown(number)}")
    return number


def real(value: object, name: str, *, finite: bool = True, minimum: float | None = None,
         positive: bool = False) -> np.float32:
    """A real scalar argument as the float32 a kernel's C float parameter receives (the host
    passes a double; the cast rounds to nearest). Python ints of any size and NumPy scalars are
    accepted; bools are not. finite: NaN and +-Inf (after the rounding) are refused; minimum /
    positive: the value must be >= minimum / > 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type_name(value)}")
    try:
        double = float(value)
    except OverflowError:  # a Python int beyond the double range
        rule = "finite in float32" if finite else "within the float64 range"
        raise ValueError(f"{name} must be {rule}, got {shown(value)}") from None
    with np.errstate(over="ignore"):
        single = np.float32(double)
    if finite and not np.isfinite(single):
        raise ValueError(f"{name} must be finite in float32, got {shown(value)}")
    if positive and not single > 0:
        raise ValueError(f"{name} must be > 0, got {shown(value)}")
    if minimum is not None and not single >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {shown(value)}")
    return single


def choice(value: object, name: str, choices: tuple[object, ...]) -> object:
    """The member of ``choices`` that ``value`` names, returned as that member itself.

    A value of a type no member has (saturate=0 against False/True/"satfinite") is a TypeError;
    a value of the right type that is no member is a ValueError. Bools match bools only; a str
    subclass (numpy.str_) matches the plain str.
    """
    for option in choices:
        if _same_kind(value, option) and value == option:
            return option
    listed = ", ".join(map(repr, choices))
    if not any(_same_kind(value, option) for option in choices):
        raise TypeError(f"{name} must be one of {listed}; got {type_name(value)} {shown(value)}")
    raise ValueError(f"{name} must be one of {listed}; got {value!r}")


def _same_kind(value: object, option: object) -> bool:
    if option is None or isinstance(option, bool):
        return type(value) is type(option)
    if isinstance(option, str):
        return isinstance(value, str)
    return type(value) is type(option)


def check_choice(value: object, name: str, choices: tuple[object, ...]) -> None:
    choice(value, name, choices)


def check_group(n: int, group: object, name: str) -> int:
    """group: a positive even int dividing n (the last dimension of ``name``)."""
    if isinstance(group, (bool, np.bool_)) or not isinstance(group, (int, np.integer)) or group <= 0 or group % 2:
        raise ValueError(f"group must be a positive even integer, got {group!r}")
    if n % group:
        raise ValueError(f"{name} last dimension must be a multiple of group={group}, got {n}")
    return int(group)
