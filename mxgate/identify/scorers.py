"""The scorer ops: fixed probe calls, judged within the oracle's rigorous bound.

A scorer's output is a float32 score per (row, token) cell, not bytes: a cell is *explained*
by a profile when it equals the oracle's emulated order bit for bit, lies within the bound of
the oracle's value, or has the value's non-finite class (``mxgate.oracle.scorers.cells``, the
rule the gate's ``compare_logits`` reads too, on the window cells). The fields a scorer reads
are the ones its oracle function takes from the profile (``ScorerDriver.fields``: the e8m0
byte-0 and byte-255 rules, the FP8 variant); every combination of their candidate values is tried. Each op has two calls: a seeded random
case from ``mxgate.inputs``, and (FP4 scorers) a *special bytes* case where batch 0's tokens
0, 1 and 2 carry a K scale byte 0 beside Q scale 250, a Q scale byte 0 beside K scale 250, and
a K scale byte 255, every other code of those groups 0 (so that no other term hides theirs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from mxgate import oracle
from mxgate.identify import candidates
from mxgate.identify.search import CANDIDATE, Evidence, FieldDecision, Inference
from mxgate.kernels.isolation import UNSTABLE_BITS, BackendNondeterministic
from mxgate.inputs import aiter_fp8
from mxgate.inputs import logits as lc
from mxgate.inputs import vllm as vc
from mxgate.op_table import OpName
from mxgate.oracle import profiles, scorers
from mxgate.oracle.geometry import GROUP, HEAD_DIM
from mxgate.oracle.profiles import Profile
from mxgate.oracle.scorers import cells, choices
from mxgate.oracle.scorers import vllm as lv
from mxgate.oracle.scorers.common import ScoredLogits

SEED = 0x1D25  # issue 25 (mxgate.identify.probes.SEED)
_E2M1_ONE, _SMALL = lc.E2M1_ONE, lc.SPECIAL_SMALL
_FALLBACK = "gfx950"  # the base profile of a backend that declares an unregistered one


@dataclass(frozen=True)
class ScorerDriver:
    op: str
    fields: tuple[str, ...]  # the profile fields the oracle's scorer reads
    calls: Callable[[Profile], list[tuple[str, dict[str, Any]]]]  # declared profile -> (what, kwargs)
    call: Callable[[Callable[..., Any], dict[str, Any]], np.ndarray]  # run, kwargs -> logits (or top-k indices)
    reference: Callable[[Profile, dict[str, Any]], ScoredLogits]
    judge: Callable[[list[ScoredLogits], list[np.ndarray]], _Judged] | None = None  # None: the logits' cell rule
    units: str = "window cells"  # what the judge's units are, in the report


@dataclass
class ScorerFinding:
    """What the calls showed, beside the fields' decisions (``Inference``)."""

    calls: list[str]
    cells: int  # units judged: window cells (logits) or rows (top-k)
    exact: int  # bit-equal to the emulated order (a top-k row: the oracle's own set) under the best profile
    within: int  # the others explained (within the bound, or the value's non-finite class; near-tie swaps)
    units: str = "window cells"
    first_unexplained: tuple[int, int, int] | None = None  # (call, row, column)
    first_text: str = ""


@dataclass
class _Judged:
    """Per call, over its units (window cells flat, row-major; a top-k op's rows): the verdict
    of each unit and what it shows. Logits: the backend's and the emulated float32 bits; top-k:
    per row the count of choices no admissible rounding allows (both lists), the oracle
    profile's own count, so a field whose value changes it is read."""

    windows: list[np.ndarray] = field(default_factory=list)  # bool [rows, width]
    explained: list[np.ndarray] = field(default_factory=list)
    exact: list[np.ndarray] = field(default_factory=list)
    backend: list[np.ndarray] = field(default_factory=list)  # float32 bits as int64
    emulated: list[np.ndarray] = field(default_factory=list)
    value: list[np.ndarray] = field(default_factory=list)
    bound: list[np.ndarray] = field(default_factory=list)
    kind: str = "f32"  # how a unit prints (drivers.show_unit)
    label: str = "logit"
    notes: list[dict[int, str]] = field(default_factory=list)  # per call, unit -> what went wrong there


