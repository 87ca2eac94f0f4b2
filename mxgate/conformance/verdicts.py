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


def _element_bytes(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(a.shape + (-1,))


def _nan_mask(a: np.ndarray, nan_equal: bool | str) -> np.ndarray:
    if nan_equal == "bf16" and a.dtype == np.uint16:
        return (a & np.uint16(0x7FFF)) > np.uint16(0x7F80)
    if a.dtype.kind == "f":
        return np.isnan(a)
    return np.zeros(a.shape, dtype=bool)


def differing(expected: np.ndarray, actual: np.ndarray, nan_equal: bool | str = False) -> np.ndarray:
    """Boolean mask of elements whose bytes differ (NaN == NaN when ``nan_equal``; ``"bf16"``
    reads uint16 arrays as bf16 bit patterns); same shape and dtype required."""
    diff = np.any(_element_bytes(expected) != _element_bytes(actual), axis=-1)
    if nan_equal:
        diff &= ~(_nan_mask(expected, nan_equal) & _nan_mask(actual, nan_equal))
    return diff


_RULE_NAN = {"nan_equal": True, "bf16_nan_equal": "bf16"}


def compare_arrays(expected: np.ndarray, actual: np.ndarray, name: str = "output",
                   nan_equal: bool | str = False) -> Verdict:
    """Bitwise comparison: 'exact' when every byte is equal, else 'fail' with the first mismatch.

    nan_equal: any NaN matches any NaN (for decoders, whose NaN payloads the contract leaves
    open); "bf16": the same for uint16 arrays of bf16 bit patterns.
    """
    if expected.shape != actual.shape:
        return Verdict(FAIL, f"{name} shape {actual.shape} != expected {expected.shape}")
    if expected.dtype != actual.dtype:
        return Verdict(FAIL, f"{name} dtype {actual.dtype} != expected {expected.dtype}")
    diff = differing(expected, actual, nan_equal)
    count = int(np.count_nonzero(diff))
    if count == 0:
        return Verdict(EXACT, total=int(diff.size))
    first = tuple(int(i) for i in np.argwhere(diff)[0])
    return Verdict(
        FAIL,
        f"{name}: {count} of {diff.size} elements differ, first at {first} "
        f"(expected {_show(expected, first)}, got {_show(actual, first)})",
        mismatches=count,
        total=int(diff.size),
        first_mismatch=first,
    )


def _show(a: np.ndarray, index: tuple[int, ...]) -> str:
    value = a[index]
    if a.dtype.kind in "ui":
        return f"0x{int(value):0{a.dtype.itemsize * 2}X}"
    return repr(value.item()) if hasattr(value, "item") else repr(value)


def within_bound(expected: np.ndarray, actual: np.ndarray, bound: np.ndarray, name: str = "output",
                 value: np.ndarray | None = None) -> Verdict:
    """'exact' on bit equality with ``expected``; 'acceptable' when every |actual - value| <= bound
    (``value`` defaults to ``expected``; equal infinities and NaN == NaN pass); else 'fail'."""
    exact = compare_arrays(expected, actual, name)
    if exact.verdict != FAIL or expected.shape != actual.shape:
        return exact
    e = (expected if value is None else value).astype(np.float64)
    a = actual.astype(np.float64)
    same_special = (e == a) | (np.isnan(e) & np.isnan(a))
    ok = same_special | (np.abs(a - e) <= bound.astype(np.float64))
    if ok.all():
        return Verdict(ACCEPTABLE, f"{name}: within the rigorous error bound", total=int(ok.size))
    bad = ~ok
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return Verdict(FAIL, f"{name}: {int(bad.sum())} of {ok.size} elements outside the error bound, first at {first}",
                   mismatches=int(bad.sum()), total=int(ok.size), first_mismatch=first)


def judge_outputs(
    expected: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    rules: dict[str, str],
    *,
    result: str = "valid",
    reason: str = "",
    alternatives: list[tuple[str, dict[str, np.ndarray]]] = (),
) -> Verdict:
    """Judge an op's outputs against a golden vector result.

    result 'valid': matching ``expected`` is exact; 'acceptable': matching it is acceptable with
    ``reason``. Matching an alternative (whole, or element by element across the admissible
    members) is acceptable with ``reason`` and the member named. Rules per output: 'bits',
    'nan_equal', 'bf16_nan_equal', 'within:<value>,<bound>' (|actual - value| <= bound is
    acceptable; both are stored reference outputs), 'reference' (stored only for another
    output's rule; not compared).
    """
    compared = [n for n, r in rules.items() if r != "reference"]
    verdicts = []
    for n in compared:
        rule = rules[n]
        if rule.startswith("within:"):
            value, bound = rule[len("within:"):].split(",")
            verdicts.append(within_bound(expected[n], actual[n], expected[bound], n, value=expected[value]))
        else:
            verdicts.append(compare_arrays(expected[n], actual[n], n, nan_equal=_RULE_NAN.get(rule, False)))
    primary = combine(verdicts)
    if primary.passed:
        if result == "acceptable":
            return Verdict(ACCEPTABLE, f"{reason} (matches the modelled output)", total=primary.total)
        return primary
    for label, alt in alternatives:
        if all(compare_arrays(alt[n], actual[n], n, nan_equal=_RULE_NAN.get(rules[n], False)).passed for n in compared
               if not rules[n].startswith("within:")):
            return Verdict(ACCEPTABLE, f"{reason}: matches {label}", total=primary.total)
    if alternatives and _mixed_match(expected, actual, rules, compared, alternatives):
        return Verdict(ACCEPTABLE, f"{reason}: every element matches one admissible member", total=primary.total)
    if alternatives:
        primary.reason += f" (and matches none of {len(alternatives)} admissible alternatives)"
    return primary


def _mixed_match(expected, actual, rules, compared, alternatives) -> bool:
    for n in compared:
        if rules[n].startswith("within:") or expected[n].shape != actual[n].shape or expected[n].dtype != actual[n].dtype:
            return False
        bad = differing(expected[n], actual[n], _RULE_NAN.get(rules[n], False))
        for _, alt in alternatives:
            bad &= differing(alt[n], actual[n], _RULE_NAN.get(rules[n], False))
        if bad.any():
            return False
    return True


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
