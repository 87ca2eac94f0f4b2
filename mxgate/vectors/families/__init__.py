"""The vector families, one module each, in generation order.

A family module provides ``NAME``, ``DESCRIPTION``, ``SEED``, ``available() -> str | None`` (None,
or the reason the family cannot be generated here, e.g. an oracle op not written yet) and
``build(builder)``. Adding a family is one module and one line below.
"""

from __future__ import annotations

from types import ModuleType

from mxgate.vectors.families import elements, indexer, layouts, logits, scales
from mxgate.vectors.families._builder import FamilyBuilder  # noqa: F401 - for writers outside vectors

FAMILIES: list[ModuleType] = [elements, scales, layouts, indexer, logits]


def names() -> list[str]:
    return [f.NAME for f in FAMILIES]


def get(name: str) -> ModuleType:
    for family in FAMILIES:
        if family.NAME == name:
            return family
    raise ValueError(f"family must be one of {', '.join(names())}; got {name!r}")
