"""Deciding profile fields from a backend's units.

The oracle under a candidate profile (a registered profile with some fields replaced) gives the
expected units of every probe; a candidate *explains* a unit when they are equal. The search
starts at the registered profile that explains the most units and moves one field at a time
(two at a time where no single move helps: fields that only act together, such as the amax
floor and where it applies) while the unexplained count falls. At the end every field's
values are split into the consistent ones and the rejected ones, each rejection with the probes
that decided it: units the best profile explains and the changed profile does not.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np

from mxgate.identify import candidates
from mxgate.identify.drivers import Driver
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


@dataclass
class FieldDecision:
    field: str
    value: object  # the inferred value (the best profile's)
    consistent: tuple[object, ...]  # every candidate value no probe rejects (value included)
    read: bool  # some candidate value changes the op's output on these probes
    declared: bool  # the op table lists it among the op's profile fields
    evidence: list[Evidence] = field(default_factory=list)

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


class Evaluator:
    """Units of the oracle under candidate profiles on one set of cases, against the backend's."""

    def __init__(self, driver: Driver, cases: np.ndarray, backend_units: np.ndarray) -> None:
        self.driver, self.cases, self.backend = driver, cases, backend_units
        self._counts: dict[tuple, int] = {}
        self.evaluations = 0

    @staticmethod
    def key(p: Profile) -> tuple:
        return tuple(p.semantics().values())

    def units(self, p: Profile) -> np.ndarray | None:
        """The oracle's units under ``p``, or None where the oracle rejects the profile."""
        self.evaluations += 1
        try:
            with np.errstate(all="ignore"):
                out = self.driver.reference(p, self.cases)
        except (TypeError, ValueError):
            return None
        return self.driver.units(out, self.cases.shape[0])

    def wrong(self, p: Profile) -> np.ndarray:
        u = self.units(p)
        if u is None:
            return np.ones(self.backend.shape, bool)
        return u != self.backend

    def count(self, p: Profile) -> int:
        k = self.key(p)
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
        singles = [(ev.count(_vary(p, **{f: v})), i, f, v) for i, (f, v) in enumerate(_moves(p, universe))]
        best = min(singles, default=None)
        if best is not None and best[0] < c:
            c, p = best[0], _vary(p, **{best[2]: best[3]})
            continue
        # No single field helps: try pairs among the fields that move some unexplained unit.
        wrong = ev.wrong(p)
        base = ev.units(p)
        implicated = []
        for f in universe:
            for v in candidates.values(f):
                if v == getattr(p, f):
                    continue
                u = ev.units(_vary(p, **{f: v}))
                if u is not None and base is not None and bool((u != base)[wrong].any()):
                    implicated.append(f)
                    break
        pairs = []
        for f, g in itertools.combinations(implicated, 2):
            for v, w in itertools.product(candidates.values(f), candidates.values(g)):
                if v != getattr(p, f) and w != getattr(p, g):
                    pairs.append((ev.count(_vary(p, **{f: v, g: w})), len(pairs), f, v, g, w))
        best_pair = min(pairs, default=None)
        if best_pair is None or best_pair[0] >= c:
            break
        c, p = best_pair[0], _vary(p, **{best_pair[2]: best_pair[3], best_pair[4]: best_pair[5]})
    return p, c


def _decide(ev: Evaluator, p: Profile, universe: tuple[str, ...], declared: tuple[str, ...]) -> dict[str, FieldDecision]:
    base = ev.units(p)
    assert base is not None, "the best profile is one the oracle accepts"
    explained = base == ev.backend
    out: dict[str, FieldDecision] = {}
    for f in universe:
        consistent, evidence, read = [getattr(p, f)], [], False
        for v in candidates.values(f):
            if v == getattr(p, f):
                continue
            u = ev.units(_vary(p, **{f: v}))
            if u is None:
                continue
            moved = u != base
            read = read or bool(moved.any())
            deciding = np.argwhere(moved & explained)
            if deciding.size == 0:
                consistent.append(v)
                continue
            for case, unit in deciding[:EVIDENCE_PER_VALUE].tolist():
                evidence.append(Evidence(f, v, case, unit, int(ev.backend[case, unit]), int(base[case, unit]),
                                         int(u[case, unit])))
        out[f] = FieldDecision(f, getattr(p, f), tuple(consistent), read, f in declared, evidence)
    return out


def infer(driver: Driver, cases: np.ndarray, backend_units: np.ndarray, declared_profile: str | None) -> Inference:
    """The field values that explain ``backend_units`` (the backend's units on ``cases``)."""
    ev = Evaluator(driver, cases, backend_units)
    universe = candidates.semantic_fields()
    names = profiles.names()
    order = {n: i for i, n in enumerate(names)}

    def rank(name: str) -> tuple[int, bool, int]:
        return ev.count(profiles.get(name)), name != declared_profile, order[name]

    starts = sorted(names, key=rank)
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
    decisions = _decide(ev, best, universe, driver.fields)
    wrong = ev.wrong(best)
    first = tuple(int(i) for i in np.argwhere(wrong)[0]) if best_count else None
    matches = [n for n in names if ev.count(profiles.get(n)) == 0]
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
    return Inference(best, best_count, first, decisions, matches, nearest, differs, inferred, ev.evaluations)


def separating_cases(driver: Driver, pool: np.ndarray, declared_profile: str | None, per_pair: int = 4) -> np.ndarray:
    """Indices of pool cases that separate every registered profile (those distinct on this op)
    from each of its single-field variants over the op's declared fields, and from each other:
    the first ``per_pair`` cases of each pair that differ."""
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
