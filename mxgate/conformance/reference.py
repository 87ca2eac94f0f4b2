"""What the gate judges each op against, on the device the run names.

``mxgate.op_table`` declares each op's oracle reference (NumPy, on the host). On ``--device
cuda`` the gate computes the same function with the torch twin on the card instead
(``mxgate.twin.reference``, proven bit-identical to the oracle), so that production-size
outputs are judged where they lie. The dispatch lives here, above both: the op table and the
oracle never import the twin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxgate import op_table


def reference(op: str, device: str = "cpu", *, twin: bool | None = None) -> Callable[..., Any] | None:
    """The reference function of ``op``, NumPy in and out (None where a backend-specific model
    judges it): the oracle's on the CPU; on ``cuda`` (or with twin=True) the torch twin's
    counterpart on that device where it has one."""
    function = op_table.reference(op)
    return None if function is None else computed_on(function, device, twin=twin)


def computed_on(function: Callable[..., Any], device: str = "cpu", *, twin: bool | None = None) -> Callable[..., Any]:
    """The oracle's ``function`` as the gate runs it on ``device``, NumPy in and out: itself on
    the CPU, its torch twin on that device where the twin has one."""
    if device != "cpu" if twin is None else twin:
        from mxgate.twin.reference import on_device  # torch: only when judging on a device

        return on_device(function, device) or function
    return function