def _judge(scored: list[ScoredLogits], actual: list[np.ndarray]) -> _Judged:
    """The gate's cell rule (``oracle.scorers.cells``) on each call's window cells."""
    out = _Judged()
    for s, a in zip(scored, actual):
        win = np.asarray(s.window, bool)
        if a.shape != win.shape:
            raise ValueError(f"the backend's logits have shape {a.shape}, the oracle's {win.shape}")
        classes = cells.classify_logits(s, a)
        emulated = np.asarray(s.emulated if s.emulated is not None else s.value, np.float32)[win]
        out.windows.append(win)
        out.explained.append(classes.explained[win])
        out.exact.append(classes.bit_equal[win])
        out.backend.append(a[win].view(np.uint32).astype(np.int64))
        out.emulated.append(emulated.view(np.uint32).astype(np.int64))
        out.value.append(np.asarray(s.value, np.float64)[win])
        out.bound.append(np.asarray(s.bound, np.float64)[win])
    return out


TOPK = 16  # inside both vLLM top-k wrappers' limits (at most 256; 8 tiles of cdiv(2k, block) blocks)


def _judge_topk(scored: list[ScoredLogits], actual: list[np.ndarray]) -> _Judged:
    """The gate's top-k rule (``oracle.scorers.choices``) per row: a row is explained when no
    choice is a genuine miss or invalid, exact when it is the oracle's own set."""
    out = _Judged(kind="count", label="choices no admissible rounding allows:")
    for s, a in zip(scored, actual):
        rows = s.value.shape[0]
        if a.shape != (rows, TOPK) or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"the backend's top-k indices are {a.dtype} {a.shape}, not int [{rows}, {TOPK}]")
        c = choices.classify_topk(s.value, s.bound, a.astype(np.int64), TOPK, window=s.window, max_misses=rows)
        wrong = (c.misses + c.invalid).astype(np.int64)
        first = {r: (oracle_col, chosen) for r, oracle_col, chosen in reversed(c.first_misses)}
        notes = {}
        for r in np.flatnonzero(wrong).tolist():
            text = f"row {r}: {int(c.misses[r])} genuine miss(es), {int(c.invalid[r])} invalid choice(s)"
            if r in first:
                col, chosen = first[r]
                text += (f"; column {col} ({float(s.value[r, col])!r} +- {float(s.bound[r, col])!r}) beats the chosen "
                         f"column {chosen} ({float(s.value[r, chosen])!r} +- {float(s.bound[r, chosen])!r})")
            notes[r] = text
        out.windows.append(np.ones((rows, 1), bool))
        out.explained.append(c.explained)
        out.exact.append(c.explained & (c.overlap == 1.0))
        out.backend.append(wrong)
        out.emulated.append(wrong)
        out.value.append(np.zeros(rows))
        out.bound.append(np.zeros(rows))
        out.notes.append(notes)
    return out


def _base(declared: str) -> Profile:
    return profiles.get(declared if declared in profiles.names() else _FALLBACK)


