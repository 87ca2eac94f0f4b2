"""What the gate judges each op against, on the device the run names.

``mxgate.op_table`` declares each op's oracle reference (NumPy, on the host). On ``--device
cuda`` the gate computes the same function on the card instead: the oracle's own code on torch
tensors (``mxgate.twin.reference``), so that production-size outputs are judged where they lie.
The dispatch lives here, above both: the op table and the oracle never import the twin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxgate import op_table


def reference(op: str, device: str = "cpu", *, twin: bool | None = None) -> Callable[..., Any] | None:
    """The reference function of ``op``, NumPy in and out (None where a backend-specific model
    judges it): the oracle's, on the host for the CPU; on ``cuda`` (or with twin=True) the same
    function computed on tensors on that device."""
    function = op_table.reference(op)
    return None if function is None else computed_on(function, device, twin=twin)


def computed_on(function: Callable[..., Any], device: str = "cpu", *, twin: bool | None = None) -> Callable[..., Any]:
    """The oracle's ``function`` as the gate runs it on ``device``, NumPy in and out: itself on
    the CPU, or computed on tensors on that device."""
    if device != "cpu" if twin is None else twin:
        from mxgate.twin.reference import on_device  # torch: only when judging on a device

        return on_device(function, device)
    return function
