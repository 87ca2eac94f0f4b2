"""Encoders with one planted wrong code each, for the device sweep's tests."""

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel


def _e2m1_wrong_at_zero(x: np.ndarray) -> np.ndarray:
    codes = oracle.encode_e2m1(x, "gfx950")
    codes[x.view(np.uint32) == 0] = 1  # +0 encoded as 0.5
    return codes


def _e2m1_right(x: np.ndarray) -> np.ndarray:
    return oracle.encode_e2m1(x, "gfx950")


wrong_at_zero = backend_from_functions("wrong-at-zero", kernel("e2m1.encode", _e2m1_wrong_at_zero, profile="gfx950"))
right = backend_from_functions("right", kernel("e2m1.encode", _e2m1_right, profile="gfx950"))