def identify_scorer(driver: ScorerDriver, run: Callable[..., Any], declared: str) -> tuple[Inference, ScorerFinding]:
    """The read fields' values that explain the backend's logits on the probe calls (the
    backend's calls raise what ``isolation`` raises: BackendNondeterministic, BackendFault)."""
    base = _base(declared)
    calls = driver.calls(base)
    actual = [np.asarray(driver.call(run, kwargs)) for _, kwargs in calls]
    judged: dict[tuple, _Judged] = {}

    def under(values: tuple) -> _Judged:
        if values not in judged:
            p = replace(base, name=CANDIDATE, **dict(zip(driver.fields, values)))
            with np.errstate(all="ignore"):
                judged[values] = (driver.judge or _judge)([driver.reference(p, kwargs) for _, kwargs in calls], actual)
        return judged[values]

    def wrong(values: tuple) -> int:
        return int(sum((~e).sum() for e in under(values).explained))

    own = tuple(getattr(base, f) for f in driver.fields)
    # a logit that differed between the repeat calls reaches us as isolation's UNSTABLE NaN: in
    # the window that is a backend answering one input two ways, not a field value to look for
    unstable = sum(int((a.view(np.uint32)[w] == UNSTABLE_BITS).sum()) for a, w in zip(actual, under(own).windows)
                   if a.dtype == np.float32)
    if unstable:
        raise BackendNondeterministic("", driver.op, f"nondeterministic: {unstable} logit(s) inside the window "
                                      "differed between calls of the same inputs")
    combos = [own] + [c for c in itertools.product(*(candidates.values(f) for f in driver.fields)) if c != own]
    best = min(combos, key=wrong)  # the declared profile's values first among equals
    ok = under(best)
    decisions: dict[str, FieldDecision] = {}
    for i, f in enumerate(driver.fields):
        consistent, evidence, read = [best[i]], [], False
        for v in candidates.values(f):
            if v == best[i]:
                continue
            other = under(best[:i] + (v,) + best[i + 1:])
            kept = 0
            rejected = False
            for c, (e_best, e_other) in enumerate(zip(ok.explained, other.explained)):
                read = read or bool((e_best != e_other).any() or (ok.emulated[c] != other.emulated[c]).any())
                deciding = np.flatnonzero(e_best & ~e_other)
                rejected = rejected or deciding.size > 0
                for cell in deciding[:2 - kept].tolist():
                    evidence.append(_evidence(f, v, calls, c, cell, ok, other))
                    kept += 1
            if not rejected:
                consistent.append(v)
        decisions[f] = FieldDecision(f, best[i], tuple(consistent), read, True, evidence)
    names = profiles.names()
    order = {n: k for k, n in enumerate(names)}

    def values_of(name: str) -> tuple:
        return tuple(getattr(profiles.get(name), f) for f in driver.fields)

    matches = [n for n in names if wrong(values_of(n)) == 0]
    read = [f for f, d in decisions.items() if d.read]

    def differing(name: str) -> list[str]:
        return [f for f in read if getattr(profiles.get(name), f) not in decisions[f].consistent]

    nearest = min(names, key=lambda n: (len(differing(n)), wrong(values_of(n)), n != declared, order[n]))
    diffs = differing(nearest)
    best_profile = replace(base, name=CANDIDATE, **dict(zip(driver.fields, best)))
    inferred = replace(profiles.get(nearest), name=CANDIDATE, **{f: getattr(best_profile, f) for f in diffs})
    unexplained = wrong(best)
    finding = ScorerFinding([what for what, _ in calls], sum(e.size for e in ok.explained),
                            int(sum(e.sum() for e in ok.exact)),
                            int(sum((e & ~x).sum() for e, x in zip(ok.explained, ok.exact))), driver.units)
    if unexplained:
        c = next(k for k, e in enumerate(ok.explained) if not e.all())
        cell = int(np.flatnonzero(~ok.explained[c])[0])
        row, col = (int(x) for x in np.argwhere(ok.windows[c])[cell])
        finding.first_unexplained = (c, row, col)
        finding.first_text = f"call {c} ({calls[c][0]}), " + (ok.notes[c][cell] if ok.notes else (
            f"row {row}, column {col}: the backend gives {show_f32(int(ok.backend[c][cell]))}; the oracle "
            f"{float(ok.value[c][cell])!r} +- {float(ok.bound[c][cell])!r}"))
    inference = Inference(best_profile, unexplained, None, decisions, matches, nearest,
                          {f: (getattr(inferred, f), getattr(profiles.get(nearest), f)) for f in diffs}, inferred,
                          len(judged))
    return inference, finding


def show_f32(bits: int) -> str:
    return f"0x{bits:08x} ({float(np.uint32(bits).view(np.float32))!r})"


def _evidence(f: str, v: object, calls: list, c: int, cell: int, ok: _Judged, other: _Judged) -> Evidence:
    row, col = (int(x) for x in np.argwhere(ok.windows[c])[cell])
    where = f"call {c} ({calls[c][0]}), row {row}" + (f", column {col}" if ok.kind == "f32" else "")
    return Evidence(f, v, row, col, int(ok.backend[c][cell]), int(ok.emulated[c][cell]), int(other.emulated[c][cell]),
                    side="scorer", call=c, where=where, unit_label=ok.label, kind=ok.kind)


# ---- the probe calls --------------------------------------------------------------------------


_RANDOM, _SPECIAL = f"random, seed {SEED:#x}", "special scale bytes 0, 250 and 255"
_DECODE_LENS = np.array([70, 40])


def _aiter_case(prefill: bool) -> tuple[Any, np.ndarray]:
    """The AITER FP4 scorers' seeded case and its per-batch context lengths."""
    if prefill:
        case = lc.fp4_prefill_case(SEED, 2, 96, 3, 16)
        return case, case.end.reshape(2, 3).max(axis=1)
    return lc.fp4_decode_case(SEED, 2, 96, 2, 16, context_lens=_DECODE_LENS), _DECODE_LENS


