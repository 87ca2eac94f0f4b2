"""Conformance of paged MQA logits scorers (SPEC section 7) for any backend.

Verdicts: ``exact`` when every window cell is bit-equal to the oracle's emulated order and every
cell outside the window keeps the caller's fill; ``acceptable`` when the window cells differ but
lie inside the rigorous bound around the value (any float32 head order, qk model
"fp32-groups"); ``fail`` otherwise, naming the first cell. Every case is built from a
``numpy.random.Generator(PCG64(seed))``; the seed is in the config id and in every failure.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.op_table import OpName
from mxgate.conformance.hypothesis_settings import search
from mxgate.conformance.judge import ACCEPTABLE, EXACT, UNSUPPORTED, Verdict, combine, judge_logits
from mxgate.oracle import profiles
from mxgate.inputs import logits as lc
from mxgate.inputs.strategies import decode_ragged_params
from mxgate.oracle import scorers

DECODE = OpName.PA_MQA_LOGITS_FP4_DECODE
PREFILL = OpName.PA_MQA_LOGITS_FP4_PREFILL
FP8 = OpName.PA_MQA_LOGITS_FP8_DECODE
SGLANG_DECODE = OpName.SGLANG_FP4_INDEX_LOGITS_DECODE
SGLANG_PAGED = OpName.SGLANG_FP4_INDEX_LOGITS_PAGED

# AITER op_tests/test_flydsl_pa_mqa_logits_fp4.py: (batch, max_ctx, next_n, heads)
AITER_CONFIGS = [(2, 512, 1, 64), (3, 1024, 1, 64), (2, 512, 2, 64), (2, 768, 1, 128), (4, 2048, 1, 64)]
PREFILL_CONFIGS = [(2, 512, 4, 64, False), (3, 1024, 8, 64, False), (2, 768, 4, 128, False), (2, 600, 6, 32, True)]
POISON_BITS = 0x7FA5A5A5  # a NaN payload no kernel produces: untouched cells must keep it


def _op(backend, record, name: str):
    """The backend's op, or a 'not supported here' skip when the backend says this one op cannot
    run here (backends may answer ``available(op)``, e.g. CUDA-only kernels on a CPU run)."""
    try:
        status = backend.available(name)
    except TypeError:  # availability is per backend only
        status = None
    if status is not None and not status:
        record(name, "*", Verdict(UNSUPPORTED, status.reason))
        pytest.skip(f"not supported here: {backend.name}: {status.reason}")
    return backend.op(name)


def _profile(op, override: str | None) -> str:
    name = override or op.profile
    return name if name in profiles.names() else "gfx950"


def _poison(shape: tuple[int, int]) -> np.ndarray:
    out = np.empty(shape, np.float32)
    out.view(np.uint32)[:] = POISON_BITS
    return out


def _judge_fp4(op, scored: scorers.ScoredLogits, kwargs: dict) -> Verdict:
    """Two calls: a fresh output (-inf outside the window) and a poisoned one (kept outside)."""
    fresh = np.asarray(op.run(**kwargs))
    first = judge_logits(scored, fresh, fill=-np.inf)
    poisoned = _poison(scored.window.shape)
    got = op.run(**kwargs, out=poisoned)
    got = poisoned if got is None else np.asarray(got)
    second = judge_logits(scored, got, fill=_poison(scored.window.shape))
    return combine([first, second])


@pytest.mark.mxgate_op(DECODE)
@pytest.mark.parametrize("cfg", AITER_CONFIGS, ids=lambda c: "b{}_ctx{}_n{}_h{}".format(*c))
def test_decode_aiter_configs(backend, record, profile_override, cfg, oracle_on_device) -> None:
    op = _op(backend, record, DECODE)
    prof = _profile(op, profile_override)
    seed = 5000 + cfg[0] * 7 + cfg[1] + cfg[2] * 13 + cfg[3]
    case = lc.fp4_decode_case(seed, *cfg)
    scored = oracle_on_device(scorers.pa_mqa_logits_fp4_scored)(**case.kwargs, profile=prof)
    verdict = _judge_fp4(op, scored, case.kwargs)
    record(DECODE, "b{}_ctx{}_n{}_h{}".format(*cfg) + f"_seed{seed}", verdict, seed=seed, profile=prof)


@pytest.mark.mxgate_op(PREFILL)
@pytest.mark.parametrize("cfg", PREFILL_CONFIGS, ids=lambda c: "b{}_ctx{}_rows{}_h{}{}".format(*c[:4], "_random" if c[4] else ""))
def test_prefill_configs(backend, record, profile_override, cfg, oracle_on_device) -> None:
    op = _op(backend, record, PREFILL)
    prof = _profile(op, profile_override)
    B, ctx, rows, heads, random_windows = cfg
    seed = 6000 + B + ctx + rows + heads + int(random_windows)
    case = lc.fp4_prefill_case(seed, B, ctx, rows, heads, random_windows=random_windows)
    scored = oracle_on_device(scorers.pa_mqa_logits_fp4_prefill_scored)(**case.kwargs, profile=prof)
    verdict = _judge_fp4(op, scored, case.kwargs)
    record(PREFILL, f"b{B}_ctx{ctx}_rows{rows}_h{heads}{'_random' if random_windows else ''}_seed{seed}", verdict,
           seed=seed, profile=prof)


@pytest.mark.mxgate_op(DECODE)
def test_decode_ragged_hypothesis(backend, record, profile_override, tier, oracle_on_device) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    op = _op(backend, record, DECODE)
    prof = _profile(op, profile_override)
    def judge(params: tuple[int, int, int, list[int], int]) -> tuple[int, str, Verdict]:
        seed, next_n, heads, lens, spread = params
        case = lc.fp4_decode_case(seed, len(lens), 300, next_n, heads, context_lens=np.array(lens), spread=spread)
        scored = oracle_on_device(scorers.pa_mqa_logits_fp4_scored)(**case.kwargs, profile=prof)
        cid = f"lens{'-'.join(map(str, lens))}_n{next_n}_h{heads}_spread{spread}"
        return seed, cid, _judge_fp4(op, scored, case.kwargs)

    seen, failed = search(decode_ragged_params(), judge, lambda result: not result[2].passed)
    if failed:
        seed, cid, verdict = seen[-1]  # Hypothesis replays the shrunk example last
        record(DECODE, f"ragged-hypothesis_{cid}_seed{seed}", verdict, seed=seed, profile=prof)
        return
    worst = combine([v for _, _, v in seen]) if seen else Verdict(EXACT)
    reason = worst.reason or f"{len(seen)} examples, every one exact"
    if worst.verdict == ACCEPTABLE:
        reason = f"{len(seen)} examples; " + seen[[v.verdict for _, _, v in seen].index(ACCEPTABLE)][2].reason
    record(DECODE, "ragged-hypothesis", Verdict(worst.verdict, reason, total=worst.total), profile=prof)


@pytest.mark.mxgate_op(FP8)
@pytest.mark.parametrize("preshuffle", [False, True], ids=["planar", "preshuffle"])
@pytest.mark.parametrize("cfg", AITER_CONFIGS[:3], ids=lambda c: "b{}_ctx{}_n{}_h{}".format(*c))
def test_fp8_decode(backend, record, cfg, preshuffle, oracle_on_device) -> None:
    op = _op(backend, record, FP8)
    seed = 7000 + sum(cfg) + int(preshuffle)
    case = lc.fp8_decode_case(seed, *cfg, preshuffle=preshuffle)
    scored = oracle_on_device(scorers.pa_mqa_logits_fp8_scored)(**case.kwargs)
    fresh = np.asarray(op.run(**case.kwargs))
    verdict = judge_logits(scored, fresh, fill=-np.inf)
    record(FP8, "b{}_ctx{}_n{}_h{}".format(*cfg) + ("_preshuffle" if preshuffle else "") + f"_seed{seed}", verdict,
           seed=seed, profile="gfx950")


@pytest.mark.mxgate_op(SGLANG_DECODE)
@pytest.mark.parametrize("shape", [(4, 512, 64), (3, 1000, 32), (1, 130, 64)], ids=lambda s: "b{}_L{}_h{}".format(*s))
def test_sglang_decode(backend, record, profile_override, shape, oracle_on_device) -> None:
    op = _op(backend, record, SGLANG_DECODE)
    prof = profile_override or op.profile
    B, L, H = shape
    seed = 8000 + B + L + H
    case = lc.sglang_decode_case(seed, B, L, H, profile=prof)
    k = case.kwargs
    scored = oracle_on_device(scorers.fp4_index_logits_decode_scored)(**k, profile=prof)
    got = np.asarray(op.run(q_bf16=k["q"], weights_bf16=k["weights"], slots=k["slots"], lens=k["lens"], table=k["table"]))
    verdict = judge_logits(scored, got, fill=-np.inf)
    record(SGLANG_DECODE, f"b{B}_L{L}_h{H}_seed{seed}", verdict, seed=seed, profile=prof)


@pytest.mark.mxgate_op(SGLANG_PAGED)
@pytest.mark.parametrize("ratio", [1, 2])
def test_sglang_paged(backend, record, profile_override, ratio, oracle_on_device) -> None:
    op = _op(backend, record, SGLANG_PAGED)
    prof = profile_override or op.profile
    B, L, H = 3, 256, 64
    seed = 8100 + ratio
    case = lc.sglang_decode_case(seed, B, L, H, profile=prof)
    k = case.kwargs
    rng = lc.rng_for(seed)
    req = rng.permutation(B + 1)[:B]
    req_table = np.zeros((B + 1, L * ratio), np.int32)
    req_table[req, ::ratio] = k["slots"] * ratio  # the paged reader divides by ratio
    scored = oracle_on_device(scorers.fp4_index_logits_paged_scored)(k["q"], k["weights"], req, req_table, k["lens"], k["table"], 64, L,
                                                   ratio, profile=prof)
    got = np.asarray(op.run(q_bf16=k["q"], weights_bf16=k["weights"], req=req, req_table=req_table, lens=k["lens"],
                            table=k["table"], max_len=L, ratio=ratio))
    verdict = judge_logits(scored, got, fill=None)  # only positions below min(lens, L) are defined
    record(SGLANG_PAGED, f"b{B}_L{L}_h{H}_ratio{ratio}_seed{seed}", verdict, seed=seed, profile=prof)
