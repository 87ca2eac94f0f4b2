"""Read golden vectors: every byte checked against the manifest before it is parsed.

    from mxgate.vectors import loader
    vs = loader.VectorSet()                       # the set shipped in the package
    for case in vs.cases("elements", tier="quick"):
        x = case.inputs()["x"]
        expected = case.expected("gfx950")        # {"codes": uint8 array}

Arrays load with ``allow_pickle=False``; a damaged or truncated file raises
``manifest.IntegrityError`` naming it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mxgate.vectors import manifest, schema
from mxgate.vectors.generator import package_data_dir, recover

_TIER_RANK = {t: i for i, t in enumerate(schema.TIERS)}


@dataclass
class Case:
    """One vector case with its group, resolving array keys on demand."""

    vectors: "VectorSet"
    family: str
    group: dict[str, Any]
    case: dict[str, Any]

    @property
    def id(self) -> str:
        return self.case["id"]

    @property
    def op(self) -> str:
        return self.group["op"]

    @property
    def flags(self) -> list[str]:
        return self.case["flags"]

    def _arrays(self, keys: dict[str, str]) -> dict[str, np.ndarray]:
        npz = self.vectors.arrays(self.family)
        return {name: npz[key] for name, key in keys.items()}

    def inputs(self) -> dict[str, np.ndarray]:
        """Inputs in the group's call order."""
        arrays = self._arrays(self.case["inputs"])
        return {name: arrays[name] for name in self.group["inputs"]}

    def result(self, profile: str) -> dict[str, Any] | None:
        return self.case["results"].get(profile)

    def expected(self, profile: str) -> dict[str, np.ndarray]:
        r = self.result(profile)
        if r is None:
            raise KeyError(f"{self.id}: no stored result for profile {profile!r}")
        return self._arrays(r["outputs"])

    def alternatives(self, profile: str) -> list[tuple[str, dict[str, np.ndarray]]]:
        r = self.result(profile) or {}
        return [(a["reason"], self._arrays(a["outputs"])) for a in r.get("alternatives", [])]


class VectorSet:
    """A verified vector folder (default: the package's own)."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else package_data_dir()
        recover(self.directory)
        self._docs: dict[str, dict[str, Any]] = {}
        self._npz: dict[str, Any] = {}

    @cached_property
    def manifest(self) -> dict[str, Any]:
        path = self.directory / manifest.MANIFEST
        if not path.is_file():
            raise manifest.IntegrityError(manifest.MANIFEST, f"missing from {self.directory}")
        return manifest.parse(path.read_bytes())

    def families(self) -> list[str]:
        return sorted(self.manifest["families"])

    def document(self, family: str) -> dict[str, Any]:
        if family not in self._docs:
            raw = manifest.read_verified(self.directory, f"{family}.json")
            doc = json.loads(raw)
            schema.validate(doc)
            self._docs[family] = doc
        return self._docs[family]

    def arrays(self, family: str):
        """The family's arrays (a lazy ``NpzFile``), after hash verification."""
        if family not in self._npz:
            raw = manifest.read_verified(self.directory, f"{family}.npz")
            self._npz[family] = np.load(io.BytesIO(raw), allow_pickle=False)
        return self._npz[family]

    def cases(self, family: str | None = None, tier: str = "default") -> Iterator[Case]:
        """Cases of one family (or all) up to ``tier`` (quick < default < exhaustive)."""
        if tier not in _TIER_RANK:
            raise ValueError(f"tier must be one of {schema.TIERS}, got {tier!r}")
        for fam in [family] if family else self.families():
            for g in self.document(fam)["groups"]:
                for c in g["cases"]:
                    if _TIER_RANK[c["tier"]] <= _TIER_RANK[tier]:
                        yield Case(self, fam, g, c)