def _aiter_special(case: Any, lens: np.ndarray) -> tuple[dict[str, Any], tuple[np.ndarray, ...]]:
    """The special-bytes call of an AITER FP4 case: its keyword arguments, and the dense arrays
    they were scattered from (Q codes, Q scales, K codes, K scales, weights rounded to bf16)."""
    qc, qe, kc, ke, w = (a.copy() for a in (case.q_codes, case.q_e8m0, case.k_codes, case.k_e8m0, case.weights))
    lc.special_scale_bytes(qc, qe, kc[0], ke[0], w, np.flatnonzero(case.batch == 0))
    kv, ks = lc.scatter_kv(kc, ke, case.kwargs["block_tables"], lens, case.kwargs["kv_cache"].shape[0])
    q, qs = lc.scatter_q(qc, qe)
    kwargs = dict(case.kwargs, kv_cache=kv, kv_scale=ks, weights=oracle.bf16_bits(w),
                  q_fp4=q.reshape(case.kwargs["q_fp4"].shape), q_scale=qs.reshape(case.kwargs["q_scale"].shape))
    return kwargs, (qc, qe, kc, ke, oracle.bf16_to_f32(kwargs["weights"]))


def _aiter_fp4(prefill: bool) -> Callable[[Profile], list[tuple[str, dict[str, Any]]]]:
    def calls(_: Profile) -> list[tuple[str, dict[str, Any]]]:
        case, lens = _aiter_case(prefill)
        return [(_RANDOM, case.kwargs), (_SPECIAL, _aiter_special(case, lens)[0])]

    return calls


