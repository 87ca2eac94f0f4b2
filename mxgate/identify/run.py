"""One backend end to end: load it in its worker, run each op's probes (every call made twice
on fresh copies, in the worker), decide the fields, shrink what nothing explains."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mxgate import kernels
from mxgate.identify import probes, search
from mxgate.identify.drivers import DRIVERS, Driver, SideProbe
from mxgate.identify.scorers import SCORERS, ScorerDriver, ScorerFinding, identify_scorer
from mxgate.identify.shrink import Shrunk, shrink
from mxgate.kernels import isolation
from mxgate.kernels.base import OutsideContract
from mxgate.kernels.isolation import BackendFault, BackendNondeterministic, Repeats

RANDOM_EXTRA = 256  # pool cases sent beside the separating ones (selective ops)
CHUNK_CASES = 256  # cases per call when a backend refuses some inputs of a whole probe set
TWICE = Repeats(1, 1, float("inf"))  # every call made again on fresh copies of its inputs

MATCH, DIFFERS, UNEXPLAINED, INCONSISTENT, FAULT = "match", "differs", "unexplained", "inconsistent", "fault"


@dataclass
class OpIdentity:
    op: str
    declared: str
    status: str
    seconds: float = 0.0
    cases: np.ndarray | None = None  # the probe cases sent
    backend_units: np.ndarray | None = None
    refused: int = 0  # cases the backend's contract excludes (not judged)
    inference: search.Inference | None = None
    shrunk: Shrunk | None = None
    cause: str = ""  # inconsistent or fault: what the worker said
    scorer: ScorerFinding | None = None  # a scorer op: its calls and cells

    @property
    def driver(self) -> Driver | ScorerDriver:
        return DRIVERS[self.op] if self.op in DRIVERS else SCORERS[self.op]


@dataclass
class IdentifyResult:
    backend: str
    description: str
    revision: str | None
    device: str
    ops: list[OpIdentity] = field(default_factory=list)
    not_run: list[tuple[str, str]] = field(default_factory=list)  # (op, why)
    not_probed: list[str] = field(default_factory=list)  # ops the backend implements that identify has no probes for
    load_fault: str = ""

    @property
    def status(self) -> int:
        """0 every op matches a registered profile; 1 a field differs, an op is unexplained,
        inconsistent or faulted (the load included); 5 nothing ran."""
        if self.load_fault:
            return 1
        if not self.ops:
            return 5
        return 0 if all(o.status == MATCH for o in self.ops) else 1


_ORIGIN_AT = re.compile(r"\bcheckout \$\w+ at (?!an unrecorded revision)(\S+?)(?: \(from [^)]+\))?(?=[,;)]|\s|$)")
_ORIGIN_INSTALLED = re.compile(r"\binstalled [\w.-]+ (?!\(version unknown\))(\S+?)(?=[,;)]|\s|$)")
_VERSION = re.compile(r"\b(?:rev(?:ision)?\s+)?v?(\d+\.\d+(?:\.\d+)?(?:[+.\w-]*)?)\b")


def revision_of(description: str) -> str | None:
    """The revision the backend's description states, if any: a source backend's origin
    (``mxgate.kernels.sources.Source.origin``: ``checkout $VAR at <commit>[+modified]``,
    ``... at <rev> (from VAR_REV)``, ``installed <dist> <version>``), else a version such as
    ``sglang 0.5.23``. A checkout at an unrecorded revision, or an installed package of
    unknown version, states none."""
    for pattern in (_ORIGIN_AT, _ORIGIN_INSTALLED):
        found = pattern.search(description)
        if found:
            return found.group(1)
    if re.search(r"\bat an unrecorded revision\b|\(version unknown\)", description):
        return None
    found = _VERSION.search(description)
    return found.group(1) if found else None


def supported_ops() -> list[str]:
    """The ops identify has probes for, in its order (element ops first, the scorers last)."""
    return list(DRIVERS) + list(SCORERS)


def check_ops(names: list[str] | None) -> None:
    """A usage error (ValueError, one line) for an op identify has no probes for."""
    for op in names or ():
        if op not in DRIVERS and op not in SCORERS:
            raise ValueError(f"--op must be one of {', '.join(supported_ops())}; got {op!r}")


def identify(name: str, ops: list[str] | None = None, device: str = "cpu", *, timeout: float = 300.0,
             startup_timeout: float = isolation.DEFAULT_STARTUP_S,
             progress: Callable[[str], None] | None = None) -> IdentifyResult:
    """Identify the ops of backend ``name`` (a registered name or module:attr). Raises
    NotABackend or ValueError (usage) for a bad name, device or op before anything runs."""
    check_ops(ops)
    kernels.check_name(name)
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda, got {device!r}")
    say = progress or (lambda line: None)
    try:
        backend = isolation.load(name, device, timeout=timeout, startup_timeout=startup_timeout,
                                 policy=lambda index: TWICE)
    except isolation.BackendLoadFailed as fault:
        return IdentifyResult(name, "", None, device, load_fault=fault.cause)
    try:
        result = IdentifyResult(name, backend.description, revision_of(backend.description), device)
        implemented = backend.ops()
        for op in ops or ():
            if op not in implemented:
                raise ValueError(f"--op {op}: backend {name} does not implement it; it implements "
                                 f"{', '.join(sorted(implemented)) or 'nothing'}")
        if not backend.available():
            result.not_run.append(("*", backend.available().reason))
            return result
        wanted = ops or [op for op in supported_ops() if op in implemented]
        if not ops:
            result.not_probed = sorted(op for op in implemented if op not in supported_ops())
        with search.sharing_runs():  # ops on one pool under one reference share the oracle's runs
            for op in wanted:
                status = backend.available_for(op)
                if not status:
                    result.not_run.append((op, status.reason))
                    continue
                say(f"{op} (declared {implemented[op].profile})")
                run, declared = implemented[op].run, implemented[op].profile
                result.ops.append(_identify_scorer(SCORERS[op], run, declared) if op in SCORERS
                                  else _identify_op(DRIVERS[op], run, declared))
        return result
    finally:
        backend.close()


def _call(driver: Driver, run: Callable, cases: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The backend's outputs on ``cases`` and the mask of the cases it ran (its contract may
    exclude some: then the cases go in chunks and refused chunks are left out)."""
    try:
        return driver.call(run, cases), np.ones(cases.shape[0], bool)
    except OutsideContract:
        pass
    kept = np.zeros(cases.shape[0], bool)
    parts: list[tuple[np.ndarray, ...]] = []
    for start in range(0, cases.shape[0], CHUNK_CASES):
        try:
            parts.append(driver.call(run, cases[start:start + CHUNK_CASES]))
            kept[start:start + CHUNK_CASES] = True
        except OutsideContract:
            continue
    if not parts:
        raise OutsideContract("the backend's contract excludes every probe")
    return tuple(np.concatenate(p) for p in zip(*parts)), kept


