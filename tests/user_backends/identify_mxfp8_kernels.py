"""MXFP8 (``mx.quantize_e4m3fn``) kernels with planted rules for tests/test_identify_mxfp8.py.

Each is built from the oracle's own functions and declares the unmodified profile:

- ``floor_scale``: the oracle's MXFP8 op under gfx950 with ``scale_policy='floor'`` (a profile
  field: identify must name exactly it);
- ``nan_overflow``: the oracle's scale bytes under ``ocp`` (floor, so a scaled element can exceed
  448), its elements encoded with e4m3fn overflow to NaN (0x7F / 0xFF) instead of the op's
  saturation to +-448. That rule is the op's, not a profile field's (OCP MX v1.0 section 6.3
  clamps), so no field value explains it: identify must report those bytes as unexplained.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import profiles
from mxgate.oracle.formats import e2m1
from mxgate.oracle.geometry import GROUP

MXFP8 = OpName.MX_QUANTIZE_E4M3FN
FLOOR = dataclasses.replace(profiles.get("gfx950"), name="planted-mxfp8-floor", scale_policy="floor")
OCP = profiles.get("ocp")


def _floor(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return oracle.quantize_mx_e4m3fn(x, FLOOR)


def _nan_overflow(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's e8m0 bytes under ocp; each element divided by its scale as the oracle does,
    then encoded without saturation: beyond 464 (448's rounding edge) and +-Inf give NaN."""
    _, e8m0 = oracle.quantize_mx_e4m3fn(x, OCP)
    groups = np.asarray(x, np.float32).reshape(-1, GROUP)
    with np.errstate(all="ignore"):
        scaled = e2m1.scaled_by_e8m0(groups, e8m0.reshape(-1, 1), OCP)
    codes = oracle.encode_e4m3(scaled, "fn", saturate=False)
    return codes.reshape(np.shape(x)), e8m0


floor_scale = backend_from_functions("planted-mxfp8-floor", kernel(MXFP8, _floor, profile="gfx950"))
nan_overflow = backend_from_functions("planted-mxfp8-nan-overflow", kernel(MXFP8, _nan_overflow, profile="ocp"))