def _mixed_calls(_: Profile) -> list[tuple[str, dict[str, Any]]]:
    """AITER's ``ref_mqa_logits_mixed`` on the decode scorer's two calls, its K dense
    ([B, max_seq_len, 64] and [B, max_seq_len, 4], zero past each context), as the gate calls
    it: each call holds the ``mixed`` arguments and the ``decode`` ones its oracle reads."""
    case, lens = _aiter_case(False)
    dense = (case.q_codes, case.q_e8m0, case.k_codes, case.k_e8m0, case.weights)
    out = []
    for what, (decode, (qc, qe, kc, ke, w)) in ((_RANDOM, (case.kwargs, dense)), (_SPECIAL, _aiter_special(case, lens))):
        B, next_n, H = decode["q_fp4"].shape[:3]
        width, T = decode["max_seq_len"], kc.shape[1]
        kv_fp4 = np.zeros((B, width, HEAD_DIM // 2), np.uint8)
        kv_scale = np.zeros((B, width, HEAD_DIM // GROUP), np.uint8)
        kv_fp4[:, :T], kv_scale[:, :T] = oracle.pack_nibbles(kc), ke
        mixed = dict(q_packed=oracle.pack_nibbles(qc).reshape(B, next_n, H, HEAD_DIM // 2),
                     q_scale=qe.reshape(B, next_n, H, HEAD_DIM // GROUP), kv_fp4=kv_fp4, kv_scale=kv_scale,
                     weights=w, context_lens=decode["context_lens"], next_n=next_n,
                     weight_scale=decode["weight_scale"])
        out.append((what, dict(mixed=mixed, decode=decode)))
    return out


def _mixed_call(run, k):
    return run(**k["mixed"])


def _vllm_ragged_calls(_: Profile) -> list[tuple[str, dict[str, Any]]]:
    random = vc.fp4_ragged_case(SEED, 4, 40, 32, windows="causal").kwargs
    special = vc.fp4_ragged_special_case(SEED, 4, 40, 32).kwargs
    return [(f"random, seed {SEED:#x}", random), ("special scale bytes 0, 250 and 255", special)]


def _vllm_paged_calls(_: Profile) -> list[tuple[str, dict[str, Any]]]:
    random = vc.fp4_paged_case(SEED, 2, 2, 32, 96, spread=40).kwargs
    special = vc.fp4_paged_special_case(SEED, 2, 2, 32, 96).kwargs
    return [(f"random, seed {SEED:#x}, group scales up to 2^40 apart", random),
            ("special scale bytes 0, 250 and 255", special)]


def _sglang_calls(p: Profile) -> list[tuple[str, dict[str, Any]]]:
    """sglang's Q is bf16: the special case puts 2^100 in Q's group 0 beside a K row whose
    group 0 has scale byte 0 (and group 2 of another K row byte 255), the rest of those rows 0."""
    case = lc.sglang_decode_case(SEED, 2, 80, 16, profile=p.name if p.name in profiles.names() else _FALLBACK)
    k = case.kwargs
    lens = k["lens"].copy()
    lens[0] = k["slots"].shape[1]
    kc, ke = case.k_codes.copy(), case.k_e8m0.copy()
    q, w = case.q.copy(), case.weights.copy()
    first, third = k["slots"][0, 0], k["slots"][0, 2]
    kc[k["slots"][0], :GROUP] = 0
    kc[[first, third]] = 0
    kc[first, :GROUP] = _E2M1_ONE
    ke[first, 0] = _SMALL
    kc[third, 2 * GROUP:3 * GROUP] = _E2M1_ONE
    ke[third, 2] = 0xFF
    q[0, :, :GROUP] = np.float32(2.0**100)
    q[0, :, 2 * GROUP:3 * GROUP] = 1.0
    w[0] = np.abs(w[0]) + np.float32(0.0625)
    layout = oracle.layouts.get("sglang-page68")
    table = layout.new_buffer(num_pages=k["table"].shape[0], page_size=k["page_size"])
    layout.scatter(table, oracle.pack_nibbles(kc), np.ascontiguousarray(ke), page_size=k["page_size"])
    special = dict(k, q=oracle.bf16_bits(q), weights=oracle.bf16_bits(w), lens=lens, table=table)
    return [(f"random, seed {SEED:#x}", dict(k, lens=lens)), ("special scale bytes 0 and 255", special)]


def _sglang_call(run, k):
    return run(q_bf16=k["q"], weights_bf16=k["weights"], slots=k["slots"], lens=k["lens"], table=k["table"])


def _sglang_paged_calls(p: Profile) -> list[tuple[str, dict[str, Any]]]:
    """The decode scorer's two calls through a request-to-token table (its slots times the ratio
    at every ratio-th column of seeded request rows, one row unused): ratio 1, then 2."""
    out = []
    for ratio, (what, k) in zip((1, 2), _sglang_calls(p)):
        batch, width = k["slots"].shape
        req = np.random.Generator(np.random.PCG64(SEED + ratio)).permutation(batch + 1)[:batch].astype(np.int64)
        req_table = np.zeros((batch + 1, width * ratio), np.int32)
        req_table[req, ::ratio] = k["slots"] * ratio  # the kernel divides by the ratio
        paged = {name: k[name] for name in ("q", "weights", "lens", "table", "page_size")}
        out.append((f"{what}, ratio {ratio}", dict(paged, req=req, req_table=req_table, max_len=width, ratio=ratio)))
    return out


def _sglang_paged_call(run, k):
    return run(q_bf16=k["q"], weights_bf16=k["weights"], req=k["req"], req_table=k["req_table"], lens=k["lens"],
               table=k["table"], max_len=k["max_len"], ratio=k["ratio"])


def _sglang_paged_reference(p: Profile, k: dict[str, Any]) -> ScoredLogits:
    return scorers.fp4_index_logits_paged_scored(k["q"], k["weights"], k["req"], k["req_table"], k["lens"],
                                                 k["table"], k["page_size"], k["max_len"], k["ratio"], profile=p)


def _keywords(run, kwargs):
    return run(**kwargs)


def _clean(run, kwargs):
    return run(**kwargs, clean_logits=True)


def _fp8_ragged_calls(_: Profile) -> list[tuple[str, dict[str, Any]]]:
    """AITER's ragged FP8 scorer on one seeded case (``mxgate.inputs.aiter_fp8``: empty rows,
    windows clipped at both ends); the case travels beside the kwargs for the reference."""
    case = aiter_fp8.fp8_ragged_case(SEED, 12, 150, 16)
    return [(f"random, seed {SEED:#x}, rows clipped at both ends", dict(kwargs=case.kwargs, case=case))]


def _fp8_ragged_call(run, k):
    return run(**k["kwargs"])


def _topk_calls(p: Profile) -> list[tuple[str, dict[str, Any]]]:
    """The paged scorer's random call, and its special-bytes case with batch 0's context cut to
    k + 3 tokens of like magnitude (no spread): tokens 0 and 1 (K scale byte 0 beside Q scale
    2^123, and the reverse) then score about 56 under byte0 'pow2' and 0 under 'zero', which
    moves them in or out of the top-k set."""
    random = _vllm_paged_calls(p)[0]
    special = dict(vc.fp4_paged_special_case(SEED, 2, 2, 32, 96, spread=0).kwargs)
    lens = special["context_lens"].copy()
    lens[0] = TOPK + 3
    return [random, (f"special scale bytes 0, 250 and 255, batch 0's context {TOPK + 3}",
                     dict(special, context_lens=lens))]


def _topk_call(run, kwargs):
    return run(**kwargs, topk=TOPK)


def _topk_reference(p: Profile, kwargs: dict[str, Any]) -> ScoredLogits:
    return lv.fp4_paged_logits_scored(**kwargs, profile=p, emulate=False)


def _table() -> dict[str, ScorerDriver]:
    fp4 = ("byte0", "byte255")
    table = [
        ScorerDriver(OpName.PA_MQA_LOGITS_FP4_DECODE, fp4, _aiter_fp4(False), _keywords,
                     lambda p, k: scorers.pa_mqa_logits_fp4_scored(**k, profile=p)),
        ScorerDriver(OpName.PA_MQA_LOGITS_FP4_PREFILL, fp4, _aiter_fp4(True), _keywords,
                     lambda p, k: scorers.pa_mqa_logits_fp4_prefill_scored(**k, profile=p)),
        # the gate judges it against the decode scorer's oracle on the same codes
        ScorerDriver(OpName.AITER_REF_MQA_LOGITS_MIXED, fp4, _mixed_calls, _mixed_call,
                     lambda p, k: scorers.pa_mqa_logits_fp4_scored(**k["decode"], profile=p)),
        # the variant is the call's argument: the oracle reads no profile field
        ScorerDriver(OpName.PA_MQA_LOGITS_FP8_DECODE, (),
                     lambda p: [(f"random, seed {SEED:#x}", lc.fp8_decode_case(SEED, 2, 96, 2, 16).kwargs)],
                     _keywords, lambda p, k: scorers.pa_mqa_logits_fp8_scored(**k)),
        ScorerDriver(OpName.SGLANG_FP4_INDEX_LOGITS_DECODE, ("byte0",), _sglang_calls, _sglang_call,
                     lambda p, k: scorers.fp4_index_logits_decode_scored(**k, profile=p)),
        # the decode scorer's calls through a request table: only columns below min(lens, max_len) are
        # defined, which is the oracle's window
        ScorerDriver(OpName.SGLANG_FP4_INDEX_LOGITS_PAGED, ("byte0",), _sglang_paged_calls, _sglang_paged_call,
                     _sglang_paged_reference),
        ScorerDriver(OpName.VLLM_FP4_MQA_LOGITS, ("byte0",), _vllm_ragged_calls, _clean,
                     lambda p, k: lv.fp4_ragged_logits_scored(**k, profile=p)),
        ScorerDriver(OpName.VLLM_FP4_PAGED_MQA_LOGITS, ("byte0",),
                     _vllm_paged_calls, _clean, lambda p, k: lv.fp4_paged_logits_scored(**k, profile=p)),
        # the paged scorer's calls; its indices judged as sets, near-ties within the bound accepted
        ScorerDriver(OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK, ("byte0",), _topk_calls, _topk_call, _topk_reference,
                     _judge_topk, "rows"),
        ScorerDriver(OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK, ("byte0",), _topk_calls, _topk_call,
                     _topk_reference, _judge_topk, "rows"),
        # the codes are read as the platform's FP8 type (torch.float8_e4m3fn on gfx950): fp8_variant
        ScorerDriver(OpName.AITER_FP8_MQA_LOGITS, ("fp8_variant",), _fp8_ragged_calls, _fp8_ragged_call,
                     lambda p, k: aiter_fp8.fp8_ragged_scored(k["case"], variant=p.fp8_variant)),
        # Q and K codes are read as the platform's FP8 type: the profile's fp8_variant
        ScorerDriver(OpName.VLLM_FP8_PAGED_MQA_LOGITS, ("fp8_variant",),
                     lambda p: [(f"random, seed {SEED:#x}, {p.fp8_variant} codes",
                                 vc.fp8_paged_case(SEED, 2, 2, 32, 96, variant=p.fp8_variant).kwargs)],
                     _clean, lambda p, k: lv.fp8_paged_logits_scored(**k, variant=p.fp8_variant)),
    ]
    return {d.op: d for d in table}


SCORERS: dict[str, ScorerDriver] = _table()
