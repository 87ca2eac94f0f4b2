"""A kernel author's backends, kept outside the mxgate package: one correct, one broken.

Both encode with ml_dtypes' C++ casts (an implementation independent of mxgate's oracle),
declared under the ``ml_dtypes`` profile. ``BadBackend`` plants one real-looking bug: float32
values one ulp above the 1.25 midpoint round down to 1.0 instead of up to 1.5.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from mxgate.kernels import Backend, Op
from mxgate.kernels.functions import backend_from_functions, kernel

ABOVE_TIE = np.nextafter(np.float32(1.25), np.float32(2.0))


def encode_e2m1(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)


def encode_e4m3fn(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def encode_e2m1_rounding_down_above_tie(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    codes = encode_e2m1(x)
    planted = np.abs(x) == ABOVE_TIE
    return np.where(planted, (codes & 0x8) | 0x2, codes).astype(np.uint8)  # 0x2 is 1.0


class GoodBackend(Backend):
    description = "ml_dtypes casts, declared as profile ml_dtypes"

    def ops(self) -> dict[str, Op]:
        return {"e2m1.encode": Op("e2m1.encode", "ml_dtypes", encode_e2m1),
                "e4m3fn.encode": Op("e4m3fn.encode", "ml_dtypes", encode_e4m3fn)}


class BadBackend(Backend):
    description = "ml_dtypes casts with a planted rounding bug one ulp above 1.25"

    def ops(self) -> dict[str, Op]:
        return {"e2m1.encode": Op("e2m1.encode", "ml_dtypes", encode_e2m1_rounding_down_above_tie),
                "e4m3fn.encode": Op("e4m3fn.encode", "ml_dtypes", encode_e4m3fn)}


GoodFunctions = backend_from_functions("good-functions", kernel("e2m1.encode", encode_e2m1, profile="ml_dtypes"))
BadFunctions = backend_from_functions(
    "bad-functions", kernel("e2m1.encode", encode_e2m1_rounding_down_above_tie, profile="ml_dtypes"))


def make_good(device: str = "cpu") -> Backend:
    """A callable returning a backend: the third form ``--backend module:attr`` takes."""
    return GoodBackend(device=device)
