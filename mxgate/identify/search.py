"""Deciding profile fields from a backend's units.

The oracle under a candidate profile (a registered profile with some fields replaced) gives the
expected units of every probe; a candidate *explains* a unit when they are equal. The search
starts at the registered profile that explains the most units and moves one field at a time
(two at a time where no single move helps: fields that only act together, such as the amax
floor and where it applies) while the unexplained count falls. At the end every field's
values are split into the consistent ones and the rejected ones, each rejection with the probes
that decided it: units the best profile explains and the changed profile does not.

An op's side probes (``Driver.sides``: the indexer op's float32 FP4 blocks, K front end and FP8
mode) are judged after that, under the best profile, each with its own axes varied the same way
(one at a time, two at a time where no single move helps; a field the cases read only among the
values they left consistent). The fields a side decides replace the cases' decisions (the
cases' evidence kept), and a registered profile matches only where every side probe explains
the backend's bytes under it too (the K front end: under some envelope member with the
profile's ``fma_contraction``).

On an op the gate judges with ``judge_mx_blocks`` (``Driver.scale_255_open``), units the search
leaves that are all element codes of blocks whose scale byte is 0xFF (the backend's and the best
profile's: the scale units are explained) are *open*, not unexplained: SPEC 3 leaves them open
and the gate rates such bytes acceptable. Then no element code of a 0xFF-scale block serves as
evidence (a value only they reject stays consistent), and a registered profile matches when it
explains every other unit.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from mxgate.identify import candidates
from mxgate.identify.drivers import Driver, SideProbe
from mxgate.oracle import profiles
from mxgate.oracle.profiles import Profile

EVIDENCE_PER_VALUE = 2  # deciding probes kept per rejected value
CANDIDATE = "identify-candidate"  # the name every candidate profile carries while searched


@dataclass(frozen=True)
class Evidence:
    """One probe unit that rejects ``rejected`` as the value of ``field``."""

    field: str
    rejected: object
    case: int  # index into the cases sent to the backend
    unit: int  # unit within the case
    backend: int
    explained: int  # the unit under the inferred profile (equal to the backend's)
    under_rejected: int  # the unit with the field at the rejected value
    side: str = ""  # a side probe's name: then case is the row of call ``call`` and the rest describes it
    call: int = 0
    where: str = ""  # the input, in words (side probes)
    unit_label: str = ""  # the unit's output and position (side probes)
    kind: str = ""  # how the unit prints (side probes)
    bits: tuple[str, ...] = ()  # the input row's bit patterns (side probes)


@dataclass
class FieldDecision:
    field: str
    value: object  # the inferred value (the best profile's)
    consistent: tuple[object, ...]  # every candidate value no probe rejects (value included)
    read: bool  # some candidate value changes the op's output on these probes
    declared: bool  # the op table lists it among the op's profile fields
    evidence: list[Evidence] = field(default_factory=list)
    opened: tuple[object, ...] = ()  # consistent values that only codes SPEC 3 leaves open reject

    @property
    def decided(self) -> bool:
        return self.read and len(self.consistent) == 1


@dataclass
class Inference:
    best: Profile  # the searched profile that explains the most units
    unexplained: int  # units no candidate explains
    first_unexplained: tuple[int, int] | None  # (case, unit)
    fields: dict[str, FieldDecision]
    matches: list[str]  # registered profiles that explain every unit
    nearest: str
    differs: dict[str, tuple[object, object]]  # field -> (inferred value, nearest's value)
    inferred: Profile  # nearest with the differing fields replaced
    evaluations: int = 0
    sides: list["SideFinding"] = field(default_factory=list)
    open_units: int = 0  # element units of 0xFF-scale blocks that differ, left open by SPEC 3

    @property
    def side_unexplained(self) -> int:
        return sum(f.unexplained for f in self.sides)


# Oracle runs kept per op: a candidate that differs from a kept one only in fields that run did
# not read shares its units (most single-field moves of the search change a field the op never
# reads). A pool's units take up to ~10 MB each.
_KEPT_RUNS = 24
# The descent first counts a move on every SAMPLE_STRIDE-th case: a part's count is at most the
# whole pool's, so a move that leaves as many units unexplained there as the current profile
# does everywhere cannot be the better one, and most moves are settled by an eighth of the work.
SAMPLE_STRIDE = 8
_SAMPLED_FROM = 4096  # smaller pools are counted whole


# Within one identify run, ops whose driver has the same reference and unit layout and that send
# the same cases share the oracle's runs (the FP4 block stores and the indexer's quantizer all run
# quantize_mx on one pool, AITER's references on another) and the separating cases of their pool.
# The sets of cases most recently used are kept, each with as many runs as fit a budget (a search
# asks for ~100 runs; the next op asks again from its start), and nothing outlives the scope.
_SHARED_CASE_SETS = 3
_SHARED_BYTES = 128 << 20  # per set of cases
_shared: OrderedDict[tuple, profiles.MemoByReads] | None = None
_separating: dict[tuple, np.ndarray] | None = None


@contextlib.contextmanager
def sharing_runs() -> Iterator[None]:
    """A scope in which evaluators on equal cases of equal drivers share the oracle's runs."""
    global _shared, _separating
    outer = _shared, _separating
    _shared, _separating = OrderedDict(), {}
    try:
        yield
    finally:
        _shared, _separating = outer


