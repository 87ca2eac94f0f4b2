"""Kernels that try to pass the gate without being right: each takes one of the quieter routes
(a fault while loading, writing into its inputs, refusing the hard inputs, being wrong on some
calls, telling the gate apart, forging the worker's replies, forking). Used by
tests/test_honest_gate.py through ``--backend dishonest_backends:NAME`` with this folder on
PYTHONPATH.

Each kernel's wrong answers are planted deliberately; the oracle gives the right ones.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import sys
import time

import numpy as np

from mxgate import oracle
from mxgate.kernels import Availability, Backend, Op, OutsideContract
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.oracle import profiles

# A profile derived as docs/your-kernel.md section 4 shows: it has no golden vector cases, so
# only the live tests judge kernels declaring it.
DERIVED = profiles.register(dataclasses.replace(profiles.get("gfx950"), name="planted-derived",
                                                shipped_by="a planted kernel of the honest-gate tests"))


def _encode(x: np.ndarray) -> np.ndarray:
    return oracle.encode_e2m1(x, "gfx950")


def _quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return oracle.quantize_mx(x, "gfx950")


def _marker_file(name: str) -> str | None:
    """A file the test names (MXGATE_TEST_MARKERS folder) where a kernel leaves its pid."""
    folder = os.environ.get("DISHONEST_MARKERS")
    return os.path.join(folder, name) if folder else None


# --- faults while loading ---------------------------------------------------------------------

class ExitsInAvailable(Backend):
    description = "available() calls sys.exit(0)"

    def available(self) -> Availability:
        sys.exit(0)

    def ops(self) -> dict[str, Op]:
        return {"e2m1.encode": Op("e2m1.encode", "gfx950", _encode)}


class SegfaultsInOps(Backend):
    description = "ops() kills its process with SIGSEGV"

    def ops(self) -> dict[str, Op]:
        os.kill(os.getpid(), signal.SIGSEGV)
        return {}


class HangsInOps(Backend):
    description = "ops() never returns"

    def ops(self) -> dict[str, Op]:
        while True:
            time.sleep(60)


# --- writing into the inputs ------------------------------------------------------------------

def _zeros_and_nan_input(x: np.ndarray) -> np.ndarray:
    codes = np.zeros(x.shape, np.uint8)
    x[...] = np.nan  # the judge reading x after the call would see NaN inputs everywhere
    return codes


def _quantize_zeroed_input(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x[...] = 0  # the judge reading x after the call would see all-zero blocks, quantized right
    return _quantize(x)


def _encode_zeroed_input(x: np.ndarray) -> np.ndarray:
    x[...] = 0
    return _encode(x)


nan_into_input = backend_from_functions("nan-into-input", kernel("e2m1.encode", _zeros_and_nan_input,
                                                                 profile="planted-derived"))
zeroes_input = backend_from_functions("zeroes-input",
                                      kernel("e2m1.encode", _encode_zeroed_input, profile="planted-derived"),
                                      kernel("mx.quantize", _quantize_zeroed_input, profile="planted-derived"))


# --- refusing the hard inputs -------------------------------------------------------------------

def _hard(x: np.ndarray) -> bool:
    return bool(np.isnan(x).any() or (np.abs(x) > 6).any())


def _encode_refusing(x: np.ndarray) -> np.ndarray:
    if _hard(x):
        raise OutsideContract("NaN or |x| > 6")
    return _encode(x)


def _quantize_refusing(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if _hard(x):
        raise OutsideContract("NaN or |x| > 6")
    return _quantize(x)


refuses_hard = backend_from_functions("refuses-hard", kernel("e2m1.encode", _encode_refusing, profile="gfx950"),
                                      kernel("mx.quantize", _quantize_refusing, profile="gfx950"))


def _outside(x: np.ndarray) -> str | None:
    return "this kernel's contract is finite |x| <= 6" if _hard(x) else None


declares_hard = backend_from_functions(
    "declares-hard",
    kernel("e2m1.encode", _encode_refusing, profile="gfx950", outside_contract=_outside),
    kernel("mx.quantize", _quantize_refusing, profile="gfx950", outside_contract=_outside))


# --- wrong on some calls -------------------------------------------------------------------------

def _flaky(function, rate: float, source):
    def run(x: np.ndarray):
        result = function(x)
        if source.random() < rate:  # this call goes wrong: one element's bytes are off
            result = tuple(np.array(r, copy=True) for r in result) if isinstance(result, tuple) else result.copy()
            first = result[0] if isinstance(result, tuple) else result
            if first.size:
                first.reshape(-1)[0] ^= 1
        return result

    return run


class _SystemRandom:
    def __init__(self) -> None:
        self._random = random.SystemRandom()

    def random(self) -> float:
        return self._random.random()


# A seeded stream (FLAKY_SEED, default 0): every run of the same seed goes wrong on the same calls.
_SEEDED = random.Random(int(os.environ.get("FLAKY_SEED", "0")))
flaky_seeded = backend_from_functions(
    "flaky-seeded", kernel("e2m1.encode", _flaky(_encode, 0.05, _SEEDED), profile="gfx950"),
    kernel("mx.quantize", _flaky(_quantize, 0.05, _SEEDED), profile="gfx950"))
# Truly random (for measuring the catch rate over many runs).
flaky_e2m1 = backend_from_functions("flaky-e2m1", kernel("e2m1.encode", _flaky(_encode, 0.05, _SystemRandom()),
                                                         profile="gfx950"))
flaky_mx = backend_from_functions("flaky-mx", kernel("mx.quantize", _flaky(_quantize, 0.05, _SystemRandom()),
                                                     profile="gfx950"))


# --- telling the gate apart -----------------------------------------------------------------------

_GATE_MARKERS = ("MXGATE_ISOLATED_WORKER", "MXGATE_TIMEOUT", "MXGATE_HYPOTHESIS_PROFILE", "PYTEST_CURRENT_TEST",
                 "PYTEST_VERSION", "PYTEST_XDIST_WORKER")


def _right_only_under_test(x: np.ndarray) -> np.ndarray:
    codes = _encode(x)
    if any(name in os.environ for name in _GATE_MARKERS):
        return codes
    return codes ^ 1  # what it does in production


detects_gate = backend_from_functions("detects-gate", kernel("e2m1.encode", _right_only_under_test,
                                                             profile="gfx950"))


# --- forging the worker's replies, forking --------------------------------------------------------

def _forge(x: np.ndarray) -> np.ndarray:
    """Find the worker's connection, the call id and anything like a secret in the frames of the
    call stack, send an 'ok' reply with all-zero codes (the right format, tagged with whatever was
    found), and exit before the worker can send the real one."""
    import hashlib
    import hmac

    conn, call_id, secret = None, None, b""
    frame = sys._getframe(1)
    while frame is not None:
        for name, value in frame.f_locals.items():
            if hasattr(value, "send") and hasattr(value, "recv") and hasattr(value, "poll"):
                conn = value
            if name in ("call_id", "request") and call_id is None:
                call_id = value if isinstance(value, int) else value[0]
            if isinstance(value, bytes) and len(value) >= 16:
                secret = value
        frame = frame.f_back
    if conn is None:
        from mxgate.kernels import isolation

        conn = isolation._Session.conn  # the module's state is reachable; the secret is not in a frame
    fake = (np.zeros(x.shape, np.uint8), {})
    tag = hmac.new(secret, f"{call_id}:ok".encode(), hashlib.sha256).digest()
    conn.send((tag, call_id, "ok", fake))
    conn.send(("ok", fake))  # the reply format of earlier versions, too
    os._exit(0)


forges_reply = backend_from_functions("forges-reply", kernel("e2m1.encode", _forge, profile="gfx950"))


def _forks_into_the_loop(x: np.ndarray) -> np.ndarray:
    """The child returns a wrong answer into the worker loop, the parent the right one."""
    pid = os.fork()
    if pid == 0:
        return _encode(x) ^ 1
    os.waitpid(pid, 0)
    return _encode(x)


def _forks_a_sleeper(x: np.ndarray) -> np.ndarray:
    """Leaves a child behind that sleeps for an hour; its pid goes to the markers folder."""
    pid = os.fork()
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    where = _marker_file(f"sleeper-{pid}")
    if where:
        with open(where, "w", encoding="utf-8") as handle:
            handle.write(str(pid))
    return _encode(x)


forks_into_loop = backend_from_functions("forks-into-loop", kernel("e2m1.encode", _forks_into_the_loop,
                                                                   profile="gfx950"))
forks_sleeper = backend_from_functions("forks-sleeper", kernel("e2m1.encode", _forks_a_sleeper, profile="gfx950"))


# --- hanging, for the interruption and report-lock tests ------------------------------------------

def _hang_after_marking(x: np.ndarray) -> np.ndarray:
    where = _marker_file("hung-worker")
    if where:
        with open(where, "w", encoding="utf-8") as handle:
            handle.write(str(os.getpid()))
    while True:
        time.sleep(60)


hangs_marked = backend_from_functions("hangs-marked", kernel("e2m1.encode", _hang_after_marking, profile="gfx950"),
                                      kernel("e8m0.decode", lambda codes: oracle.decode_e8m0(codes, "gfx950"),
                                             profile="gfx950"))


# --- not a backend -------------------------------------------------------------------------------

not_a_backend = os.getcwd  # a callable that returns a str
