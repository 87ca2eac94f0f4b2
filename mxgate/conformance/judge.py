"""The conformance judge: every verdict mxgate makes is made here.

The oracle computes values, bounds, envelope members and admissible sets; this module compares
a backend's outputs with them and says ``exact``, ``acceptable`` (with the permitted variation
it relied on) or ``fail`` (with the first mismatch), as in Wycheproof; ``unsupported`` is for
what cannot run here. The rules, one section each:

* bit equality, NaN-equal (``compare_arrays``), within a stored bound (``within_bound``) and the
  golden-vector rules with their admissible alternatives (``judge_outputs``);
* byte-layout ops (cache writers): a fail names explain's mismatch classes (``compare_store``);
* element rules the contract leaves open (``judge_e2m1_codes``, ``judge_mx_blocks``);
* scorer logits against the emulated order and the bound (``compare_logits``);
* top-k choices against the admissible sets, near-ties accepted (``check_topk``);
* the indexer op's rows against its front-end envelope (``match_variants``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle import unverified
from mxgate.oracle.ops import frontend
from mxgate.oracle.ops import members as _members
from mxgate.oracle.ops.indexer import IndexerOutputs
from mxgate.oracle.scorers import common as _args
from mxgate.oracle.scorers.cells import classify_logits
from mxgate.oracle.scorers.choices import classify_topk
from mxgate.oracle.scorers.common import ScoredLogits

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
    op: str | None = None,
    profile: str = "gfx950",
) -> Verdict:
    """Judge an op's outputs against a golden vector result.

    result 'valid': matching ``expected`` is exact; 'acceptable': matching it is acceptable with
    ``reason``. Matching an alternative (whole, or element by element across the admissible
    members) is acceptable with ``reason`` and the member named. Rules per output: 'bits',
    'nan_equal', 'bf16_nan_equal', 'within:<value>,<bound>' (|actual - value| <= bound is
    acceptable; both are stored reference outputs), 'reference' (stored only for another
    output's rule; not compared). ``op`` and ``profile``: a fail of a byte-layout op (a cache
    writer) names explain's mismatch classes under that profile.
    """
    verdict = _judge_rules(expected, actual, rules, result, reason, alternatives)
    if op is not None and verdict.verdict == FAIL:
        names = [n for n, r in rules.items() if r != "reference"]
        return _with_classes(verdict, op, [expected[n] for n in names], [actual[n] for n in names], profile)
    return verdict


def _judge_rules(expected, actual, rules, result, reason, alternatives) -> Verdict:
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


# ---- byte-layout ops: a fail names explain's classes -----------------------------------------


def store_layouts(op: str, outputs: int) -> tuple[str, ...] | None:
    """The layouts a cache writer's outputs follow (``<layout>.store``: the layout's buffer, and
    with two outputs its ``-scale`` companion), or None for an op that is not a cache writer."""
    from mxgate.oracle import layouts

    layout = str(op).removesuffix(".store")
    if layout == str(op) or layout not in layouts.names():
        return None
    return (layout,) if outputs == 1 else (layout, f"{layout}-scale")


def compare_store(op: str, expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                  names: Sequence[str] = ("payload", "scale"), profile: str = "gfx950") -> Verdict:
    """Bit equality of a cache writer's buffers; a fail names explain's mismatch classes."""
    verdict = combine([compare_arrays(e, a, name) for e, a, name in zip(expected, actual, names)])
    return _with_classes(verdict, op, list(expected), list(actual), profile) if verdict.verdict == FAIL else verdict


def _with_classes(verdict: Verdict, op: str, expected: list[np.ndarray], actual: list[np.ndarray],
                  profile: str) -> Verdict:
    """A byte-layout op's fail with explain's class counts added to its reason (and details)."""
    classes = layout_classes(op, expected, actual, profile)
    if not classes:
        return verdict
    verdict.reason += f"; explain classes {classes}"
    verdict.details["explain_classes"] = classes
    return verdict


def layout_classes(op: str, expected: list[np.ndarray], actual: list[np.ndarray], profile: str) -> dict[str, int]:
    """explain's non-zero class counts for a cache writer's differing buffers ({} when the op
    is not a cache writer or explain cannot read the buffers, e.g. of the wrong shape)."""
    from mxgate.explain import explain

    names = store_layouts(op, len(expected))
    if names is None:
        return {}
    scales = (np.asarray(expected[1]), np.asarray(actual[1])) if len(names) == 2 else None
    try:
        report = explain(np.asarray(expected[0]), np.asarray(actual[0]), layout=names[0], profile=profile,
                         scales=scales)
    except (TypeError, ValueError):
        return {}
    return {name: int(count) for name, count in report.counts.items() if count}


# ---- element rules the contract leaves open --------------------------------------------------


def judge_e2m1_codes(x: np.ndarray, expected: np.ndarray, actual: np.ndarray, profile: str,
                     name: str = "codes") -> Verdict:
    """E2M1 codes bit-equal, or acceptable where only NaN inputs differ under a profile whose
    NaN conversion is an unverified choice."""
    v = compare_arrays(expected, actual, name)
    why = unverified.reason(_profiles.get(profile), "nan") if v.verdict == FAIL else ""
    if why and actual.shape == expected.shape:
        bad = differing(expected, actual)
        bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        if np.all(((bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000))[bad]):
            return Verdict(ACCEPTABLE, f"{why} ({v.mismatches} NaN inputs differ)", total=v.total)
    return v


def judge_mx_quantize(x: np.ndarray, profile: str, actual: object, reference=None) -> Verdict:
    """A backend's (packed, e8m0) for ``x`` against the reference's ``quantize_mx(x, profile)``
    (the oracle's unless another reference, such as the twin on the device, is given)."""
    if reference is None:
        from mxgate import oracle

        reference = oracle.quantize_mx
    return judge_mx_blocks(*reference(x, profile), actual)


def judge_mx_blocks(packed: np.ndarray, scales: np.ndarray, actual: object) -> Verdict:
    """``mx.quantize`` outputs (packed, e8m0) against the oracle's; elements of a block whose
    scale byte is 0xFF are left open by the contract (SPEC 3): acceptable when only those differ."""
    if not isinstance(actual, (tuple, list)) or len(actual) != 2:
        return Verdict(FAIL, "mx.quantize must return (packed, e8m0)")
    got_packed, got_scales = np.asarray(actual[0]), np.asarray(actual[1])
    v = combine([compare_arrays(scales, got_scales, "e8m0"), compare_arrays(packed, got_packed, "packed")])
    if v.verdict == FAIL and scales.shape == got_scales.shape and packed.shape == got_packed.shape:
        scale_ok = not differing(scales, got_scales).any()
        bad_rows = differing(packed, got_packed).reshape(scales.shape + (-1,)).any(axis=-1)
        if scale_ok and np.all(scales[bad_rows] == 0xFF):
            return Verdict(ACCEPTABLE, unverified.SCALE_255_REASON, total=v.total)
    return v


# ---- scorer logits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogitsCheck:
    """How a backend's logits relate to the oracle's answer (``ScoredLogits``).

    bit_equal: window cells bit-equal to the emulated order (NaN matches NaN); within: the other
    window cells inside the bound; outside: window cells beyond the bound (or the wrong
    non-finite class); fill_changed: cells outside the window whose bits differ from the
    caller's fill. verdict: "exact" (all window cells bit-equal, fill kept), "acceptable" (all
    within the bound, fill kept), else "fail"; reason says which.
    """

    cells: int
    bit_equal: int
    within: int
    outside: int
    fill_changed: int
    first_outside: tuple[int, int] | None
    first_fill_changed: tuple[int, int] | None
    worst_ratio: float
    verdict: str
    reason: str
    details: dict[str, object] = field(default_factory=dict)


def compare_logits(scored: ScoredLogits, actual: np.ndarray, fill: np.ndarray | float | None = -np.inf) -> LogitsCheck:
    """Classify a backend's float32 logits against the emulated order and the value's bound.

    fill: what the caller pre-filled ``actual`` with (scalar or array): cells outside the
    window must still hold exactly those bits. None: cells outside the window are not judged.
    """
    a = _args.float32(actual, "actual")
    if a.shape != scored.value.shape:
        raise ValueError(f"actual must have shape {scored.value.shape}, got {a.shape}")
    win = scored.window
    cells = int(win.sum())
    fill_arr = _fill(fill, a.shape)
    changed = ~win & (a.view(np.uint32) != fill_arr.view(np.uint32)) & ~(np.isnan(a) & np.isnan(fill_arr))
    if fill is None:
        changed = np.zeros_like(win)
    value, bound = scored.value, scored.bound
    classes = classify_logits(scored, a)
    equal_cells, err = classes.bit_equal, classes.error
    good = classes.within | classes.same_class
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = np.where(win & np.isfinite(value) & (bound > 0), err / np.where(bound > 0, bound, 1.0), 0.0)
    outside = win & ~good & ~equal_cells
    n_equal = int(equal_cells.sum())
    n_out = int(outside.sum())
    n_fill = int(changed.sum())
    within = cells - n_equal - n_out
    first_out = tuple(int(i) for i in np.argwhere(outside)[0]) if n_out else None
    first_fill = tuple(int(i) for i in np.argwhere(changed)[0]) if n_fill else None
    finite_ratios = ratio[win & np.isfinite(ratio)]  # empty when every window cell is NaN
    worst = float(finite_ratios.max()) if finite_ratios.size else 0.0
    if n_out or n_fill:
        parts = []
        if n_out:
            r, c = first_out
            parts.append(f"{n_out} of {cells} window cells outside the bound, first at {first_out}: "
                         f"got {float(a[r, c])!r}, exact {float(value[r, c])!r} +- {float(bound[r, c])!r}")
        if n_fill:
            r, c = first_fill
            parts.append(f"{n_fill} cells outside the window changed, first at {first_fill}: "
                         f"got {float(a[r, c])!r} (bits {int(a.view(np.uint32)[r, c]):#010x}), "
                         f"fill bits {int(fill_arr.view(np.uint32)[r, c]):#010x}")
        verdict, reason = FAIL, "; ".join(parts)
    elif n_equal == cells:
        verdict, reason = EXACT, ""
    else:
        verdict = ACCEPTABLE
        reason = (f"{within} of {cells} window cells differ from the emulated order but lie within the "
                  f"rigorous bound (qk model {scored.bound_model}, any head order); worst |err|/bound {worst:.3g}")
    return LogitsCheck(cells, n_equal, within, n_out, n_fill, first_out, first_fill, worst, verdict, reason)


def logits_verdict(check: LogitsCheck) -> Verdict:
    """The matrix verdict of a logits check: the first cell outside the bound (else the first
    changed fill cell) is its first mismatch."""
    first = check.first_outside or check.first_fill_changed
    return Verdict(check.verdict, check.reason, mismatches=check.outside + check.fill_changed, total=check.cells,
                   first_mismatch=first)


def judge_logits(scored: ScoredLogits, actual: np.ndarray, fill: np.ndarray | float | None = -np.inf) -> Verdict:
    """``logits_verdict(compare_logits(...))``."""
    return logits_verdict(compare_logits(scored, actual, fill=fill))


def _fill(fill: np.ndarray | float | None, shape: tuple[int, ...]) -> np.ndarray:
    """compare_logits' fill as float32 of the logits' shape (None: NaN, never compared)."""
    if fill is None:
        return np.broadcast_to(np.float32(np.nan), shape)
    if not isinstance(fill, (np.ndarray, list, tuple)):
        return np.broadcast_to(_args.real(fill, "fill", finite=False), shape)
    array = np.asarray(fill, dtype=np.float32)
    try:
        return np.broadcast_to(array, shape)
    except ValueError:
        raise ValueError(f"fill must be a scalar or broadcast to actual's shape {shape}, got shape {array.shape}") from None


# ---- top-k -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopkCheck:
    """Result of ``check_topk`` over all rows.

    overlap: |backend set ∩ oracle set| / |oracle set|, pooled over rows (1.0 when every row
    matches); overlap_per_row: the same per row. accepted_swaps: oracle cells left out where
    the row is still admissible (ties and near-ties within the bound); genuine_misses: oracle
    cells left out that beat a chosen cell under every admissible rounding; invalid: backend
    columns that are not candidates or repeat. passed: no genuine miss and nothing invalid.
    misses: (row, oracle column, backend column it lost to) for the first few genuine misses.
    """

    overlap: float
    overlap_per_row: np.ndarray
    accepted_swaps: int
    genuine_misses: int
    invalid: int
    passed: bool
    misses: list[tuple[int, int, int]]
    reason: str


def check_topk(oracle_values: np.ndarray, bound: np.ndarray, backend_indices: np.ndarray, k: int,
               window: np.ndarray | None = None, max_misses: int = 8) -> TopkCheck:
    """Judge a backend's top-k columns against the values and per-cell bounds.

    oracle_values, bound: float [rows, columns] (e.g. ``ScoredLogits.value`` / ``.bound``);
    backend_indices: int [rows, k'] with k' >= k (the first k are used; -1 entries are padding).
    Every oracle top-k cell the backend left out is an accepted swap while the backend's set is
    still a top-k of some admissible logits (``topk.admissible_range``); a left-out cell whose
    lowest admissible value beats the highest of a chosen cell is a genuine miss. Columns that
    are not candidates (out of the window, -inf, NaN, out of range, repeated) are invalid.
    """
    rows = classify_topk(oracle_values, bound, backend_indices, k, window, max_misses)
    v, b, first = np.asarray(oracle_values, np.float64), np.asarray(bound, np.float64), rows.first_misses
    swaps, misses, invalid = int(rows.swaps.sum()), int(rows.misses.sum()), int(rows.invalid.sum())
    wanted = (rows.oracle >= 0).sum(axis=1)
    total = int(wanted.sum())
    overlap = float((rows.overlap * wanted).sum() / total) if total else 1.0
    per_row = rows.overlap
    passed = misses == 0 and invalid == 0
    if passed:
        reason = "" if swaps == 0 else f"{swaps} near-tie swap(s) within the bound, overlap {overlap:.4f}"
    else:
        parts = []
        if misses:
            r, c, j = first[0]
            parts.append(f"{misses} genuine miss(es), first row {r}: column {c} (exact {float(v[r, c])!r} "
                         f"+- {float(b[r, c])!r}) beats chosen column {j} (exact {float(v[r, j])!r} +- {float(b[r, j])!r})")
        if invalid:
            parts.append(f"{invalid} invalid choice(s) (not a candidate, repeated, or missing)")
        reason = "; ".join(parts)
    return TopkCheck(overlap, per_row, swaps, misses, invalid, passed, first, reason)


def check_paged_topk(scored: ScoredLogits, indices: np.ndarray, k: int) -> TopkCheck:
    """A paged top-k kernel's indices [rows, >= k] judged as sets against the scorer's values,
    ties and near-ties inside the bound accepted; rows with at most k window cells must list
    exactly those cells (then -1)."""
    return check_topk(scored.value, scored.bound, np.asarray(indices).astype(np.int64), k, window=scored.window)


def topk_verdict(check: TopkCheck) -> Verdict:
    """The matrix verdict of a top-k check: near-tie swaps are acceptable, any genuine miss or
    invalid choice fails (its first miss's row and column are the first mismatch)."""
    if not check.passed:
        first = check.misses[0][:2] if check.misses else None
        return Verdict(FAIL, check.reason, mismatches=check.genuine_misses + check.invalid, first_mismatch=first)
    if check.accepted_swaps:
        return Verdict(ACCEPTABLE, check.reason)
    return Verdict(EXACT, total=int(check.overlap_per_row.size))


# ---- the indexer op's front-end envelope -----------------------------------------------------

Mismatch = tuple[str, tuple[int, ...]]


@dataclass
class EnvelopeMatch:
    """Per-row members and the overall verdict of a backend's indexer outputs.

    k_variant: [T] member name per token for its K row; '' where no K row is written, None
               where no member matches.
    q_variant: [T, H] the same for Q rows (q_out row, its scales and weights_out).
    counts:    rows per (side, member) for members other than the default, e.g.
               {'K rsqrt-up+fma': 3}.
    mismatch:  (output name, index) of the first byte that differs from the composite.
    """

    status: str
    reason: str
    default: str
    k_variant: np.ndarray
    q_variant: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)
    mismatch: Mismatch | None = None
    mismatches: int = 0
    total: int = 0


