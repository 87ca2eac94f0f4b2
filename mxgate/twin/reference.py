"""The twin as the gate's reference on a device: the oracle's functions with NumPy in and out,
computed by their torch counterparts on that device.

The gate judges on ``--device cuda`` with these (``mxgate.conformance.reference.reference(op, "cuda")``): the
inputs go to the card once, the twin computes the expected bytes there, and they come back as
NumPy arrays for the judge. tests/test_twin.py proves each counterpart bit-identical to the oracle.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mxgate import oracle
from mxgate.oracle.scorers import ScoredLogits
from mxgate.oracle import profiles


def _counterparts() -> dict[Callable[..., Any], Callable[..., Any]]:
    """oracle function -> a separate torch counterpart, for the functions that still have one;
    every other oracle function runs on the tensors itself (one code, two namespaces)."""
    found: dict[Callable[..., Any], Callable[..., Any]] = {}
    for module_name, pairs in (
        ("mxgate.twin.formats", (("encode_e2m1", "encode_e2m1"), ("decode_e2m1", "decode_e2m1"),
                                 ("encode_e4m3", "encode_e4m3"), ("decode_e4m3", "decode_e4m3"),
                                 ("decode_e8m0", "decode_e8m0"), ("bf16_bits", "bf16_bits"))),
        ("mxgate.twin.quantize", (("quantize_mx", "quantize_mx"),)),
        ("mxgate.twin.mx", (("dequantize_mx", "dequantize_mx"),)),
        ("mxgate.twin.scales", (("e8m0_scale", "e8m0_scale"),)),
    ):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for oracle_name, twin_name in pairs:
            found[getattr(oracle, oracle_name)] = getattr(module, twin_name)
    try:
        from mxgate.twin.ops import indexer_qk_rope_quant_and_cache
        found[oracle.ops.indexer_qk_rope_quant_and_cache] = indexer_qk_rope_quant_and_cache
    except ImportError:
        pass
    for family in ("aiter_fp4", "aiter_fp8", "sglang", "vllm"):
        try:
            found.update(importlib.import_module(f"mxgate.twin.scorers.{family}").COUNTERPARTS)
        except (ImportError, AttributeError):
            continue
    return found


COUNTERPARTS = _counterparts()


def models(profile: Any) -> bool:
    try:
        from mxgate.twin.coverage import models as twin_models
    except ImportError:
        return True
    return twin_models(profile)


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


def _profiles_named(args: tuple, kwargs: dict) -> list[Any]:
    """The profiles a call names (by name or as a Profile), wherever they sit in its arguments."""
    values = list(args) + list(kwargs.values())
    return [v for v in values if isinstance(v, profiles.Profile) or (isinstance(v, str) and v in profiles.names())]


def on_device(function: Callable[..., Any], device: str | torch.device) -> Callable[..., Any] | None:
    """The twin counterpart of the oracle's ``function`` with NumPy in and out, run on ``device``;
    None when the twin has none (the oracle itself is the reference then)."""
    counterpart = COUNTERPARTS.get(function, function)
    function_name = function.__name__

    def run(*args: Any, **kwargs: Any) -> Any:
        if counterpart is not function and not all(models(p) for p in _profiles_named(args, kwargs)):
            return function(*args, **kwargs)  # a rule the twin lacks: the oracle on the host
        args = tuple(to_device(a, device) for a in args)
        kwargs = {k: to_device(v, device) for k, v in kwargs.items()}
        return to_numpy(counterpart(*args, **kwargs))

    run.__name__ = f"twin_{function_name}"
    run.__doc__ = f"mxgate.twin's {function_name} on {device}, NumPy in and out"
    return run
