"""Backends whose ops fail in every way a kernel can: raise, crash the process, hang.

Used by tests/test_gate.py through ``--backend faulty_backends:NAME`` with this folder on
PYTHONPATH, the way a kernel repository brings its own backend.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from mxgate.kernels import Backend, Op


def _oracle_decode(codes: np.ndarray) -> np.ndarray:
    from mxgate import oracle

    return oracle.decode_e8m0(codes, "gfx950")


class Raising(Backend):
    description = "e2m1.encode raises ValueError, e4m3fn.encode raises RuntimeError"

    def ops(self) -> dict[str, Op]:
        def value_error(x: np.ndarray) -> np.ndarray:
            raise ValueError("planted ValueError from the kernel")

        def runtime_error(x: np.ndarray) -> np.ndarray:
            raise RuntimeError("planted RuntimeError from the kernel")

        return {"e2m1.encode": Op("e2m1.encode", "gfx950", value_error),
                "e4m3fn.encode": Op("e4m3fn.encode", "gfx950", runtime_error),
                "e8m0.decode": Op("e8m0.decode", "gfx950", _oracle_decode)}


class Segfault(Backend):
    description = "e2m1.encode kills its process with SIGSEGV"

    def ops(self) -> dict[str, Op]:
        def crash(x: np.ndarray) -> np.ndarray:
            os.kill(os.getpid(), signal.SIGSEGV)
            raise AssertionError("unreachable")

        return {"e2m1.encode": Op("e2m1.encode", "gfx950", crash),
                "e8m0.decode": Op("e8m0.decode", "gfx950", _oracle_decode)}


class Hanging(Backend):
    description = "e2m1.encode never returns"

    def ops(self) -> dict[str, Op]:
        def hang(x: np.ndarray) -> np.ndarray:
            while True:
                time.sleep(60)

        return {"e2m1.encode": Op("e2m1.encode", "gfx950", hang),
                "e8m0.decode": Op("e8m0.decode", "gfx950", _oracle_decode)}
