"""The classifier's working table: one entry per differing unit, as column arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mxgate.explain.frame import Located

# aux values of scale_off_by_one
SCALE_KNOWN, SCALE_INFERRED, SCALE_BYTE = 0, 1, 2


@dataclass
class Table:
    """One entry per differing unit (column arrays of equal length)."""

    nibble: np.ndarray  # int8: 0 low, 1 high, -1 for a byte unit
    kind: np.ndarray  # int8 index into frame.KINDS of the unit's field, -1 none
    row: np.ndarray  # int64 logical row (-1 none)
    col: np.ndarray  # int64 dim / group / word byte (-1 none)
    byte: np.ndarray  # int64 index of the unit's byte in ``offsets`` / ``loc``
    offsets: np.ndarray  # int64 sorted offsets of the differing bytes
    loc: Located  # per differing byte: field, region, coordinates
    exp: np.ndarray  # uint8 code (nibble or byte)
    act: np.ndarray
    cls: np.ndarray  # uint8 class code
    aux: np.ndarray  # int16 class-specific detail (see classes / render)
    verified: np.ndarray  # bool: decided from the input
    se: np.ndarray  # int16 expected e8m0 of the unit's group, -1 unknown
    sa: np.ndarray  # int16 actual e8m0, -1 unknown
    x: np.ndarray  # float32 input element (NaN when unknown; see has_x)
    xs: np.ndarray  # float64 x / 2^(se-127)
    has_x: np.ndarray  # bool
    exp_profiles: np.ndarray  # uint64 bit i: profile names()[i] gives the expected code
    act_profiles: np.ndarray
    extra: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.byte.size)

    # Per-unit views of per-byte facts, gathered on first use (classification needs none).
    @cached_property
    def offset(self) -> np.ndarray:
        """int64 flat byte offset of each unit."""
        return self.offsets[self.byte]

    @cached_property
    def field(self) -> np.ndarray:
        """int8 index into frame.fields (-1: no field)."""
        return self.loc.field[self.byte]

    @cached_property
    def region(self) -> np.ndarray:
        return self.loc.region[self.byte]

    def coord(self, i: int, j: int) -> int:
        """The j-th logical coordinate of unit i's byte."""
        return int(self.loc.coords[j][self.byte[i]])