def match_variants(actual: IndexerOutputs | Sequence[Any] | Mapping[str, Any], *, reference=None,
                   **op_kwargs: Any) -> EnvelopeMatch:
    """Judge a backend's indexer outputs against the envelope (``oracle.ops.members``).

    op_kwargs: the arguments the backend was called with, output buffers in their state
    *before* the call (they are copied, never written), plus optional ``profile=``.
    actual: the backend's five outputs (IndexerOutputs, a sequence in that order, or a
    mapping by name; FP8 mode has no scale buffers).
    ``exact`` when every output byte equals the default member's, ``acceptable`` when every
    byte equals the composite (each written row from the first member whose bytes it equals;
    untouched bytes must keep their values), ``fail`` otherwise. reference: the indexer op that
    computes the members (NumPy in and out; default the oracle's).
    """
    m = _members
    args = m.bind(op_kwargs)
    members = frontend.envelope(_profiles.get(args["profile"]))
    default = members[0]
    call = m.call_of({**args, "variant": default})
    got = m.as_outputs(actual)
    base = m.run_member(args, default, reference)

    t, h = call.num_tokens, call.num_heads
    k_variant = np.full(t, "", dtype=object)
    q_variant = np.full((t, h), "", dtype=object)
    diff, total, first, problem = _compare_outputs(base, got)
    if problem:
        return EnvelopeMatch(FAIL, problem, default.name, k_variant, q_variant, mismatch=first)
    k_tokens, q_tokens = call.k_rows, call.q_rows
    k_variant[k_tokens] = default.name
    q_variant[q_tokens] = default.name
    if diff == 0:
        return EnvelopeMatch(EXACT, "", default.name, k_variant, q_variant, total=total)

    runs = {default: base}
    for member in members[1:]:
        runs[member] = m.run_member(args, member, reference)
    names = [member.name for member in members]
    slots = call.slots[k_tokens]
    k_found = _first_match(m.k_rows(got, call, slots), [m.k_rows(runs[x], call, slots) for x in members], names)
    k_variant[k_tokens] = k_found
    q_from = m.q_members(members)

    def q_bytes(parts: list[np.ndarray]) -> np.ndarray:
        rows = np.concatenate([p[q_tokens].reshape(q_tokens.size, h, -1) for p in parts], axis=-1)
        return rows.reshape(q_tokens.size * h, -1)

    q_found = _first_match(q_bytes(m.q_rows(got, call)), [q_bytes(m.q_rows(runs[x], call)) for x in q_from],
                           [x.name for x in q_from]).reshape(q_tokens.size, h)
    q_variant[q_tokens] = q_found

    composite = m.composite(call, runs, members, slots, k_found, q_tokens, q_found)
    diff, total, first, _ = _compare_outputs(composite, got)
    counts: dict[str, int] = {}
    for side, found in (("K", k_found), ("Q", q_found.reshape(-1))):
        for name in names:
            n = int(np.count_nonzero(found == name))
            if n and name != default.name:
                counts[f"{side} {name}"] = n
    if diff == 0:
        detail = "; ".join(f"{n} {key.split(' ')[0]} rows match {key.split(' ', 1)[1]} "
                           f"({frontend.get_variant(key.split(' ', 1)[1]).describe()})"
                           for key, n in counts.items())
        return EnvelopeMatch(ACCEPTABLE, f"front end within the rsqrt/FMA envelope: {detail}", default.name,
                             k_variant, q_variant, counts, total=total)
    parts = []
    unmatched_k = int(np.count_nonzero(k_found == None))  # noqa: E711 - object array
    unmatched_q = int(np.count_nonzero(q_found == None))  # noqa: E711
    if unmatched_k:
        bad = k_tokens[np.flatnonzero(k_found == None)]  # noqa: E711
        parts.append(f"K rows of {unmatched_k} tokens match no admissible front end (first: token {int(bad[0])})")
    if unmatched_q:
        bad = np.argwhere(q_found == None)[0]  # noqa: E711
        parts.append(f"{unmatched_q} Q rows match no admissible front end "
                     f"(first: token {int(q_tokens[bad[0]])}, head {int(bad[1])})")
    where = f"{first[0]}{list(first[1])}" if first else "?"
    parts.append(f"{diff} of {total} elements differ from the envelope's bytes, first at {where}")
    return EnvelopeMatch(FAIL, "; ".join(parts), default.name, k_variant, q_variant, counts,
                         mismatch=first, mismatches=diff, total=total)


