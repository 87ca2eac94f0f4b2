"""Run a backend's ops in a child process, so that a crash or a hang is a verdict, not a lost run.

``isolate(name, device, timeout)`` returns a stand-in for ``kernels.get(name, device)`` whose
metadata (ops, profiles, availability) comes from the backend itself, but whose ``Op.run``
sends the call to a worker process that holds its own copy of the backend. The worker is
started with the ``spawn`` method (never ``fork``: torch and triton threads do not survive a
fork), once per backend and process, and again after it dies.

What a call can end with, in the parent:

- the op's result, converted to NumPy (torch tensors come back as arrays); NumPy arguments the
  op wrote in place are written back into the caller's arrays, so in-place kernels behave as if
  they ran here;
- :class:`OutsideContract`, when the adapter declared the inputs outside its kernel's contract;
- :class:`BackendRaised`, when the op raised anything else (the type and message are kept);
- :class:`BackendCrashed`, when the worker died (``crashed: signal 11``) or hung past the
  per-call timeout (``timeout after 300 s``); the worker is killed and a fresh one serves the
  next call.

Arguments and results travel pickled over a pipe: NumPy arrays, Python scalars, None, and
tuples, lists and dicts of these.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from typing import Any

from mxgate.kernels.base import Availability, Backend, Op, OutsideContract

DEFAULT_TIMEOUT_S = 300.0
DEVICE_SWEEP = "<device sweep>"  # a request that runs Backend.device_sweep in the worker
SWEEP_CALL_INPUTS = 1 << 28  # inputs per device-sweep call: each call gets the per-call limit
_CONTEXT = multiprocessing.get_context("spawn")


class BackendFault(Exception):
    """An op of a backend under test did not return normally."""

    def __init__(self, backend: str, op: str, cause: str) -> None:
        super().__init__(cause)
        self.backend, self.op, self.cause = backend, op, cause


class BackendRaised(BackendFault):
    """The op raised: ``cause`` is ``raised TypeName: message``."""

    def __init__(self, backend: str, op: str, type_name: str, message: str, remote_traceback: str = "") -> None:
        super().__init__(backend, op, f"raised {type_name}: {message}")
        self.type_name, self.message, self.remote_traceback = type_name, message, remote_traceback

    def __str__(self) -> str:  # what tests that expect a rejection match the kernel's message against
        return f"{self.type_name}: {self.message}"


class BackendCrashed(BackendFault):
    """The worker process died or hung: ``cause`` is ``crashed: signal N`` or ``timeout after N s``."""


def signal_name(number: int) -> str:
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


# --- the worker side ---------------------------------------------------------------------------

def _to_numpy(value: Any) -> Any:
    """Results as NumPy: torch tensors (any device) are copied to host arrays."""
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a namedtuple: keep the names
        return {k: _to_numpy(v) for k, v in value._asdict().items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_to_numpy(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    return value


def _arrays(args: tuple, kwargs: dict) -> dict[str, Any]:
    import numpy as np

    found = {f"a{i}": a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    found.update({f"k{k}": a for k, a in kwargs.items() if isinstance(a, np.ndarray)})
    return found


def _serve(conn: Any, name: str, device: str) -> None:
    """Worker loop: build the backend, then answer (op, args, kwargs) requests until told to stop."""
    import os

    import numpy as np

    from mxgate import kernels

    os.environ.setdefault("MXGATE_ISOLATED_WORKER", "1")
    try:
        backend = kernels.get(name, device)
        conn.send(("ready", None))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("raised", (type(error).__name__, str(error), traceback.format_exc())))
        return
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        op, args, kwargs = request
        try:
            before = {k: a.copy() for k, a in _arrays(args, kwargs).items()}
            if op == DEVICE_SWEEP:  # the sweep runs here, beside the kernel: its tensors stay on the device
                result = backend.device_sweep(*args, **kwargs)
            else:
                result = _to_numpy(backend.op(op).run(*args, **kwargs))
            after = _arrays(args, kwargs)
            written = {k: a for k, a in after.items() if not np.array_equal(a.view(np.uint8), before[k].view(np.uint8))
                       } if before else {}
            reply: tuple[str, Any] = ("ok", (result, written))
        except OutsideContract as error:
            reply = ("outside", str(error))
        except BaseException as error:  # noqa: BLE001 - every exception of the op is reported
            reply = ("raised", (type(error).__name__, str(error), traceback.format_exc()))
        try:
            conn.send(reply)
        except Exception as error:  # noqa: BLE001 - e.g. a result that cannot be pickled
            conn.send(("raised", (type(error).__name__, f"the op's result could not be sent back: {error}", "")))


# --- the parent side ---------------------------------------------------------------------------

class _Worker:
    def __init__(self, name: str, device: str, timeout: float) -> None:
        self.name, self.device, self.timeout = name, device, timeout
        self.process: Any = None
        self.conn: Any = None
        self.hung: dict[str, str] = {}  # op -> the cause of its timeout: a hung op is not called again

    def _start(self, op: str) -> None:
        parent, child = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_serve, args=(child, self.name, self.device), daemon=True,
                                        name=f"mxgate-backend-{self.name}")
        self.process.start()
        child.close()
        self.conn = parent
        kind, payload = self._receive(op, "starting the backend")
        if kind == "raised":
            self.stop()
            raise BackendRaised(self.name, op, *payload)

    def _receive(self, op: str, what: str) -> tuple[str, Any]:
        if not self.conn.poll(self.timeout):
            self.kill()
            raise BackendCrashed(self.name, op, f"timeout after {self.timeout:g} s ({what})")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise BackendCrashed(self.name, op, self._death()) from None

    def _death(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        self.conn = self.process = None
        if code is not None and code < 0:
            return f"crashed: {signal_name(-code)}"
        return f"crashed: the worker exited with status {code}"

    def call(self, op: str, args: tuple, kwargs: dict) -> Any:
        if op in self.hung:  # each call would wait out the timeout again
            raise BackendCrashed(self.name, op, f"not run: an earlier call of {op} hit the {self.hung[op]}")
        if self.process is None or not self.process.is_alive():
            self._start(op)
        try:
            self.conn.send((op, args, kwargs))
        except (BrokenPipeError, EOFError, OSError):
            raise BackendCrashed(self.name, op, self._death()) from None
        try:
            kind, payload = self._receive(op, f"running {op}")
        except BackendCrashed as fault:
            if fault.cause.startswith("timeout"):
                self.hung[op] = fault.cause
            raise
        if kind == "ok":
            result, written = payload
            _write_back(args, kwargs, written)
            return result
        if kind == "outside":
            raise OutsideContract(payload)
        raise BackendRaised(self.name, op, *payload)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join(5)
        self.conn = self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            try:
                self.conn.send(None)
                self.process.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def _write_back(args: tuple, kwargs: dict, written: dict[str, Any]) -> None:
    import numpy as np

    for key, value in written.items():
        target = args[int(key[1:])] if key[0] == "a" else kwargs[key[1:]]
        np.copyto(target, value)


class IsolatedBackend(Backend):
    """A backend whose metadata is read here and whose ops run in a worker process."""

    def __init__(self, inner: Backend, worker: _Worker) -> None:
        self._inner, self._worker = inner, worker
        self.name, self.description, self.device = inner.name, inner.description, inner.device

    def available(self, *args: Any) -> Availability:
        return self._inner.available(*args)

    def available_for(self, op: str) -> Availability:
        return self._inner.available_for(op)

    def ops(self) -> dict[str, Op]:
        return {name: Op(op.name, op.profile, self._remote(name), op.note) for name, op in self._inner.ops().items()}

    def device_sweep(self, op: str, profile: str, fmt: str, chunks: list[int], chunk_bits: int = 24) -> Any:
        """``Backend.device_sweep`` run in the worker, 2^28 inputs a call (each call under the
        per-call limit, so a hang or crash is a fault as for any op); the counts are summed here."""
        from mxgate.twin.sweep import DeviceSweep

        chunks = list(chunks)
        step = max(1, SWEEP_CALL_INPUTS >> chunk_bits)
        total = DeviceSweep(profile, fmt)
        for first in range(0, len(chunks), step):
            part = self._worker.call(DEVICE_SWEEP, (op, profile, fmt, chunks[first:first + step], chunk_bits), {})
            total.profile = part.profile
            total.inputs += part.inputs
            total.mismatches += part.mismatches
            total.nan_mismatches += part.nan_mismatches
            total.examples += part.examples[:max(0, 10 - len(total.examples))]
            total.seconds += part.seconds
        return total

    def _remote(self, op: str):
        def run(*args: Any, **kwargs: Any) -> Any:
            return self._worker.call(op, args, kwargs)

        run.__name__ = op
        return run

    def close(self) -> None:
        self._worker.stop()


def isolate(backend: Backend, timeout: float = DEFAULT_TIMEOUT_S) -> IsolatedBackend:
    """``backend`` (from ``kernels.get(name, device)``) with its ops moved to a worker process."""
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return IsolatedBackend(backend, _Worker(backend.name, backend.device, float(timeout)))
