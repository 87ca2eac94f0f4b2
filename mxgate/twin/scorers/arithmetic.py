"""Transitional: the scorer arithmetic is the oracle's own, written once for every namespace
(mxgate.oracle.scorers.arithmetic). The twin's scorer modules that remain read it here until
they go; then this module goes too."""

from __future__ import annotations

from typing import Any

from mxgate.oracle.scorers import arithmetic as _oar
from mxgate.oracle.scorers.arithmetic import (  # noqa: F401
    add_round_f32,
    bf16_parts,
    exact_matmul,
    f32_parts,
    head_sum,
    pow2_f64,
    weighted_heads,
    weighted_sum_f64,
)


def sum_heads(x: Any, dim: int = 1) -> Any:
    """The oracle's ``sum_heads`` under the twin's keyword (``dim``)."""
    return _oar.sum_heads(x, axis=dim)