def _reference_key(driver: Driver, cases: np.ndarray) -> tuple:
    """What an oracle run on ``cases`` depends on besides the profile."""
    digest = hashlib.blake2b(np.ascontiguousarray(cases).view(np.uint8).reshape(-1), digest_size=16).digest()
    return driver.reference, driver.widths, driver.nan_equal, cases.dtype.str, cases.shape, digest


def _oracle_units(driver: Driver, cases: np.ndarray, p: Profile) -> np.ndarray | None:
    """The oracle's units under ``p`` on ``cases``, or None where the oracle rejects the profile."""
    try:
        with np.errstate(all="ignore"):
            out = driver.reference(p, cases)
    except (TypeError, ValueError):
        return None
    units = driver.units(out, cases.shape[0])
    units.setflags(write=False)  # shared between candidates
    return units


def _runs_of(driver: Driver, cases: np.ndarray) -> Callable[[Profile], np.ndarray | None]:
    """The oracle's runs on ``cases``: the scope's shared memo, else the runs themselves (the
    evaluator's own memo keeps them)."""
    def run(p: Profile) -> np.ndarray | None:
        return _oracle_units(driver, cases, p)

    if _shared is None:
        return run
    key = _reference_key(driver, cases)
    memo = _shared.get(key)
    if memo is None:
        run_bytes = max(1, cases.shape[0] * sum(driver.widths) * 8)  # int64 units at most
        memo = _shared[key] = profiles.MemoByReads(run, limit=max(_KEPT_RUNS, _SHARED_BYTES // run_bytes))
        while len(_shared) > _SHARED_CASE_SETS:
            _shared.popitem(last=False)
    _shared.move_to_end(key)
    return memo


class Evaluator:
    """Units of the oracle under candidate profiles on one set of cases, against the backend's."""

    def __init__(self, driver: Driver, cases: np.ndarray, backend_units: np.ndarray, shared: bool = True) -> None:
        self.driver, self.cases, self.backend = driver, cases, backend_units
        self._counts: dict[tuple, int] = {}
        self.open: np.ndarray | None = None  # units not judged (the contract leaves them open)
        self._evaluations = 0  # oracle runs on these cases asked for here (sharing_runs: maybe made by another op)
        self._runs = profiles.MemoByReads(self._run, limit=_KEPT_RUNS)  # counts the runs this evaluator asks for
        # shared: its runs come from, and go to, the sharing scope (sharing_runs) where one is open
        self._oracle = _runs_of(driver, cases) if shared else (lambda p: _oracle_units(driver, cases, p))
        self._parts: dict[object, tuple[np.ndarray, Evaluator]] = {}  # tag -> (rows, evaluator on them)

    @property
    def evaluations(self) -> int:
        """Oracle runs, on every case or on a part of them."""
        return self._evaluations + sum(part.evaluations for _, part in self._parts.values())

    def part(self, tag: object, rows: np.ndarray, shared: bool = False) -> Evaluator:
        """An evaluator on the cases ``rows`` (kept under ``tag``), judged as these are (the
        open units included). ``shared``: its runs go to the sharing scope (a part every op on
        these cases takes, such as the sample); a part of one backend's unexplained cases keeps
        its own, so that it never pushes the whole pool's runs out of the scope's few sets."""
        kept = self._parts.get(tag)
        if kept is None:
            kept = self._parts[tag] = (rows, Evaluator(self.driver, self.cases[rows], self.backend[rows], shared))
        rows, part = kept
        part.open = None if self.open is None else self.open[rows]
        return part

    def count_below(self, p: Profile, limit: int, focus: Evaluator | None = None) -> int:
        """``count(p)`` where it is below ``limit``; else a number of at least ``limit``, from
        a part of the cases where its count settles it (a part's count is at most the whole's):
        ``focus``, a part of these cases, then every SAMPLE_STRIDE-th case."""
        k = (self.key(p), self.open is not None)
        if k in self._counts:
            return self._counts[k]
        if focus is not None:
            lower = focus.count(p)  # a profile the oracle rejects: every unit of the part
            if lower >= limit:
                return lower
        if self.cases.shape[0] >= _SAMPLED_FROM:
            sample = self.part("sample", np.arange(0, self.cases.shape[0], SAMPLE_STRIDE), shared=True)
            if sample.units(p) is not None:  # a profile the oracle rejects is counted whole
                lower = sample.count(p)
                if lower >= limit:
                    return lower
        return self.count(p)

    @staticmethod
    def key(p: Profile) -> tuple:
        return tuple(p.semantics().values())

    def _run(self, p: Profile) -> np.ndarray | None:
        self._evaluations += 1
        return self._oracle(p)  # its reads reach this evaluator's memo

    def units(self, p: Profile) -> np.ndarray | None:
        """The oracle's units under ``p``, or None where the oracle rejects the profile."""
        return self._runs(p)

    def wrong(self, p: Profile) -> np.ndarray:
        """The units ``p`` does not explain, the open ones left out."""
        u = self.units(p)
        if u is None:
            return np.ones(self.backend.shape, bool)
        return (u != self.backend) if self.open is None else (u != self.backend) & ~self.open

    def count(self, p: Profile) -> int:
        k = (self.key(p), self.open is not None)
        if k not in self._counts:
            self._counts[k] = int(self.wrong(p).sum())
        return self._counts[k]


def _vary(p: Profile, **changes: object) -> Profile:
    return replace(p, name=CANDIDATE, **changes)


def _moves(p: Profile, universe: tuple[str, ...]) -> list[tuple[str, object]]:
    return [(f, v) for f in universe for v in candidates.values(f) if v != getattr(p, f)]


def _descend(ev: Evaluator, start: Profile, universe: tuple[str, ...]) -> tuple[Profile, int]:
    p, c = _vary(start), ev.count(start)
    while c > 0:
        # The cases that hold the c units p leaves unexplained (a kernel with a few wrong bytes:
        # a few cases). A move's count there is at most its count on every case, so where it is c
        # or more there the move cannot be the better one; where they are few, they settle most
        # moves before any run on the whole pool.
        wrong = ev.wrong(p)
        rows = np.flatnonzero(wrong.any(axis=1))
        tag = ("unexplained", Evaluator.key(p), ev.open is not None)
        focus = ev.part(tag, rows) if rows.size * SAMPLE_STRIDE <= ev.cases.shape[0] else None
        # a move counted below c is counted exactly; the others only as far as shows they are not
        singles = [(ev.count_below(_vary(p, **{f: v}), c, focus), i, f, v)
                   for i, (f, v) in enumerate(_moves(p, universe))]
        best = min(singles, default=None)
        if best is not None and best[0] < c:
            c, p = best[0], _vary(p, **{best[2]: best[3]})
            continue
        # No single field helps: try pairs among the fields that move some unexplained unit
        # (read on the cases that hold one: the others cannot show it).
        unexplained = ev.part(tag, rows)
        wrong, base = wrong[rows], unexplained.units(p)
        implicated = []
        for f in universe:
            for v in candidates.values(f):
                if v == getattr(p, f):
                    continue
                u = unexplained.units(_vary(p, **{f: v}))
                if u is not None and base is not None and bool((u != base)[wrong].any()):
                    implicated.append(f)
                    break
        pairs = []
        for f, g in itertools.combinations(implicated, 2):
            for v, w in itertools.product(candidates.values(f), candidates.values(g)):
                if v != getattr(p, f) and w != getattr(p, g):
                    pairs.append((ev.count_below(_vary(p, **{f: v, g: w}), c, focus), len(pairs), f, v, g, w))
        best_pair = min(pairs, default=None)
        if best_pair is None or best_pair[0] >= c:
            break
        c, p = best_pair[0], _vary(p, **{best_pair[2]: best_pair[3], best_pair[4]: best_pair[5]})
    return p, c


def first_hits(mask: np.ndarray, k: int) -> np.ndarray:
    """np.argwhere(mask)[:k] for a 2-d mask, without listing every hit: the first k hits in
    row-major order lie in the first k rows that hold any (a value that moves most units
    would otherwise list them all, for the two kept as evidence)."""
    if mask.ndim != 2 or k < 0:
        raise ValueError(f"first_hits takes a 2-d mask and k >= 0, got {mask.ndim}-d and k={k}")
    rows = np.flatnonzero(mask.any(axis=1))[:k]
    hits = np.argwhere(mask[rows])[:k]
    hits[:, 0] = rows[hits[:, 0]]
    return hits


def _decide(ev: Evaluator, p: Profile, universe: tuple[str, ...], declared: tuple[str, ...]) -> dict[str, FieldDecision]:
    base = ev.units(p)
    assert base is not None, "the best profile is one the oracle accepts"
    explained = base == ev.backend
    judged = explained if ev.open is None else explained & ~ev.open  # open units are no evidence
    out: dict[str, FieldDecision] = {}
    for f in universe:
        consistent, evidence, read, opened = [getattr(p, f)], [], False, []
        for v in candidates.values(f):
            if v == getattr(p, f):
                continue
            u = ev.units(_vary(p, **{f: v}))
            if u is None:
                continue
            moved = u != base
            read = read or bool(moved.any())
            deciding = first_hits(moved & judged, EVIDENCE_PER_VALUE)
            if deciding.size == 0:
                consistent.append(v)
                if ev.open is not None and bool((moved & ev.open).any()):
                    opened.append(v)
                continue
            for case, unit in deciding[:EVIDENCE_PER_VALUE].tolist():
                evidence.append(Evidence(f, v, case, unit, int(ev.backend[case, unit]), int(base[case, unit]),
                                         int(u[case, unit])))
        out[f] = FieldDecision(f, getattr(p, f), tuple(consistent), read, f in declared, evidence, tuple(opened))
    return out


def _search(ev: Evaluator, starts: list[str], universe: tuple[str, ...]) -> tuple[Profile, int]:
    """The descent from each of the first three distinct starts, the best end kept."""
    best, best_count = None, None
    tried: set[tuple] = set()
    for name in starts[:3]:
        start = profiles.get(name)
        if Evaluator.key(start) in tried:
            continue
        tried.add(Evaluator.key(start))
        p, c = _descend(ev, start, universe)
        if best_count is None or c < best_count:
            best, best_count = p, c
        if c == 0:
            break
    assert best is not None and best_count is not None
    return best, best_count


def _open_search(ev: Evaluator, driver: Driver, best: Profile, starts: list[str],
                 universe: tuple[str, ...]) -> tuple[Profile, int]:
    """The profile that leaves only element codes of blocks whose scale byte is 0xFF (the
    backend's; the profile's too, as a differing scale byte is itself a unit left), which the
    contract leaves open, and how many it leaves; then ``ev.open`` holds those codes. Else
    (``best``, 0) and ``ev.open`` stays None."""
    ev.open = driver.scale_255_elements(ev.backend)
    if ev.count(best):  # the search's end leaves other units: search again with the open ones left out
        best, left = _search(ev, starts, universe)
        if left:
            ev.open = None
            return best, 0
    units = ev.units(best)
    assert units is not None, "the best profile is one the oracle accepts"
    return best, int((units != ev.backend).sum())


def infer(driver: Driver, cases: np.ndarray, backend_units: np.ndarray, declared_profile: str | None,
          sides: list["SideRun"] | tuple = ()) -> Inference:
    """The field values that explain ``backend_units`` (the backend's units on ``cases``) and
    the backend's units of the op's side probes (``sides``)."""
    ev = Evaluator(driver, cases, backend_units)
    universe = candidates.semantic_fields()
    names = profiles.names()
    order = {n: i for i, n in enumerate(names)}

    def rank(name: str) -> tuple[int, bool, int]:
        return ev.count(profiles.get(name)), name != declared_profile, order[name]

    best, best_count = _search(ev, sorted(names, key=rank), universe)
    open_units = 0
    if best_count and driver.scale_255_open:
        searched, open_units = _open_search(ev, driver, best, sorted(names, key=rank), universe)
        if open_units:
            best, best_count = searched, 0
        else:
            ev.open = None
    decisions = _decide(ev, best, universe, driver.fields)
    wrong = ev.wrong(best)
    first = tuple(int(i) for i in first_hits(wrong, 1)[0]) if best_count else None
    findings: list[SideFinding] = []
    for side in sides:
        # a field the cases read keeps to the values they left consistent; their evidence stays
        allowed = {f: decisions[f].consistent for f in side.probe.axes if f in decisions and decisions[f].read}
        finding = analyse_side(side, best, driver.fields, allowed)
        findings.append(finding)
        for f, d in finding.fields.items():
            if f in allowed:
                d = FieldDecision(f, d.value, d.consistent, True, d.declared, decisions[f].evidence + d.evidence)
            decisions[f] = d
        best = _vary(best, **{f: d.value for f, d in finding.fields.items()})
    matches = [n for n in names if ev.count(profiles.get(n)) == 0
               and all(f.explains(profiles.get(n)) for f in findings)]
    read = [f for f, d in decisions.items() if d.read]

    def differing(name: str) -> list[str]:
        r = profiles.get(name)
        return [f for f in read if getattr(r, f) not in decisions[f].consistent]

    nearest = min(names, key=lambda n: (len(differing(n)), *rank(n)))
    diffs = differing(nearest)
    inferred = replace(profiles.get(nearest), name=CANDIDATE, **{f: getattr(best, f) for f in diffs})
    if ev.count(inferred) > best_count:  # fields that act together: take every read field of the best
        diffs = [f for f in read if getattr(profiles.get(nearest), f) != getattr(best, f)]
        inferred = replace(profiles.get(nearest), name=CANDIDATE, **{f: getattr(best, f) for f in diffs})
    differs = {f: (getattr(inferred, f), getattr(profiles.get(nearest), f)) for f in diffs}
    return Inference(best, best_count, first, decisions, matches, nearest, differs, inferred, ev.evaluations,
                     findings, open_units)


# ---- side probes ------------------------------------------------------------------------------

VARIANT = "variant"  # the side axis of the front-end envelope member


@dataclass
class SideRun:
    """The backend's units of one side probe (one array per call), or why there are none."""

    probe: SideProbe
    args: list[dict] = field(default_factory=list)
    units: list[np.ndarray] | None = None
    cause: str = ""  # the call faulted or was refused: nothing decided


@dataclass
class SideFinding:
    probe: SideProbe
    cause: str = ""  # not run: why (its axes are then not decided by these probes)
    calls: int = 0
    rows: int = 0
    units: int = 0
    best: dict[str, object] = field(default_factory=dict)  # axis -> value
    unexplained: int = 0
    first_unexplained: tuple[int, int, int] | None = None  # (call, row, unit)
    first_backend: int = 0
    first_expected: int = 0
    axes: dict[str, FieldDecision] = field(default_factory=dict)  # the variant axis included
    fields: dict[str, FieldDecision] = field(default_factory=dict)  # profile fields decided here
    explaining: tuple[str, ...] = ()  # variant axis: the members explaining every unit under the best profile
    default_member: str = ""  # variant axis: the default member of a profile with the fma_contraction found
    _explains: object = None  # registered profile -> whether its bytes equal the backend's here

    def explains(self, p: Profile) -> bool:
        return True if self._explains is None else bool(self._explains(p))  # type: ignore[operator]


class _SideEvaluator:
    def __init__(self, run: SideRun) -> None:
        self.run = run
        self._units: dict[tuple, list[np.ndarray] | None] = {}

    def units(self, p: Profile, variant: str | None) -> list[np.ndarray] | None:
        key = (Evaluator.key(p), variant)
        if key not in self._units:
            probe = self.run.probe
            try:
                with np.errstate(all="ignore"):
                    self._units[key] = [np.asarray(probe.units(a, probe.reference(p, a, variant)), np.int64)
                                        for a in self.run.args]
            except (TypeError, ValueError):
                self._units[key] = None
        return self._units[key]

    def wrong(self, p: Profile, variant: str | None) -> list[np.ndarray]:
        got = self.units(p, variant)
        if got is None:
            return [np.ones(u.shape, bool) for u in self.run.units or []]
        return [g != b for g, b in zip(got, self.run.units or [])]

    def count(self, p: Profile, variant: str | None) -> int:
        return int(sum(w.sum() for w in self.wrong(p, variant)))


def _side_values(axis: str) -> tuple[object, ...]:
    if axis == VARIANT:
        from mxgate.oracle.ops.frontend import VARIANT_NAMES

        return VARIANT_NAMES
    return candidates.values(axis)


def _side_state(p: Profile, variant: str | None, axis: str, value: object) -> tuple[Profile, str | None]:
    return (p, value) if axis == VARIANT else (_vary(p, **{axis: value}), variant)  # type: ignore[return-value]


def _side_value(p: Profile, variant: str | None, axis: str) -> object:
    return variant if axis == VARIANT else getattr(p, axis)


def analyse_side(run: SideRun, best: Profile, declared: tuple[str, ...],
                 allowed: dict[str, tuple[object, ...]] | None = None) -> SideFinding:
    """The side probe's axes under ``best``: the values that explain the backend's units
    (an axis in ``allowed`` takes only those values)."""
    probe = run.probe
    allowed = allowed or {}

    def values(axis: str) -> tuple[object, ...]:
        return allowed.get(axis, _side_values(axis))

    finding = SideFinding(probe, cause=run.cause)
    if run.cause or run.units is None:
        finding.cause = finding.cause or "no outputs"
        return finding
    from mxgate.oracle.ops.frontend import FrontEnd, default_variant, get_variant

    ev = _SideEvaluator(run)
    variant = default_variant(best).name if VARIANT in probe.axes else None
    expected = ev.units(best, variant)
    if expected is None or [e.shape for e in expected] != [u.shape for u in run.units]:
        finding.cause = (f"its outputs read as units of shape {[u.shape for u in run.units]}, the oracle's as "
                         f"{None if expected is None else [e.shape for e in expected]}")
        return finding
    finding.calls = len(run.args)
    finding.rows = sum(u.shape[0] for u in run.units)
    finding.units = sum(u.size for u in run.units)
    p, c = _vary(best), ev.count(best, variant)
    while c > 0:  # one axis at a time, then two, while the unexplained count falls
        moves = [(ev.count(*_side_state(p, variant, a, v)), i, ((a, v),))
                 for i, (a, v) in enumerate((a, v) for a in probe.axes for v in values(a)
                                            if v != _side_value(p, variant, a))]
        best_move = min(moves, default=None)
        if best_move is None or best_move[0] >= c:
            pairs = []
            for a, b in itertools.combinations(probe.axes, 2):
                for v, w in itertools.product(values(a), values(b)):
                    if v != _side_value(p, variant, a) and w != _side_value(p, variant, b):
                        q, qv = _side_state(*_side_state(p, variant, a, v), b, w)
                        pairs.append((ev.count(q, qv), len(pairs), ((a, v), (b, w))))
            best_move = min(pairs, default=None)
            if best_move is None or best_move[0] >= c:
                break
        c = best_move[0]
        for a, v in best_move[2]:
            p, variant = _side_state(p, variant, a, v)
    finding.best = {a: _side_value(p, variant, a) for a in probe.axes}
    finding.unexplained = c
    base = ev.units(p, variant)
    assert base is not None, "the best side state is one the oracle accepts"
    explained = [b == u for b, u in zip(base, run.units)]
    if c:
        for i, w in enumerate(ev.wrong(p, variant)):
            hits = first_hits(w, 1)
            if hits.size:
                row, unit = (int(x) for x in hits[0])
                finding.first_unexplained = (i, row, unit)
                finding.first_backend, finding.first_expected = int(run.units[i][row, unit]), int(base[i][row, unit])
                break
    moved_by: dict[tuple[str, object], bool] = {}
    for axis in probe.axes:
        own = _side_value(p, variant, axis)
        consistent, evidence, read = [own], [], False
        for v in values(axis):
            if v == own:
                continue
            got = ev.units(*_side_state(p, variant, axis, v))
            if got is None:
                continue
            moved = [g != b for g, b in zip(got, base)]
            moved_by[(axis, v)] = any(bool(m.any()) for m in moved)
            read = read or moved_by[(axis, v)]
            deciding = [(i, first_hits(m & e, EVIDENCE_PER_VALUE)) for i, (m, e) in enumerate(zip(moved, explained))]
            if all(d.size == 0 for _, d in deciding):
                consistent.append(v)
                continue
            kept = 0
            for i, d in deciding:
                for row, unit in d[:EVIDENCE_PER_VALUE - kept].tolist():
                    where, label, kind, bits = probe.label(i, row, unit)
                    evidence.append(Evidence(axis, v, row, unit, int(run.units[i][row, unit]), int(base[i][row, unit]),
                                             int(got[i][row, unit]), side=probe.name, call=i, where=where,
                                             unit_label=label, kind=kind, bits=tuple(bits)))
                    kept += 1
                if kept >= EVIDENCE_PER_VALUE:
                    break
        finding.axes[axis] = FieldDecision(axis, own, tuple(consistent), read, axis in declared, evidence)
        if axis != VARIANT:
            finding.fields[axis] = finding.axes[axis]
    if VARIANT in probe.axes:
        members = finding.axes[VARIANT]
        chosen = get_variant(variant, p)
        finding.default_member = FrontEnd("rn", chosen.fma).name  # a profile's default, with the fma found
        finding.explaining = tuple(m for m in _side_values(VARIANT) if ev.count(p, m) == 0)  # type: ignore[arg-type]
        if "fma_contraction" in probe.derived:
            other = FrontEnd(chosen.rsqrt, not chosen.fma).name
            fmas = [chosen.fma] + [not chosen.fma] * any(get_variant(m, p).fma != chosen.fma
                                                         for m in members.consistent)
            evidence = [replace(e, field="fma_contraction", rejected=not chosen.fma)
                        for e in members.evidence if e.rejected == other]
            read = any(moved_by.get((VARIANT, m), False) for m in _side_values(VARIANT)
                       if get_variant(m, p).fma != chosen.fma)  # type: ignore[arg-type]
            finding.fields["fma_contraction"] = FieldDecision("fma_contraction", chosen.fma, tuple(fmas), read,
                                                              "fma_contraction" in declared, evidence)

        def explains(r: Profile) -> bool:
            return any(ev.count(r, m) == 0 for m in _side_values(VARIANT)
                       if get_variant(m, r).fma == r.fma_contraction)  # type: ignore[arg-type]
    else:
        def explains(r: Profile) -> bool:
            return ev.count(r, None) == 0
    finding._explains = explains
    return finding


def separating_cases(driver: Driver, pool: np.ndarray, declared_profile: str | None, per_pair: int = 4) -> np.ndarray:
    """Indices of pool cases that separate every registered profile (those distinct on this op)
    from each of its single-field variants over the op's declared fields, and from each other:
    the first ``per_pair`` cases of each pair that differ."""
    key = (_reference_key(driver, pool), driver.fields, declared_profile, per_pair)
    if _separating is not None and key in _separating:
        return _separating[key].copy()
    chosen = _separating_cases(driver, pool, declared_profile, per_pair)
    if _separating is not None:
        _separating[key] = chosen.copy()
    return chosen


def _separating_cases(driver: Driver, pool: np.ndarray, declared_profile: str | None, per_pair: int) -> np.ndarray:
    n = pool.shape[0]
    chosen: set[int] = set()
    bases: list[np.ndarray] = []
    names = profiles.names()
    if declared_profile in names:
        names = [declared_profile] + [x for x in names if x != declared_profile]
    fields = driver.fields

    def units(p: Profile) -> np.ndarray | None:
        try:
            with np.errstate(all="ignore"):
                return driver.units(driver.reference(p, pool), n)
        except (TypeError, ValueError):
            return None

    def take(a: np.ndarray, b: np.ndarray) -> None:
        rows = np.flatnonzero((a != b).any(axis=1))
        chosen.update(rows[:per_pair].tolist())

    seen_fields: set[tuple] = set()
    for name in names:
        r = profiles.get(name)
        key = tuple(getattr(r, f) for f in fields)
        if key in seen_fields:
            continue
        seen_fields.add(key)
        u = units(r)
        if u is None:
            continue
        for other in bases:
            take(u, other)
        bases.append(u)
        for f in fields:
            for v in candidates.values(f):
                if v != getattr(r, f):
                    w = units(_vary(r, **{f: v}))
                    if w is not None:
                        take(u, w)
    return np.array(sorted(chosen), dtype=np.int64)