def envelope_verdict(match: EnvelopeMatch) -> Verdict:
    """The matrix verdict of an envelope match (rows per member in its details)."""
    details: dict[str, object] = {"rows_by_member": match.counts}
    first = None
    if match.mismatch is not None:
        details["output"] = match.mismatch[0]
        first = match.mismatch[1]
    return Verdict(match.status, match.reason, mismatches=match.mismatches, total=match.total,
                   first_mismatch=first, details=details)


def _first_match(actual_rows: np.ndarray, candidates: list[np.ndarray], names: list[str]) -> np.ndarray:
    """Per row: the first candidate name whose bytes equal the actual row, else None."""
    flat_actual = actual_rows.reshape(actual_rows.shape[0], -1)
    result = np.full(actual_rows.shape[0], None, dtype=object)
    open_rows = np.ones(actual_rows.shape[0], bool)
    for rows, name in zip(candidates, names):
        hit = open_rows & np.all(flat_actual == rows.reshape(rows.shape[0], -1), axis=1)
        result[hit] = name
        open_rows &= ~hit
    return result


def _compare_outputs(expected: IndexerOutputs, actual: IndexerOutputs) -> tuple[int, int, Mismatch | None, str]:
    """(differing elements, total elements, first mismatch, shape/dtype problem)."""
    diff_total, total, first = 0, 0, None
    for name in _members.OUTPUT_NAMES:
        e, a = getattr(expected, name), getattr(actual, name)
        if e is None:
            continue
        if a is None or np.shape(a) != e.shape or np.asarray(a).dtype.itemsize != e.dtype.itemsize:
            got = "missing" if a is None else f"shape {np.shape(a)} dtype {np.asarray(a).dtype}"
            return 0, 0, (name, ()), f"{name}: {got}, expected shape {e.shape} dtype {e.dtype}"
        differ = differing(e, np.asarray(a))
        count = int(np.count_nonzero(differ))
        diff_total += count
        total += differ.size
        if count and first is None:
            first = (name, tuple(int(i) for i in np.argwhere(differ)[0]))
    return diff_total, total, first, ""
