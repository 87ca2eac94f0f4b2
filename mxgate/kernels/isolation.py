"""Load and run a backend in a worker process, so that nothing a kernel does can end the gate's
run or forge its verdict.

``load(name, device)`` starts a worker (never a ``fork`` of the gate's process: torch and triton
threads do not survive a fork; forked from a clean, spawned fork server that preloaded NumPy, and
torch or torchao where several backends import them, before any op ran, else spawned) in a
process group of its own. The worker imports and builds the backend and asks it
``available()`` and ``ops()``; the parent keeps only that description
(``Description``). Building runs under a start-up budget of its own (``startup_timeout``), apart
from the per-call limit, so a slow import on a busy machine is never taken for a hung op. A name
that is no backend (``NotABackend``: unknown module, missing attribute, not a Backend) is a
usage error; anything else that stops a clean load (a raise, ``SystemExit``, ``os._exit``, a
signal, a hang) is ``BackendLoadFailed``, a fail of that backend.

``isolate(...)`` returns an ``IsolatedBackend``: the description's metadata, with each
``Op.run`` sent to the worker. What a call can end with, in the parent:

- the op's result, converted to NumPy (torch tensors come back as arrays). Only inputs the op
  table declares as the op's output buffers (``OpSpec.inplace``) are written back into the
  caller's arrays; the caller's other arrays are never touched, so the expected values are
  computed from pristine inputs, and an op that wrote into any other input is
  :class:`BackendWroteInput` (``wrote into its input x``);
- :class:`OutsideContract`, when the op's declared ``outside_contract`` predicate excludes the
  inputs (the op is then not run); :class:`BackendRefused` when the op raised OutsideContract
  on inputs its predicate does not exclude;
- :class:`BackendNondeterministic`, when a repeat call on fresh copies of the same inputs gave
  different bytes (the repeats of a call are run in the worker, ``repeats`` per call);
- :class:`BackendRaised`, when the op raised anything else (the type and message are kept);
- :class:`BackendCrashed`, when the worker died, hung past the per-call timeout, or its pipe
  carried a reply the gate did not ask for (forged by the kernel, or sent by a child it
  forked). The worker's process group is killed and a fresh worker serves the next call.

Every reply carries the call's id and a tag made with a per-run secret that the parent sends
to the worker before the backend is imported, and that no frame of the call stack holds. The
worker's environment says nothing of the gate. Arguments and results travel pickled over a
pipe: NumPy arrays, Python scalars, None, and tuples, lists and dicts of these.
"""

from __future__ import annotations

import hashlib
import hmac
import multiprocessing
import os
import secrets
import signal
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from mxgate.kernels.base import Availability, Backend, Op, OutsideContract

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_STARTUP_S = 600.0  # importing torch, triton and a source tree on a busy 2-core runner
DEVICE_SWEEP = "<device sweep>"  # a request that runs Backend.device_sweep in the worker
SWEEP_CALL_INPUTS = 1 << 28  # inputs per device-sweep call: each call gets the per-call limit
_CONTEXT = multiprocessing.get_context("spawn")
# Workers start from a fork server when the platform has one: a clean process, itself spawned
# (never a fork of the gate's process, which has torch's and triton's threads), that imported
# NumPy, torch and this module once and forks each worker from that state, before any op ran
# there. Each worker then pays only for its own backend's import, not for Python, NumPy and torch
# again (seventeen workers on two cores: most of the start-up). The server starts under the
# workers' environment; a worker whose environment differs from the server's is spawned.
# torch and torchao (about a second of CPU each) are preloaded only where at least two of the
# backends this process starts import them (``kernels.heavy_imports``): the ones started together
# with the server's first worker, and those announced by ``expect_starts`` (a pytest-xdist worker
# of a gate of several backends starts them one by one). A lone worker imports what it needs.
_PRELOAD = ("mxgate.kernels.isolation", "numpy")
_SHARED_PRELOADS = {"torch": "torch", "torchao": "mxgate.kernels.torchao_preload"}  # package -> module imported
_SERVER: dict[str, Any] = {}  # "environment": the one the fork server was started under; "broken": True
_EXPECTED: list[str] = []  # backends this process will start, one by one (expect_starts)
_LOADING = "loading the backend"
# Set by the gate's SIGINT/SIGTERM handler (request_stop): the signal's name. The handler also
# raises KeyboardInterrupt, but a raise that lands in a finalizer or a callee's broad except is
# lost; then the next wait on a worker ends the run instead of waiting out its kernel.
_STOP: dict[str, str] = {}
_POLL_SLICE_S = 0.25  # how soon a wait on a worker sees a stop request


