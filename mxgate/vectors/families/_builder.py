"""Builds one vector document: groups, cases, per-profile results, the array store.

A family module describes cases (inputs, flags, tier, comment) and a ``compute(profile)``
function; the builder evaluates it under every profile the vectors carry, stores each distinct
output once, and turns a profile's unverified choices (``Profile.unverified``) into
``acceptable`` results that list the other admissible outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.vectors import schema
from mxgate.vectors.store import ArrayStore, canonical

Outputs = dict[str, np.ndarray]
Compute = Callable[[_profiles.Profile], Outputs]
# (profile, its outputs) -> (why other results are admissible, [(label, outputs)]); ("", []) if none
Alternatives = Callable[[_profiles.Profile, Outputs], tuple[str, list[tuple[str, Outputs]]]]


def same(a: Outputs, b: Outputs) -> bool:
    """Byte equality of two output dicts (dtype and shape included)."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = canonical(a[k]), canonical(b[k])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


@dataclass
class Group:
    builder: "FamilyBuilder"
    id: str
    op: str
    comment: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    call: str
    compare: dict[str, str]
    params: dict[str, Any]
    seed: int
    cases: list[dict[str, Any]] = field(default_factory=list)

    def case(
        self,
        slug: str,
        comment: str,
        flags: Sequence[str],
        inputs: Mapping[str, np.ndarray],
        compute: Compute,
        *,
        tier: str = "default",
        params: Mapping[str, Any] | None = None,
        alternatives: Alternatives | None = None,
        alternatives_keep_valid: bool = False,
    ) -> dict[str, Any]:
        """Add a case; ``compute(profile)`` returns the outputs dict under that profile.

        Alternatives make the result 'acceptable' (the modelled output is itself only one
        admissible choice), or, with ``alternatives_keep_valid``, leave it 'valid' (matching it is
        exact; matching an alternative is acceptable), as for the front-end envelope.
        """
        cid = f"{self.id}/{slug}"
        if set(inputs) != set(self.inputs):
            raise ValueError(f"{cid}: inputs {sorted(inputs)} must be the group's {list(self.inputs)}")
        if tier not in schema.TIERS:
            raise ValueError(f"{cid}: tier must be one of {schema.TIERS}")
        store = self.builder.store
        in_keys = {name: store.add(f"{cid}/{name}", np.asarray(a)) for name, a in inputs.items()}
        results: dict[str, Any] = {}
        flag_list = list(dict.fromkeys(flags))
        for p in self.builder.profiles:
            out = compute(p)
            if set(out) != set(self.outputs):
                raise ValueError(f"{cid}: compute returned {sorted(out)}, group outputs are {list(self.outputs)}")
            out_keys = {n: store.add(f"{cid}/{n}@{p.name}", out[n]) for n in self.outputs}
            entry: dict[str, Any] = {"result": "valid", "outputs": out_keys}
            alts: list[tuple[str, Outputs]] = []
            why, candidates = alternatives(p, out) if alternatives else ("", [])
            for label, alt in candidates:
                if not same(alt, out) and not any(same(alt, a) for _, a in alts):
                    alts.append((label, alt))
            if alts:
                if not alternatives_keep_valid:
                    entry["result"] = "acceptable"
                entry["reason"] = why
                entry["alternatives"] = [
                    {"reason": r, "outputs": {n: store.add(f"{cid}/{n}@{p.name}~{i}", a[n]) for n in self.outputs}}
                    for i, (r, a) in enumerate(alts, start=1)
                ]
                if "unverified" not in flag_list:
                    flag_list.append("unverified")
            results[p.name] = entry
        case = {
            "id": cid,
            "comment": comment,
            "flags": flag_list,
            "tier": tier,
            "inputs": in_keys,
            "params": dict(params or {}),
            "results": results,
        }
        self.builder.flags_used.update(flag_list)
        self.cases.append(case)
        return case

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "op": self.op,
            "comment": self.comment,
            "seed": self.seed,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "call": self.call,
            "compare": dict(self.compare),
            "params": dict(self.params),
            "cases": self.cases,
        }


class FamilyBuilder:
    """Collects the groups of one family; ``document()`` gives the JSON-ready dict."""

    def __init__(self, family: str, description: str, seed: int, generator_version: str,
                 profiles: Sequence[str] | None = None) -> None:
        self.family = family
        self.description = description
        self.seed = seed
        self.generator_version = generator_version
        self.store = ArrayStore()
        self.groups: list[Group] = []
        self.flags_used: set[str] = set()
        self.profiles = [_profiles.get(n) for n in (profiles or _profiles.vector_names())]

    def rng(self, offset: int) -> np.random.Generator:
        """The family's random stream number ``offset`` (PCG64, seeded from the header seed)."""
        return np.random.Generator(np.random.PCG64([self.seed, offset]))

    def group(
        self,
        gid: str,
        op: str,
        comment: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        *,
        call: str = "positional",
        compare: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        seed_offset: int = 0,
    ) -> Group:
        if any(g.id == gid for g in self.groups):
            raise ValueError(f"duplicate group id {gid!r}")
        g = Group(
            self, gid, op, comment, tuple(inputs), tuple(outputs), call,
            dict(compare or {n: "bits" for n in outputs}), dict(params or {}), seed_offset,
        )
        self.groups.append(g)
        return g

    def document(self) -> dict[str, Any]:
        vocab = schema.vocabulary()
        used = set(self.flags_used)
        for flag in list(used):  # a class flag pulls in the BUGS entries it cites
            used.update(b for b in vocab[flag]["bugs"] if b in vocab)
        header = {
            "schema": schema.SCHEMA,
            "schema_version": schema.SCHEMA_VERSION,
            "generator_version": self.generator_version,
            "family": self.family,
            "description": self.description,
            "seed": self.seed,
            "profile": schema.REFERENCE_PROFILE,
            "profiles": {p.name: _profile_json(p) for p in self.profiles},
            "arrays": f"{self.family}.npz",
            "tiers": {
                "quick": "a few cases per op: run on every commit",
                "default": "the full set",
                "exhaustive": "long sweeps",
            },
        }
        return {
            "header": header,
            "flags": {f: vocab[f] for f in sorted(used)},
            "groups": [g.as_dict() for g in self.groups if g.cases],
        }


def _profile_json(p: _profiles.Profile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # The header states what a result depends on: the semantics, who ships it and the notes.
    for key, value in p.as_dict().items():
        if key in ("name", "evidence", "unverified"):
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out
