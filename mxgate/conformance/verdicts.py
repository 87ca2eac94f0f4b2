"""Three-valued verdicts (plus 'unsupported'), as in Wycheproof, and byte comparison helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

EXACT = "exact"
ACCEPTABLE = "acceptable"
FAIL = "fail"
UNSUPPORTED = "unsupported"
ORDER = (EXACT, ACCEPTABLE, FAIL, UNSUPPORTED)


@dataclass
class Verdict:
    """The outcome of one (backend, op, config) check.

    reason: required for 'acceptable' (which permitted variation) and 'unsupported';
    first_mismatch: coordinates of the first differing element, for 'fail'.
    """

    verdict: str
    reason: str = ""
    mismatches: int = 0
    total: int = 0
    first_mismatch: tuple[int, ...] | None = None
    details: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in ORDER:
            raise ValueError(f"verdict must be one of {ORDER}, got {self.verdict!r}")
        if self.verdict in (ACCEPTABLE, UNSUPPORTED) and not self.reason:
            raise ValueError(f"a {self.verdict!r} verdict must name its reason")

    @property
    def passed(self) -> bool:
        return self.verdict in (EXACT, ACCEPTABLE)


def compare_arrays(expected: np.ndarray, actual: np.ndarray, name: str = "output") -> Verdict:
    """Bitwise comparison: 'exact' when every byte is equal, else 'fail' with the first mismatch."""
    if expected.shape != actual.shape:
        return Verdict(FAIL, f"{name} shape {actual.shape} != expected {expected.shape}")
    if expected.dtype != actual.dtype:
        return Verdict(FAIL, f"{name} dtype {actual.dtype} != expected {expected.dtype}")
    e = np.ascontiguousarray(expected).view(np.uint8).reshape(expected.shape + (-1,))
    a = np.ascontiguousarray(actual).view(np.uint8).reshape(actual.shape + (-1,))
    diff = np.any(e != a, axis=-1)
    count = int(np.count_nonzero(diff))
    if count == 0:
        return Verdict(EXACT, total=int(diff.size))
    first = tuple(int(i) for i in np.argwhere(diff)[0])
    return Verdict(
        FAIL,
        f"{name}: {count} of {diff.size} elements differ, first at {first}",
        mismatches=count,
        total=int(diff.size),
        first_mismatch=first,
    )


def combine(verdicts: list[Verdict]) -> Verdict:
    """The worst of several verdicts (fail > acceptable > exact), reasons joined."""
    if not verdicts:
        raise ValueError("verdicts must not be empty")
    rank = {EXACT: 0, ACCEPTABLE: 1, FAIL: 2, UNSUPPORTED: 3}
    worst = max(verdicts, key=lambda v: rank[v.verdict])
    reasons = "; ".join(v.reason for v in verdicts if v.reason and v.verdict == worst.verdict)
    return Verdict(
        worst.verdict,
        reasons,
        mismatches=sum(v.mismatches for v in verdicts),
        total=sum(v.total for v in verdicts),
        first_mismatch=worst.first_mismatch,
    )