def request_stop(signal_name: str) -> None:
    """The run was told to stop: every wait on a worker raises KeyboardInterrupt within a
    quarter second, and no call or start begins (``clear_stop`` undoes it for a new run)."""
    _STOP["signal"] = signal_name


def clear_stop() -> None:
    _STOP.clear()


def _stop_if_requested() -> None:
    if _STOP:
        raise KeyboardInterrupt(_STOP["signal"])


def _poll(conn: Any, limit: float) -> bool:
    """conn.poll(limit), in slices that check for a stop request."""
    deadline = time.monotonic() + limit
    while True:
        _stop_if_requested()
        left = deadline - time.monotonic()
        if conn.poll(max(0.0, min(left, _POLL_SLICE_S))):
            return True
        if left <= _POLL_SLICE_S:
            return False


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


class BackendLoadFailed(BackendFault):
    """Importing or building the backend, or asking its ``available()``/``ops()``, did not end
    cleanly: ``cause`` is ``failed to load: ...``. A fail of every op of that backend."""


class BackendWroteInput(BackendFault):
    """The op wrote into an input that is not one of its declared output buffers."""


class BackendRefused(BackendFault):
    """The op raised OutsideContract on inputs its declared contract does not exclude."""


class BackendNondeterministic(BackendFault):
    """A repeat call on fresh copies of the same inputs gave different bytes."""


def signal_name(number: int) -> str:
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class OpInfo:
    """What the parent knows of one op: its declared profile and note, whether it can run here,
    and whether it has a device-tensor form or a contract predicate (both stay in the worker)."""

    name: str
    profile: str
    note: str
    available: Availability
    has_run_tensor: bool
    has_contract: bool


@dataclass(frozen=True)
class Description:
    """A backend as its worker described it after a clean load."""

    name: str
    description: str
    device: str
    available: Availability
    ops: dict[str, OpInfo] = field(default_factory=dict)
    profiles: tuple[Any, ...] = ()  # the Profile objects the ops declare (a user's registered ones too)

    def register_profiles(self) -> None:
        """Make the declared profiles known in this process (a user's backend module registers
        its own profile when it is imported, which happens only in the worker)."""
        from mxgate.oracle import profiles

        for profile in self.profiles:
            profiles.register(profile)


# --- the worker side ---------------------------------------------------------------------------

class _Session:
    """The worker's end of the pipe. The secret lives here, not in any frame of the call stack."""

    secret = b""
    pid = 0
    conn: Any = None

    @classmethod
    def reply(cls, call_id: int, kind: str, payload: Any) -> None:
        cls.conn.send((_tag(cls.secret, call_id, kind), call_id, kind, payload))


def _tag(secret: bytes, call_id: int, kind: str) -> bytes:
    return hmac.new(secret, f"{call_id}:{kind}".encode(), hashlib.sha256).digest()


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