def _side_run(probe: SideProbe, run: Callable) -> search.SideRun:
    """The backend's units of one side probe (BackendNondeterministic passes through)."""
    args = probe.calls()
    try:
        units = [np.asarray(probe.units(a, probe.call(run, a)), np.int64) for a in args]
    except BackendNondeterministic:
        raise
    except (BackendFault, OutsideContract) as fault:
        return search.SideRun(probe, args, None, getattr(fault, "cause", str(fault)))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as error:
        return search.SideRun(probe, args, None, f"returned outputs its layouts cannot read: {error}")
    return search.SideRun(probe, args, units)


def _identify_scorer(driver: ScorerDriver, run: Callable, declared: str) -> OpIdentity:
    """A scorer op: its probe calls judged within the oracle's bound (``identify.scorers``)."""
    started = time.monotonic()
    identity = OpIdentity(driver.op, declared, FAULT)
    try:
        identity.inference, identity.scorer = identify_scorer(driver, run, declared)
    except BackendNondeterministic as fault:
        identity.status, identity.cause = INCONSISTENT, fault.cause
    except (BackendFault, OutsideContract) as fault:
        identity.cause = getattr(fault, "cause", str(fault))
    except (ValueError, TypeError, IndexError) as error:
        identity.cause = f"returned outputs of another shape or type than {driver.op} declares: {error}"
    else:
        inference = identity.inference
        identity.cases = np.arange(identity.scorer.cells)  # the window cells judged
        identity.status = (UNEXPLAINED if inference.unexplained else MATCH if inference.matches else DIFFERS)
    identity.seconds = time.monotonic() - started
    return identity


def _identify_op(driver: Driver, run: Callable, declared: str) -> OpIdentity:
    started = time.monotonic()
    pool = driver.pool()
    if driver.selective:
        chosen = search.separating_cases(driver, pool, declared)
        chosen = np.union1d(chosen, probes.random_sample(pool.shape[0], RANDOM_EXTRA))
        cases = pool[chosen]
    else:
        cases = pool
    identity = OpIdentity(driver.op, declared, FAULT)
    try:
        outputs, kept = _call(driver, run, cases)
    except BackendNondeterministic as fault:
        identity.status, identity.cause = INCONSISTENT, fault.cause
        identity.seconds = time.monotonic() - started
        return identity
    except (BackendFault, OutsideContract) as fault:
        identity.cause = getattr(fault, "cause", str(fault))
        identity.seconds = time.monotonic() - started
        return identity
    cases = cases[kept]
    identity.refused = int((~kept).sum())
    try:
        backend_units = driver.units(outputs, cases.shape[0])
    except (ValueError, TypeError, IndexError) as error:
        identity.cause = f"returned outputs of another shape or type than {driver.op} declares: {error}"
        identity.seconds = time.monotonic() - started
        return identity
    identity.cases, identity.backend_units = cases, backend_units
    try:
        sides = [_side_run(probe, run) for probe in driver.sides]
    except BackendNondeterministic as fault:
        identity.status, identity.cause = INCONSISTENT, fault.cause
        identity.seconds = time.monotonic() - started
        return identity
    inference = search.infer(driver, cases, backend_units, declared, sides)
    identity.inference = inference
    if inference.unexplained:
        identity.status = UNEXPLAINED
        case, unit = inference.first_unexplained
        try:
            identity.shrunk = shrink(driver, run, cases, case, unit, inference.best)
        except BackendNondeterministic as fault:
            identity.status, identity.cause = INCONSISTENT, fault.cause
    elif inference.side_unexplained:
        identity.status = UNEXPLAINED  # a side probe's bytes: its first unit is in the report
    elif inference.matches:
        identity.status = MATCH
    else:
        identity.status = DIFFERS
    identity.seconds = time.monotonic() - started
    return identity
