"""The gate's reference on a device: the oracle's functions with NumPy in and out, computed
by the oracle's own code on torch tensors there.

The gate judges on ``--device cuda`` with these (``mxgate.conformance.reference.reference(op,
"cuda")``): the inputs go to the card once, the oracle computes the expected bytes there, and
they come back as NumPy arrays for the judge. The oracle's bit-defining code is written once
against an array namespace (``mxgate.oracle.xp``); tests/test_twin*.py run each function on
NumPy and on tensors and require the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mxgate.oracle.scorers import ScoredLogits


def to_device(a: Any, device: str | torch.device) -> Any:
    """A NumPy array as a tensor with the same bytes on ``device`` (bf16 and uint16 as uint16 bits)."""
    if not isinstance(a, np.ndarray):
        return a
    a = np.ascontiguousarray(a)
    if a.dtype == np.uint16 or a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.uint16).to(device)
    if a.dtype == np.uint32:
        return torch.from_numpy(a.view(np.int32).copy()).to(device)
    return torch.from_numpy(a.copy()).to(device)


def to_numpy(t: Any) -> Any:
    """Tensors (also inside tuples and named tuples) back to NumPy arrays with the same bytes."""
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.dtype in (torch.uint16, torch.bfloat16):
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    if isinstance(t, ScoredLogits):
        return dataclasses.replace(t, **{f: to_numpy(getattr(t, f)) for f in ("value", "bound", "window", "emulated")})
    if isinstance(t, tuple):
        items = [to_numpy(v) for v in t]
        return type(t)(*items) if hasattr(t, "_fields") else tuple(items)
    return t


def on_device(function: Callable[..., Any], device: str | torch.device) -> Callable[..., Any]:
    """The oracle's ``function`` with NumPy in and out, computed on ``device``: the inputs go
    there once, the oracle's own code runs on the tensors, the results come back."""

    def run(*args: Any, **kwargs: Any) -> Any:
        args = tuple(to_device(a, device) for a in args)
        kwargs = {k: to_device(v, device) for k, v in kwargs.items()}
        return to_numpy(function(*args, **kwargs))

    run.__name__ = f"{function.__name__}_on_{torch.device(device).type}"
    run.__doc__ = f"the oracle's {function.__name__} on {device}, NumPy in and out"
    return run
