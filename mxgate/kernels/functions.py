"""Make a backend from plain functions: the short path for a kernel author.

    from mxgate.kernels.functions import backend_from_functions, kernel

    Backend = backend_from_functions(
        "my-quantizer",
        kernel(OpName.E2M1_ENCODE, my_encode, profile="gfx950"),
        kernel(OpName.MX_QUANTIZE, my_quantize, profile="gfx950", arrays="torch"),
    )

Each function takes the op's inputs (mxgate.op_table, ``mxgate backends --ops``) and returns its outputs, as
NumPy arrays (``arrays="numpy"``) or torch tensors (``arrays="torch"``: mxgate moves the inputs
to the backend's device, CPU or CUDA, and the outputs back). The op name, the profile and the
function's parameters are checked when the backend is made, with one-line errors.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires
from mxgate.op_table import TABLE, spec

Arrays = Literal["numpy", "torch"]


@dataclass(frozen=True)
class Kernel:
    """One op of a function-made backend."""

    op: str
    function: Callable[..., Any]
    profile: str
    arrays: Arrays = "numpy"
    note: str = ""
    outside_contract: Callable[..., str | None] | None = None


def kernel(op: str, function: Callable[..., Any], *, profile: str, arrays: Arrays = "numpy", note: str = "",
           outside_contract: Callable[..., str | None] | None = None) -> Kernel:
    """Declare ``function`` as the implementation of ``op`` under ``profile`` (checked now).

    ``outside_contract``: a function of the op's inputs (NumPy arrays) that returns why they lie
    outside this kernel's contract, or None; only there may the kernel raise OutsideContract."""
    from mxgate.oracle import profiles

    if op not in TABLE:
        raise ValueError(f"op must be one of {', '.join(sorted(TABLE))}; got {op!r}")
    if not callable(function):
        raise TypeError(f"{op}: the function must be callable, got {type(function).__name__}")
    if profile not in profiles.names():
        raise ValueError(f"{op}: profile must be one of {', '.join(profiles.names())} "
                         f"(or a profile registered with mxgate.oracle.profiles); got {profile!r}")
    if arrays not in ("numpy", "torch"):
        raise ValueError(f"{op}: arrays must be 'numpy' or 'torch', got {arrays!r}")
    _check_parameters(op, function)
    if outside_contract is not None:
        if not callable(outside_contract):
            raise TypeError(f"{op}: outside_contract must be callable, got {type(outside_contract).__name__}")
        _check_parameters(op, outside_contract)
    return Kernel(op, function, profile, arrays, note, outside_contract)


def _check_parameters(op: str, function: Callable[..., Any]) -> None:
    inputs = spec(op).positional
    if not inputs:
        return  # keyword-called op: its keywords are in the op table (mxgate backends --ops)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a builtin without a signature: checked by the call itself
    try:
        signature.bind(*inputs)
    except TypeError as error:
        raise TypeError(f"{op} takes ({', '.join(inputs)}) (mxgate backends --ops lists every op's inputs); "
                        f"{getattr(function, '__name__', 'the function')}{signature} cannot be called that way: {error}"
                        ) from None


def _to_torch(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype == np.uint16:  # bf16 bit patterns: torch has no uint16 arithmetic on every build
            return torch.from_numpy(value.view(np.int16).copy()).to(device).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(value).copy()).to(device)
    return value


def _to_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        import torch

        if value.dtype == torch.bfloat16:
            return value.detach().cpu().view(torch.int16).numpy().view(np.uint16)
        return value.detach().cpu().numpy()
    if isinstance(value, (tuple, list)):
        return type(value)(_to_numpy(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    return value


def _runner(k: Kernel, backend: Backend) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        if k.arrays == "torch":
            args = tuple(_to_torch(a, backend.device) for a in args)
            kwargs = {n: _to_torch(a, backend.device) for n, a in kwargs.items()}
        return _to_numpy(k.function(*args, **kwargs))

    run.__name__ = getattr(k.function, "__name__", k.op)
    return run


def backend_from_functions(name: str, *kernels: Kernel, description: str = "",
                           devices: tuple[str, ...] = ("cpu",)) -> type[Backend]:
    """A Backend subclass (give it to ``--backend module:attr``) whose ops are these functions.

    devices: where the functions can run ('cpu', 'cuda'); on another device the backend is
    'not supported here'. Functions taking torch tensors need torch installed.
    """
    if not kernels:
        raise ValueError(f"backend {name!r}: give at least one kernel(op, function, profile=...)")
    seen: dict[str, Kernel] = {}
    for k in kernels:
        if not isinstance(k, Kernel):
            raise TypeError(f"backend {name!r}: expected kernel(...) declarations, got {type(k).__name__}")
        if k.op in seen:
            raise ValueError(f"backend {name!r}: op {k.op!r} is declared twice")
        seen[k.op] = k
    for device in devices:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"backend {name!r}: devices must be 'cpu' and/or 'cuda', got {device!r}")
    needs_torch = any(k.arrays == "torch" for k in kernels)

    class FunctionBackend(Backend):
        def available(self) -> Availability:
            if self.device not in devices:
                return Availability(False, f"{name} runs on {', '.join(devices)} only")
            if needs_torch or self.device == "cuda":
                missing = requires("torch")
                if not missing:
                    return missing
                import torch

                if self.device == "cuda" and not torch.cuda.is_available():
                    return Availability(False, "torch reports no CUDA device")
            return AVAILABLE

        def ops(self) -> dict[str, Op]:
            return {k.op: Op(k.op, k.profile, _runner(k, self), k.note, outside_contract=k.outside_contract)
                    for k in seen.values()}

    FunctionBackend.__name__ = FunctionBackend.__qualname__ = f"FunctionBackend[{name}]"
    FunctionBackend.description = description or f"{name}: " + ", ".join(seen)
    return FunctionBackend
