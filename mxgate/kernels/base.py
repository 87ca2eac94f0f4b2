"""The uniform shape every implementation under test takes: NumPy arrays in, NumPy arrays out."""

from __future__ import annotations

import dataclasses
import importlib.util
import threading
from dataclasses import dataclass
from typing import Any, Callable, Literal

DEVICES = ("cpu", "cuda")
Mode = Literal["interpret", "compiled"]  # how Triton code runs: under TRITON_INTERPRET=1 or compiled


def device_mode(device: object) -> Mode:
    """How a backend built for ``device`` runs Triton code: compiled on "cuda", interpreted on "cpu"."""
    if not isinstance(device, str) or device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}; got {device!r}")
    return "compiled" if device == "cuda" else "interpret"


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; ``reason`` says why not (package absent, no GPU, ...)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


AVAILABLE = Availability(True, "")


def requires(*modules: str) -> Availability:
    """AVAILABLE when every module can be imported, else an Availability naming the first absent one."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return Availability(False, f"python package {module!r} is not installed")
    return AVAILABLE


class OutsideContract(ValueError):
    """Raised by an op for inputs its kernel defines no behaviour for (for example slots outside
    the buffer where the kernel has no bounds check). The gate accepts a refusal only where the
    op declares it: its ``Op.outside_contract`` predicate must say why these inputs lie outside
    the kernel's contract, and that config is then 'not supported here' with the predicate's
    reason. A refusal of inputs the predicate does not exclude (or of an op that declares no
    predicate) is a 'fail'; so is any other exception from an op."""


ContractPredicate = Callable[..., "str | None"]


@dataclass(frozen=True)
class Op:
    """One operation a backend implements, with the profile its output is judged under.

    ``run`` takes and returns NumPy arrays. An element encoder may also give ``run_tensor``: the
    same op on a torch tensor already on the backend's device, returning the codes there (uint8,
    same shape), so that the device sweeps (``mxgate sweep --device``, the exhaustive tier on
    cuda) judge it without its inputs and outputs crossing to the host.

    ``outside_contract`` declares the inputs outside the kernel's contract: called with the
    op's arguments (the op table's inputs, ``mxgate backends --ops``), it returns the reason
    when they lie outside, else None. The gate asks it before each call; the op is not run on
    inputs it excludes, and an ``OutsideContract`` raised on any other input is a fail.
    """

    name: str
    profile: str
    run: Callable[..., Any]
    note: str = ""
    run_tensor: Callable[[Any], Any] | None = None
    outside_contract: ContractPredicate | None = None


class Backend:
    """Base class of every adapter.

    Subclasses set ``name`` and ``description``, implement ``available()`` and ``ops()``.
    Each op's callable takes and returns NumPy arrays; the adapter moves data to torch and to
    the device itself. Canonical op names and their signatures are declared in
    ``mxgate.op_table``.
    """

    name: str = ""
    description: str = ""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def available(self) -> Availability:
        return AVAILABLE

    def ops(self) -> dict[str, Op]:
        raise NotImplementedError

    def available_for(self, op: str) -> Availability:
        """Whether one op can run here (a backend may run some ops on the CPU and others only on a GPU)."""
        return self.available()

    def implements(self, op: str) -> bool:
        return op in self.ops()

    def device_sweep(self, op: str, profile: str, fmt: str, chunks: list[int], chunk_bits: int = 24, *,
                     sweep: Callable[..., Any]) -> Any:
        """The element encoder ``op`` over the given 2^chunk_bits-input chunks of all 2^32 float32
        patterns, judged on this backend's device under ``profile`` by ``sweep(op, device,
        profile, fmt, chunks, chunk_bits)``: the gate passes the torch twin's
        (``mxgate.twin.sweep.sweep_op``, giving a ``DeviceSweep``), which calls the op's
        ``run_tensor`` on the device tensors where it has one, else its NumPy ``run``."""
        return sweep(self.op(op), self.device, profile, fmt, chunks, chunk_bits)

    def op(self, op: str) -> Op:
        table = self.ops()
        if op not in table:
            raise ValueError(f"op must be one of {', '.join(sorted(map(str, table)))} for backend {self.name!r}; "
                             f"got {str(op)!r}")
        return table[op]

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


# --- contracts stated by an adapter's own argument checks --------------------------------------

_CHECKING = threading.local()


class _ChecksPassed(Exception):
    """Raised where an op reaches its kernel while only its own argument checks are being run."""


def kernel_entry() -> None:
    """Adapters call this where an op leaves its own argument checks and reaches the kernel (the
    loader of the other project's code). While ``own_checks`` runs the op, it stops the op here."""
    if getattr(_CHECKING, "active", False):
        raise _ChecksPassed


def own_checks(run: Callable[..., Any]) -> ContractPredicate:
    """The contract predicate of an adapter op whose argument checks raise OutsideContract
    before it reaches its kernel (``kernel_entry``): the checks run, the kernel never does. An
    OutsideContract raised later, by the other project's code, is not a declared refusal."""

    def outside(*args: Any, **kwargs: Any) -> str | None:
        _CHECKING.active = True
        try:
            run(*args, **kwargs)
        except OutsideContract as error:
            return str(error)
        except _ChecksPassed:
            return None
        except Exception:  # noqa: BLE001 - a malformed call: the real call raises it, and is judged
            return None
        finally:
            _CHECKING.active = False
        return None

    return outside


def with_own_checks(table: dict[str, Op]) -> dict[str, Op]:
    """Every op of ``table`` with its own argument checks as its declared contract."""
    return {name: dataclasses.replace(op, outside_contract=own_checks(op.run)) for name, op in table.items()}