def _arrays(args: tuple, kwargs: dict) -> dict[int | str, Any]:
    """The array arguments of a call: positional ones by index, keywords by name."""
    import numpy as np

    found: dict[int | str, Any] = {i: a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    found.update({k: a for k, a in kwargs.items() if isinstance(a, np.ndarray)})
    return found


def _fresh(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A copy of the call's arguments in which every array is a new copy."""
    import numpy as np

    def copy(a: Any) -> Any:
        return a.copy() if isinstance(a, np.ndarray) else a

    return tuple(copy(a) for a in args), {k: copy(v) for k, v in kwargs.items()}


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    """The result's parts as (where, value) pairs, in a fixed order."""
    if isinstance(value, (tuple, list)):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [leaf for k in sorted(value, key=str) for leaf in _leaves(value[k], f"{path}[{k!r}]")]
    return [(path, value)]


def first_difference(a: Any, b: Any, name: str = "result") -> str | None:
    """Where two results of the same call differ, byte for byte (NaN payloads and the sign of
    zero included), said in one phrase; None when they are identical."""
    import numpy as np

    left, right = _leaves(a, name), _leaves(b, name)
    if [w for w, _ in left] != [w for w, _ in right]:
        return f"a result of another structure ({len(right)} parts, not {len(left)})"
    for (where, x), (_, y) in zip(left, right):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
                return f"{where}: an array one time, {type(x if not isinstance(x, np.ndarray) else y).__name__} the other"
            if x.dtype != y.dtype or x.shape != y.shape:
                return f"{where}: {x.dtype}{list(x.shape)} one time, {y.dtype}{list(y.shape)} the other"
            if x.size == 0:
                continue
            bx = np.ascontiguousarray(x).view(np.uint8).reshape(x.size, -1)
            by = np.ascontiguousarray(y).view(np.uint8).reshape(y.size, -1)
            differ = np.flatnonzero((bx != by).any(axis=1))
            if differ.size:
                at = tuple(int(i) for i in np.unravel_index(int(differ[0]), x.shape))
                first = bytes(bx[differ[0]]).hex()
                other = bytes(by[differ[0]]).hex()
                return f"{where} at {at}: bytes 0x{first} then 0x{other} ({differ.size} of {x.size} elements differ)"
        elif type(x) is not type(y) or repr(x) != repr(y):
            return f"{where}: {x!r} then {y!r}"
    return None


def _describe(backend: Backend) -> Description:
    from mxgate.oracle import profiles

    status = backend.available()
    ops: dict[str, OpInfo] = {}
    declared: dict[str, Any] = {}
    if status:
        for name, op in backend.ops().items():
            _check_contract(name, op)
            ops[str(name)] = OpInfo(str(name), op.profile, op.note, _availability(backend.available_for(name)),
                                    op.run_tensor is not None, op.outside_contract is not None)
            if op.profile in profiles.names():
                declared[op.profile] = profiles.get(op.profile)
    return Description(backend.name, backend.description, backend.device, _availability(status), ops,
                       tuple(declared.values()))


def _availability(status: Any) -> Availability:
    return Availability(bool(status), str(getattr(status, "reason", "")))


def _check_contract(name: str, op: Op) -> None:
    """An op's contract predicate must take the op's declared inputs (mxgate backends --ops)."""
    import inspect

    from mxgate import op_table

    if op.outside_contract is None:
        return
    if not callable(op.outside_contract):
        raise TypeError(f"op {name}: outside_contract must be callable, got {type(op.outside_contract).__name__}")
    try:
        spec = op_table.spec(name)
        signature = inspect.signature(op.outside_contract)
    except (ValueError, TypeError):
        return  # an op outside the table, or a builtin without a signature: checked by the call
    if spec.positional:
        try:
            signature.bind(*spec.positional)
        except TypeError as error:
            raise TypeError(f"op {name}: outside_contract{signature} cannot take the op's inputs "
                            f"({', '.join(spec.positional)}): {error}") from None


def _serve(conn: Any, name: str, device: str, environment: dict[str, str] | None = None) -> None:
    """Worker loop: receive the secret, build the backend, describe it, then answer
    (call id, op, args, kwargs, repeats) requests until told to stop."""
    if environment is not None and dict(os.environ) != environment:  # what the fork server's imports set
        os.environ.clear()
        os.environ.update(environment)
    from mxgate import kernels

    try:
        os.setsid()  # a process group of its own: the parent ends it, and every child, at the end
    except OSError:
        pass
    _Session.conn, _Session.pid = conn, os.getpid()
    hello = conn.recv()
    _Session.secret = hello[1]
    del hello
    try:
        backend = kernels.get(name, device)
        described = _describe(backend)
    except kernels.NotABackend as error:
        _Session.reply(0, "usage", str(error))
        return
    except BaseException as error:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: a load fault
        _Session.reply(0, "raised", (type(error).__name__, str(error), traceback.format_exc()))
        return
    _Session.reply(0, "ready", described)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        call_id, op, args, kwargs, repeats = request
        kind, payload = _answer(backend, op, args, kwargs, repeats)
        if os.getpid() != _Session.pid:  # a child the kernel forked returned into this loop: it must not speak
            os._exit(0)
        try:
            _Session.reply(call_id, kind, payload)
        except Exception as error:  # noqa: BLE001 - e.g. a result that cannot be pickled
            _Session.reply(call_id, "raised", (type(error).__name__, f"the op's result could not be sent back: {error}", ""))


def _as_compared(op: str, result: Any) -> Any:
    """A result as two calls are compared: byte for byte, except that a top-k op returns a set
    per row (its order is free), so its rows are compared sorted."""
    import numpy as np

    from mxgate import op_table

    try:
        is_set = op_table.spec(op).compare == op_table.Compare.TOPK_SET
    except ValueError:
        return result
    return np.sort(result, axis=-1) if is_set and isinstance(result, np.ndarray) and result.ndim else result


UNSTABLE_BITS = 0x7FC5A5A5  # the NaN that stands for an output element that differed between calls


def _judged_by_value(op: str) -> bool:
    """Scorer outputs are defined in a window only (elsewhere a kernel may leave torch.empty's
    bytes): a cell that differs between calls goes to the judge as NaN, which fails it inside
    the window and is ignored outside, instead of failing the whole call."""
    from mxgate import op_table

    try:
        return op_table.spec(op).compare == op_table.Compare.WITHIN_BOUND
    except ValueError:
        return False


def _mark_unstable(first: Any, again: Any) -> tuple[Any, int] | None:
    """``first`` with the float32 elements that differ from ``again`` (by bytes) set to the
    UNSTABLE NaN, and how many; None when the results are not float32 arrays of one shape."""
    import numpy as np

    if not (isinstance(first, np.ndarray) and isinstance(again, np.ndarray) and first.dtype == again.dtype == np.float32
            and first.shape == again.shape):
        return None
    differ = first.view(np.uint32) != again.view(np.uint32)
    marked = first.copy()
    marked.view(np.uint32)[differ] = UNSTABLE_BITS
    return marked, int(np.count_nonzero(marked.view(np.uint32) == UNSTABLE_BITS))


def _run(declared: Op, args: tuple, kwargs: dict) -> Any:
    result = declared.run(*args, **kwargs)
    if os.getpid() != _Session.pid:  # a child the kernel forked returned here: it must not go on
        os._exit(0)
    return _to_numpy(result)


def _answer(backend: Backend, op: str, args: tuple, kwargs: dict, repeats: "Repeats") -> tuple[str, Any]:
    import numpy as np

    try:
        if op == DEVICE_SWEEP:  # the sweep runs here, beside the kernel: its tensors stay on the device
            return "ok", (backend.device_sweep(*args, **kwargs), {}, 0)
        declared = backend.op(op)
        pristine = _fresh(args, kwargs)
        if declared.outside_contract is not None:
            check_args, check_kwargs = _fresh(*pristine)  # the predicate may not touch the pristine copy
            reason = declared.outside_contract(*check_args, **check_kwargs)
            if reason:
                return "outside", str(reason)
        call_args, call_kwargs = _fresh(*pristine)
        try:
            result = _run(declared, call_args, call_kwargs)
        except OutsideContract as error:
            return "refused", str(error)
        before, after = _arrays(*pristine), _arrays(call_args, call_kwargs)
        written = {k: a for k, a in after.items()
                   if not np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(before[k]).view(np.uint8))}
        started, unstable, judged_by_value = time.monotonic(), 0, _judged_by_value(op)
        for attempt in range(2, repeats.most + 2):
            if attempt - 1 > repeats.least and time.monotonic() - started >= repeats.seconds:
                break
            again_args, again_kwargs = _fresh(*pristine)
            try:
                again = _run(declared, again_args, again_kwargs)
            except OutsideContract as error:
                return "nondeterministic", f"call {attempt} on the same inputs refused them (OutsideContract: {error}) " \
                                           "where call 1 ran"
            rewritten = _arrays(again_args, again_kwargs)
            difference = first_difference(_as_compared(op, result), _as_compared(op, again))
            for key in sorted(written, key=str):
                difference = difference or first_difference(written[key], rewritten[key], f"buffer {key!r}")
            if difference is None:
                difference = next((f"input {k!r} written by call {attempt}, not by call 1" for k in rewritten
                                   if k not in written and not np.array_equal(
                                       np.ascontiguousarray(rewritten[k]).view(np.uint8),
                                       np.ascontiguousarray(before[k]).view(np.uint8))), None)
            if difference is not None and judged_by_value and (marked := _mark_unstable(result, again)) is not None:
                result, count = marked  # the judge decides whether these cells are defined ones
                unstable = max(unstable, count)
                continue
            if difference is not None:
                return "nondeterministic", f"call {attempt} on fresh copies of the same inputs differs from call 1: " \
                                           f"{difference}"
        return "ok", (result, written, unstable)
    except OutsideContract as error:  # from the predicate itself
        return "raised", ("OutsideContract", f"the op's outside_contract predicate raised: {error}",
                          traceback.format_exc())
    except BaseException as error:  # noqa: BLE001 - every exception of the op is reported
        return "raised", (type(error).__name__, str(error), traceback.format_exc())


# --- the parent side ---------------------------------------------------------------------------

def _worker_environment() -> dict[str, str]:
    """The parent's environment less what tells a kernel it is being judged."""
    return {k: v for k, v in os.environ.items() if k not in _GATE_ONLY}


# Set by the gate for its own run only: a kernel must not be able to tell from them that it is tested.
_GATE_ONLY = frozenset({"MXGATE_ISOLATED_WORKER", "MXGATE_TIMEOUT", "MXGATE_STARTUP_TIMEOUT",
                        "MXGATE_HYPOTHESIS_PROFILE", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER",
                        "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_VERSION"})


def expect_starts(names: list[str]) -> None:
    """Announce the backends this process will start one by one (a pytest-xdist worker of a
    gate runs each at its first call): the fork server, whenever its first worker starts,
    preloads what several of them import. Speed only: no verdict depends on it."""
    _EXPECTED[:] = names


def shared_preloads(names: list[str]) -> list[str]:
    """The modules a fork server imports for the backends ``names``: each costly package
    (``kernels.heavy_imports``) that at least two of them import."""
    from mxgate import kernels

    def guess(name: str) -> tuple[str, ...]:
        try:
            return kernels.heavy_imports(name)
        except Exception:  # noqa: BLE001 - e.g. clashing entry points: the start itself says so
            return ()

    counts = Counter(package for name in set(names) for package in guess(name))
    return [module for package, module in _SHARED_PRELOADS.items() if counts[package] > 1]


def _fork_server(environment: dict[str, str], names: list[str]) -> Any:
    """The fork-server context when workers of this environment can start from it, else None
    (no fork server on this platform, one that failed, one started by someone else or under
    another environment). ``names``: the backends of the start that may start the server."""
    if _SERVER.get("broken") or "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    from multiprocessing import forkserver

    known = _SERVER.get("environment")
    if known is None:
        if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:
            return None  # a server another part of this process started, preloaded as it chose
        forkserver.set_forkserver_preload(list(_PRELOAD) + shared_preloads(list(names) + _EXPECTED))
        _SERVER["environment"] = dict(environment)
    elif _read_at_import(known) != _read_at_import(environment):
        return None
    return multiprocessing.get_context("forkserver")


# mxgate's and Hypothesis' variables are read when a backend loads or runs, after the fork (the
# worker sets its own environment first: _serve); so is TORCHINDUCTOR_CACHE_DIR, which inductor
# reads at each compile and torchao's import writes into the importing process's environment (a
# test session that imported torchao spawned every later worker: about 3 s of CPU each, not a
# fork). Any other may have shaped the server's imports (PYTHONPATH its sys.path, OMP_* and other
# TORCH_* torch): a worker differing there is spawned.
_READ_AFTER_FORK = ("MXGATE_", "HYPOTHESIS_", "TORCHINDUCTOR_CACHE_DIR")


def _read_at_import(environment: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environment.items() if not k.startswith(_READ_AFTER_FORK)}


class _Worker:
    def __init__(self, name: str, device: str, timeout: float, startup_timeout: float = DEFAULT_STARTUP_S) -> None:
        self.name, self.device, self.timeout, self.startup_timeout = name, device, timeout, startup_timeout
        self.process: Any = None
        self.conn: Any = None
        self.secret = b""
        self.call_id = 0
        self.unstable: list[tuple[str, int]] = []  # (op, elements that differed between repeat calls)
        self.hung: dict[str, str] = {}  # op -> the cause of its timeout: a hung op is not called again
        self.busy = False  # a call was sent and its reply not read: the worker reads no stop request

    # starting and loading

    def begin(self, together: list[str] | None = None) -> None:
        """Start the worker (one of the backends ``together`` started side by side); the
        backend builds while the parent does other work (``finish_start``)."""
        _stop_if_requested()
        parent, child = _CONTEXT.Pipe()
        saved, neutral = dict(os.environ), _worker_environment()
        os.environ.clear()
        os.environ.update(neutral)
        try:
            self.process = None
            server = _fork_server(neutral, together or [self.name])
            if server is not None:
                try:
                    self.process = server.Process(target=_serve, args=(child, self.name, self.device, neutral),
                                                  daemon=True, name="SpawnProcess")
                    self.process.start()
                except Exception:  # noqa: BLE001 - a server that cannot fork workers: spawn them
                    _SERVER["broken"] = True
                    self.process = None
            if self.process is None:
                self.process = _CONTEXT.Process(target=_serve, args=(child, self.name, self.device, neutral),
                                                daemon=True, name="SpawnProcess")
                self.process.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        child.close()
        self.conn = parent
        self.secret = secrets.token_bytes(32)
        try:
            self.conn.send(("hello", self.secret))
        except (BrokenPipeError, OSError):
            pass  # the death shows when the description is awaited

    def finish_start(self, op: str = "*") -> Description:
        """Wait (under the start-up budget) for the worker's description of the backend."""
        kind, payload = self._receive(op, _LOADING, 0, self.startup_timeout, loading=True)
        if kind == "ready":
            try:
                payload.register_profiles()
            except (TypeError, ValueError) as error:
                self.stop()
                raise BackendLoadFailed(self.name, op, f"failed to load: its declared profiles clash with "
                                                       f"mxgate's: {error}") from None
            return payload
        self.stop()
        if kind == "usage":
            from mxgate.kernels import NotABackend

            raise NotABackend(payload)
        type_name, message, remote = payload
        raise BackendLoadFailed(self.name, op, f"failed to load: raised {type_name}: {message}".rstrip(": "))

    def start(self, op: str = "*") -> Description:
        self.begin()
        return self.finish_start(op)

    # calls

    def _receive(self, op: str, what: str, call_id: int, limit: float, loading: bool = False) -> tuple[str, Any]:
        fault = BackendLoadFailed if loading else BackendCrashed
        prefix = "failed to load: " if loading else ""
        if not _poll(self.conn, limit):
            self.kill()
            raise fault(self.name, op, f"{prefix}timeout after {limit:g} s ({what})")
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            raise fault(self.name, op, prefix + self._death(what)) from None
        except Exception as error:  # noqa: BLE001 - bytes on the pipe that are no reply of the worker
            self.kill()
            raise fault(self.name, op, f"{prefix}the worker's pipe carried bytes that are no reply of the gate's "
                                       f"worker ({type(error).__name__}) while {what}") from None
        if not (isinstance(message, tuple) and len(message) == 4 and message[1] == call_id
                and isinstance(message[0], bytes) and isinstance(message[2], str)
                and hmac.compare_digest(message[0], _tag(self.secret, call_id, message[2]))):
            self.kill()
            raise fault(self.name, op, f"{prefix}the worker's pipe carried a reply the gate did not ask for while "
                                       f"{what} (forged by the kernel, or sent by a process it forked)")
        return message[2], message[3]

    def _death(self, what: str) -> str:
        self.process.join(5)
        code = self.process.exitcode
        self.kill()
        if code is not None and code < 0:
            return f"crashed: {signal_name(-code)} while {what}"
        return f"crashed: the worker exited with status {code} while {what}"

    def call(self, op: str, args: tuple, kwargs: dict, repeats: "Repeats | None" = None) -> Any:
        _stop_if_requested()
        if op in self.hung:  # each call would wait out the timeout again
            raise BackendCrashed(self.name, op, f"not run: an earlier call of {op} hit the {self.hung[op]}")
        if self.process is None or not self.process.is_alive():
            try:
                self.start(op)
            except BackendLoadFailed as fault:  # a restart after a crash that no longer loads
                raise BackendCrashed(self.name, op, fault.cause) from None
        self.call_id += 1
        self.busy = True  # until the reply is read; an interrupt leaves it set
        try:
            self.conn.send((self.call_id, op, args, kwargs, repeats or NO_REPEATS))
        except (BrokenPipeError, EOFError, OSError):
            raise BackendCrashed(self.name, op, self._death(f"running {op}")) from None
        try:
            kind, payload = self._receive(op, f"running {op}", self.call_id, self.timeout)
        except BackendCrashed as fault:
            if fault.cause.startswith("timeout"):
                self.hung[op] = fault.cause
            raise
        self.busy = False
        if kind == "ok":
            result, written, unstable = payload
            _write_back(self.name, op, args, kwargs, written)
            if unstable:
                self.unstable.append((op, unstable))
            return result
        if kind == "outside":
            raise OutsideContract(payload)
        if kind == "refused":
            raise BackendRefused(self.name, op, f"refused inputs its declared contract does not exclude "
                                                f"(OutsideContract: {payload})")
        if kind == "nondeterministic":
            raise BackendNondeterministic(self.name, op, f"nondeterministic: {payload}")
        raise BackendRaised(self.name, op, *payload)

    def kill(self) -> None:
        if self.process is not None and self.process.pid is not None:  # a start that raised has no pid
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # the worker and every child it left
            except (ProcessLookupError, PermissionError, OSError):
                pass
            self.process.kill()
            self.process.join(5)
        if self.conn is not None:
            self.conn.close()
        self.conn = self.process = None
        self.busy = False

    def stop(self) -> None:
        stop_all([self])

    def ask_to_stop(self) -> bool:
        """Tell a live, idle worker to end (it returns from its loop); whether it was told. A
        worker still in a call (the run was interrupted while it ran) would read the request
        only after its kernel returned: it is not told, and stop_all kills it at once."""
        if self.process is not None and not self.busy and self.process.is_alive():
            try:
                self.conn.send(None)
                return True
            except (BrokenPipeError, OSError):
                pass
        return False


def stop_all(workers: "list[_Worker]", grace: float = 5.0) -> None:
    """End several workers at once: each is told to stop, then all get ``grace`` seconds together
    to exit before their process groups are killed (one after another, each worker's own exit
    would be waited out in turn)."""
    told = [worker for worker in workers if worker.ask_to_stop()]
    deadline = time.monotonic() + grace
    for worker in told:
        try:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        except (OSError, AttributeError):
            pass
    for worker in workers:
        worker.kill()


def _write_back(backend: str, op: str, args: tuple, kwargs: dict, written: dict[int | str, Any]) -> None:
    """Copy the op's declared output buffers back into the caller's arrays; a write into any
    other input is a fault, and the caller's array keeps its pristine bytes."""
    import numpy as np

    from mxgate import op_table

    try:
        spec = op_table.spec(op)
    except ValueError:  # an op outside the table declares no output buffers
        spec = None
    names = {key: (spec.input_name(key) if spec else (f"argument {key}" if isinstance(key, int) else key))
             for key in written}
    foreign = [names[k] for k in written if spec is None or names[k] not in spec.inplace]
    if foreign:
        raise BackendWroteInput(backend, op, f"wrote into its input {', '.join(foreign)} (not an output buffer of "
                                             f"{op}; the gate judged the pristine input)")
    for key, value in written.items():
        np.copyto(args[key] if isinstance(key, int) else kwargs[key], value)


class IsolatedBackend(Backend):
    """A backend described by its worker, whose ops run there."""

    def __init__(self, described: Description, worker: _Worker, policy: Any = None) -> None:
        self._described, self._worker = described, worker
        self.name, self.description, self.device = described.name, described.description, described.device
        self.policy = policy or (lambda index: NO_REPEATS)  # call index of an op -> Repeats
        self.calls: dict[str, int] = {}

    @property
    def described(self) -> Description:
        return self._described

    def available(self, *args: Any) -> Availability:
        return self._described.available

    def available_for(self, op: str) -> Availability:
        info = self._described.ops.get(str(op))
        return info.available if info is not None else self._described.available

    def implements(self, op: str) -> bool:
        return str(op) in self._described.ops

    def ops(self) -> dict[str, Op]:
        return {name: Op(name, info.profile, self._remote(name), info.note) for name, info in self._described.ops.items()}

    def device_sweep(self, op: str, profile: str, fmt: str, chunks: list[int], chunk_bits: int = 24, *,
                     sweep: Callable[..., Any]) -> Any:
        """``Backend.device_sweep`` run in the worker, 2^28 inputs a call (each call under the
        per-call limit, so a hang or crash is a fault as for any op); the parts are merged here
        (``sweep``, a module-level function, travels pickled by name: the worker imports it)."""
        chunks = list(chunks)
        step = max(1, SWEEP_CALL_INPUTS >> chunk_bits)
        parts = [self._worker.call(DEVICE_SWEEP, (op, profile, fmt, chunks[first:first + step], chunk_bits),
                                   {"sweep": sweep})
                 for first in range(0, max(len(chunks), 1), step)]
        return parts[0].merged(*parts[1:])

    def _remote(self, op: str):
        def run(*args: Any, **kwargs: Any) -> Any:
            index = self.calls.get(op, 0)
            self.calls[op] = index + 1
            return self._worker.call(op, args, kwargs, self.policy(index))

        run.__name__ = op
        return run

    def take_notes(self, op: str) -> str:
        """What the repeat calls of ``op`` found since the last take, in one phrase (elements
        that differed between calls and went to the judge as NaN), or ''."""
        counts = [n for name, n in self._worker.unstable if name == op]
        self._worker.unstable = [(name, n) for name, n in self._worker.unstable if name != op]
        if not counts:
            return ""
        return (f"in {len(counts)} call(s), {min(counts)}..{max(counts)} output element(s) differed between calls of "
                f"the same inputs and were judged as NaN (0x{UNSTABLE_BITS:08X})")

    def close(self) -> None:
        self._worker.stop()


def close_all(backends: "list[Any]") -> None:
    """Close several isolated backends at once (their workers end side by side); anything else
    in the list is closed by its own ``close``."""
    isolated = [b for b in backends if isinstance(b, IsolatedBackend)]
    stop_all([b._worker for b in isolated])
    for other in backends:
        if not isinstance(other, IsolatedBackend) and hasattr(other, "close"):
            other.close()


@dataclass(frozen=True)
class Repeats:
    """How often one call is made again on fresh copies of the same inputs: ``least`` times
    always, then on up to ``most`` while those extra calls have taken under ``seconds`` (a
    slow kernel is not run sixty times; a fast one always is, however busy the machine)."""

    least: int = 0
    most: int = 0
    seconds: float = 0.0


NO_REPEATS = Repeats()
BURST = 63  # extra calls of an op's first call: 64 calls catch a kernel wrong on 1 call in 20 (p > 0.96)
BURST_SECONDS = 0.5  # a fast kernel makes all its burst calls in a few ms; a slow one stops early


def repeat_policy(tier: str, repeat: int | None = None):
    """The gate's policy: call index of an op -> Repeats. ``repeat`` (``--repeat N``) makes every
    call N more times, whatever the time. Otherwise an op's first call gets a burst (BURST, under
    BURST_SECONDS); in the default and exhaustive tiers every other call is made twice, in the
    quick tier once."""
    if repeat is not None:
        fixed = Repeats(repeat, repeat, float("inf"))
        return lambda index: fixed
    later = Repeats(0, 0, 0.0) if tier == "quick" else Repeats(1, 1, float("inf"))
    burst = Repeats(1, BURST, BURST_SECONDS)
    return lambda index: burst if index == 0 else later


def load(name: str, device: str = "cpu", *, timeout: float = DEFAULT_TIMEOUT_S,
         startup_timeout: float = DEFAULT_STARTUP_S, policy: Any = None) -> IsolatedBackend:
    """The backend ``name``, built and described in a worker process that then serves its ops.

    Raises NotABackend (a usage error) when the name is no backend, BackendLoadFailed when it
    did not load cleanly."""
    result = start_all([name], device, timeout=timeout, startup_timeout=startup_timeout, policy=policy)[name]
    if isinstance(result, Exception):
        raise result
    return result


_KEPT: dict[tuple[str, str, float, float], Any] = {}  # loads kept for a later start_all(keep=True) in this process


def start_all(names: list[str], device: str = "cpu", *, timeout: float = DEFAULT_TIMEOUT_S,
              startup_timeout: float = DEFAULT_STARTUP_S, policy: Any = None, keep: bool = False,
              take: bool = False) -> dict[str, IsolatedBackend | BackendFault | Exception]:
    """Load several backends at once (their workers start side by side): name -> the isolated
    backend, or the BackendLoadFailed / NotABackend that its load ended with. With ``keep``, the
    results are kept for a later call with ``take`` in this process, which uses them instead of
    loading again (``mxgate check`` loads before the pytest run it starts, which takes them)."""
    for value in (timeout, startup_timeout):
        if not value > 0:
            raise ValueError(f"timeouts must be positive numbers of seconds, got {value!r}")
    key = {name: (name, device, float(timeout), float(startup_timeout)) for name in names}
    loaded: dict[str, Any] = {name: _KEPT.pop(key[name]) for name in names if take and key[name] in _KEPT}
    workers = {name: _Worker(name, device, float(timeout), float(startup_timeout)) for name in names
               if name not in loaded}
    try:
        for worker in workers.values():
            worker.begin(list(workers))
        for name, worker in workers.items():
            try:
                loaded[name] = IsolatedBackend(worker.finish_start(), worker, policy)
            except (BackendFault, ValueError) as error:
                loaded[name] = error
    except BaseException:
        # an interrupt (or anything else) mid-start: the caller gets none of these workers, so
        # none may outlive this call
        stop_all(list(workers.values()))
        raise
    for name, result in loaded.items():
        if isinstance(result, IsolatedBackend) and policy is not None:
            result.policy = policy
        if keep:
            _KEPT[key[name]] = result
    return {name: loaded[name] for name in names}


def forget_kept() -> None:
    """Close the workers of loads kept by start_all(keep=True) that nobody took."""
    close_all([result for result in _KEPT.values() if isinstance(result, IsolatedBackend)])
    _KEPT.clear()


def isolate(backend: Backend | str, timeout: float = DEFAULT_TIMEOUT_S, *, device: str | None = None,
            startup_timeout: float = DEFAULT_STARTUP_S, policy: Any = None) -> IsolatedBackend:
    """The backend (a name, or a Backend from ``kernels.get(name, device)``, whose name and
    device are used) loaded in a worker process that runs its ops."""
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(backend, Backend):
        name, device = backend.name, backend.device
    else:
        name, device = backend, device or "cpu"
    return load(name, device, timeout=timeout, startup_timeout=startup_timeout, policy=policy)
