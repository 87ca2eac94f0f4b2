"""Conformance of the AITER ops the other suites do not cover (mxgate.kernels.aiter_triton and
aiter_reference), for any backend that implements them.

Each op is judged under its declared profile (or ``--profile``) against the oracle:

* MX quantizers with mx.quantize's signature (``aiter.fused_*``, ``aiter.ref_quant_mxfp4.*``,
  ``aiter.fp4_quant_e2m1_with_e8m0``, ``aiter.fp4_act_quant``): the scale boundary blocks, the
  extreme-amax blocks, NaN and Inf blocks and Hypothesis blocks of test_elements, plus a tie probe (every E2M1 midpoint, both signs, and
  -0 at scale 2^0);
* ``aiter.f32_to_mx_e8m0_scale.*``: every positive bf16 pattern, the float32 boundary classes
  and every float32 just below the subnormal/normal edge, NaN and Inf;
* ``e2m1.decode``: the 16 codes;
* layout builders against the oracle's layouts (zero-filled buffers, as the builders make them);
* ``aiter.ref_mqa_logits_mixed`` and ``aiter.fp8_mqa_logits`` against the exact value and
  rigorous bound of the FP4 / FP8 scorers (any qk summation order);
* ``aiter.indexer_k_quant_and_cache`` against ``mxgate.oracle.ops.indexer_k`` (the oracle's
  ue8m0 token scale, e4m3 encoder and FP8 cache layouts).
Seeds are in every config id.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.op_table import OpName
from mxgate.oracle.geometry import HEAD_DIM, KV_BLOCK
from mxgate import oracle
from mxgate.conformance.hypothesis_settings import search
from mxgate.conformance.judge import EXACT, Verdict, combine, compare_arrays, compare_logits, judge_mx_quantize
from mxgate.conformance.judge import logits_verdict as _logits_verdict
from mxgate.oracle import layouts
from mxgate.inputs import aiter_fp8
from mxgate.inputs import logits as lc
from mxgate.inputs.boundaries import (E2M1_MIDPOINTS, extreme_amax_blocks, in_rms_contract, nonfinite_blocks,
                                      scale_blocks, scale_inputs)
from mxgate.inputs.boundaries import tie_probe
from mxgate.inputs.strategies import float_blocks, rms_blocks
from mxgate.oracle import scorers as logits
from mxgate.oracle.ops import indexer_k

MX_OPS = (OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT, OpName.AITER_REF_QUANT_MXFP4_ROUND_DOWN, OpName.AITER_REF_QUANT_MXFP4_EVEN,
          OpName.AITER_REF_QUANT_MXFP4_CEIL, OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0, OpName.AITER_FP4_ACT_QUANT)
RMS_OP = OpName.AITER_FUSED_RMS_MXFP4_QUANT
SCALE_OPS = tuple(f"aiter.f32_to_mx_e8m0_scale.{m}" for m in ("round_down", "round_up", "even", "ceil"))


def _params(ops: tuple[str, ...]):
    return [pytest.param(op, marks=pytest.mark.mxgate_op(op), id=op) for op in ops]


def _profile(backend, op: str, override: str | None) -> str:
    return override or backend.op(op).profile


# ---- MX quantizers --------------------------------------------------------------------------


@pytest.mark.parametrize("op", _params(MX_OPS))
def test_mx_like_boundaries(backend, record, profile_override, op: str) -> None:
    profile = _profile(backend, op, profile_override)
    run = backend.op(op).run
    x = scale_blocks()
    record(op, "scale-boundary-blocks", judge_mx_quantize(x, profile, run(x)), profile=profile)
    t = tie_probe()
    record(op, "tie-probe-scale-2^0", judge_mx_quantize(t, profile, run(t)), profile=profile)


@pytest.mark.parametrize("op", _params(MX_OPS))
def test_mx_like_extreme_blocks(backend, record, profile_override, op: str) -> None:
    profile = _profile(backend, op, profile_override)
    x = extreme_amax_blocks()
    record(op, "extreme-amax-blocks", judge_mx_quantize(x, profile, backend.op(op).run(x)), profile=profile)


@pytest.mark.parametrize("op", _params(MX_OPS))
def test_mx_like_nonfinite_blocks(backend, record, profile_override, op: str) -> None:
    """A NaN of either sign, a payload NaN and both Infs as the amax (identify found a reference
    whose NaN blocks get scale byte 0x00, which these configs did not hold)."""
    profile = _profile(backend, op, profile_override)
    x = nonfinite_blocks()
    record(op, "nonfinite-blocks", judge_mx_quantize(x, profile, backend.op(op).run(x)), profile=profile)


@pytest.mark.parametrize("op", _params(MX_OPS))
def test_mx_like_hypothesis(backend, record, profile_override, tier, op: str) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis blocks run from the default tier on")
    _hypothesis_blocks(backend, record, profile_override, op, float_blocks())


def _hypothesis_blocks(backend, record, profile_override, op: str, strategy) -> None:
    profile = _profile(backend, op, profile_override)
    run = backend.op(op).run
    seen, failed = search(strategy, lambda x: judge_mx_quantize(x, profile, run(x)), lambda v: not v.passed)
    record(op, "hypothesis-blocks", seen[-1] if failed else Verdict(EXACT), profile=profile)


@pytest.mark.mxgate_op(RMS_OP)
def test_fused_rms_identity(backend, record, profile_override, tier) -> None:
    profile = _profile(backend, RMS_OP, profile_override)
    run = backend.op(RMS_OP).run
    x = in_rms_contract(scale_blocks())
    record(RMS_OP, "scale-boundary-blocks-in-contract", judge_mx_quantize(x, profile, run(x)), profile=profile)
    t = tie_probe()
    record(RMS_OP, "tie-probe-scale-2^0", judge_mx_quantize(t, profile, run(t)), profile=profile)
    if tier != "quick":
        _hypothesis_blocks(backend, record, profile_override, RMS_OP, rms_blocks())


# ---- e8m0 scale and e2m1 decode -------------------------------------------------------------


@pytest.mark.parametrize("op", _params(SCALE_OPS))
def test_e8m0_scale_modes(backend, record, profile_override, op: str) -> None:
    profile = _profile(backend, op, profile_override)
    amax = scale_inputs()
    record(op, "bf16-and-subnormal-edge", compare_arrays(oracle.e8m0_scale(amax, profile),
                                                         np.asarray(backend.op(op).run(amax)), "e8m0"), profile=profile)


@pytest.mark.mxgate_op(OpName.E2M1_DECODE)
def test_e2m1_decode(backend, record, profile_override) -> None:
    profile = _profile(backend, OpName.E2M1_DECODE, profile_override)
    codes = np.arange(16, dtype=np.uint8)
    verdict = compare_arrays(oracle.decode_e2m1(codes), np.asarray(backend.op(OpName.E2M1_DECODE).run(codes)), "values")
    record(OpName.E2M1_DECODE, "all-16-codes", verdict, profile=profile)


# ---- layout builders ------------------------------------------------------------------------

PAGED_KV = OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4
KV_LAYOUT = OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT
Q_SCALE = OpName.AITER_DSV4_SHUFFLE_SCALE


def _kv_bits(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """bf16 K rows with E2M1 midpoints and -0 planted after a group amax of 6 (scale 2^0)."""
    rng = lc.rng_for(seed)
    x = lc.bf16_values(rng, shape)
    planted = rng.choice(np.float32(E2M1_MIDPOINTS + (-0.0,)), size=shape) * np.where(rng.random(shape) < 0.5, -1, 1)
    x = np.where(rng.random(shape) < 0.25, planted.astype(np.float32), x)
    x[..., ::32] = 6.0
    return oracle.bf16_bits(x.astype(np.float32))


@pytest.mark.mxgate_op(PAGED_KV)
@pytest.mark.parametrize("batch,blocks", [(1, 1), (2, 2), (3, 1)], ids=lambda v: str(v))
def test_create_paged_preshuffle_kv_fp4(backend, record, profile_override, batch: int, blocks: int) -> None:
    profile = _profile(backend, PAGED_KV, profile_override)
    seed = 9100 + batch * 10 + blocks
    rng = lc.rng_for(seed)
    T, D = blocks * KV_BLOCK, HEAD_DIM
    bits = _kv_bits(seed, (batch, T, D))
    num_blocks = batch * blocks + 2
    table = rng.permutation(num_blocks)[: batch * blocks].reshape(batch, blocks).astype(np.int32)
    got = backend.op(PAGED_KV).run(bits, KV_BLOCK, num_blocks, table)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(bits.reshape(-1, D)), profile)
    t = np.arange(T)
    slots = (table[:, t // KV_BLOCK].astype(np.int64) * KV_BLOCK + t % KV_BLOCK).reshape(-1)
    cache = layouts.get("aiter-fp4-kv").new_buffer(fill=0, num_blocks=num_blocks)
    scale = layouts.get("aiter-fp4-kv-scale").new_buffer(fill=0, num_blocks=num_blocks)
    layouts.get("aiter-fp4-kv").scatter(cache, packed, slots=slots)
    layouts.get("aiter-fp4-kv-scale").scatter(scale, e8m0, slots=slots)
    expected = (cache, scale, packed.reshape(batch, T, D // 2), e8m0.reshape(batch, T, D // 32))
    names = ("kv_cache", "kv_scale", "kv_fp4", "kv_e8m0")
    verdict = combine([compare_arrays(e, np.asarray(a), n) for e, a, n in zip(expected, got, names)])
    record(PAGED_KV, f"b{batch}_blocks{blocks}_seed{seed}", verdict, seed=seed, profile=profile)


@pytest.mark.mxgate_op(KV_LAYOUT)
def test_kv_fp4_preshuffle_layout(backend, record, profile_override) -> None:
    profile = _profile(backend, KV_LAYOUT, profile_override)
    seed = 9200
    rng = lc.rng_for(seed)
    num_blocks, tokens = 4, 150
    data = rng.integers(0, 256, (tokens, 64), dtype=np.uint8)
    scales = rng.integers(0, 256, (tokens, 4), dtype=np.uint8)
    slots = rng.permutation(num_blocks * KV_BLOCK)[:tokens].astype(np.int64)
    slots[::7] = -1  # padded tokens are skipped
    cache, scale = backend.op(KV_LAYOUT).run(data, scales, KV_BLOCK, slots, num_blocks)
    want_c = layouts.get("aiter-fp4-kv").new_buffer(fill=0, num_blocks=num_blocks)
    want_s = layouts.get("aiter-fp4-kv-scale").new_buffer(fill=0, num_blocks=num_blocks)
    layouts.get("aiter-fp4-kv").scatter(want_c, data, slots=slots)
    layouts.get("aiter-fp4-kv-scale").scatter(want_s, scales, slots=slots)
    verdict = combine([compare_arrays(want_c, np.asarray(cache), "kv_cache"),
                       compare_arrays(want_s, np.asarray(scale), "kv_scale")])
    record(KV_LAYOUT, f"T{tokens}_nb{num_blocks}_seed{seed}", verdict, seed=seed, profile=profile)


@pytest.mark.mxgate_op(Q_SCALE)
@pytest.mark.parametrize("heads", [16, 32, 64, 80])
def test_dsv4_shuffle_scale(backend, record, profile_override, heads: int) -> None:
    profile = _profile(backend, Q_SCALE, profile_override)
    seed = 9300 + heads
    tokens = 5
    scale = lc.rng_for(seed).integers(0, 256, (tokens, heads, 4), dtype=np.uint8)
    lay = layouts.get("aiter-fp4-q-scale")
    want = lay.new_buffer(fill=0, num_tokens=tokens, num_heads=heads)
    lay.scatter(want, scale, num_heads=heads)
    got = np.asarray(backend.op(Q_SCALE).run(scale))
    record(Q_SCALE, f"T{tokens}_H{heads}_seed{seed}", compare_arrays(want, got, "q_scale"), seed=seed, profile=profile)


# ---- scorer references ----------------------------------------------------------------------

MIXED = OpName.AITER_REF_MQA_LOGITS_MIXED
FP8_RAGGED = OpName.AITER_FP8_MQA_LOGITS


@pytest.mark.mxgate_op(MIXED)
@pytest.mark.parametrize("cfg", [(2, 300, 1, 64), (2, 256, 2, 32), (3, 129, 1, 16)],
                         ids=lambda c: "b{}_ctx{}_n{}_h{}".format(*c))
def test_ref_mqa_logits_mixed(backend, record, cfg, oracle_on_device) -> None:
    B, ctx, next_n, H = cfg
    seed = 9400 + B + ctx + next_n + H
    case = lc.fp4_decode_case(seed, B, ctx, next_n, H)
    scored = oracle_on_device(logits.pa_mqa_logits_fp4_scored)(**case.kwargs, bound_model="any-order")
    width = case.kwargs["max_seq_len"]
    T = case.k_codes.shape[1]
    kv_fp4 = np.zeros((B, width, 64), np.uint8)
    kv_scale = np.zeros((B, width, 4), np.uint8)
    kv_fp4[:, :T] = oracle.pack_nibbles(case.k_codes)
    kv_scale[:, :T] = case.k_e8m0
    got = backend.op(MIXED).run(oracle.pack_nibbles(case.q_codes).reshape(B, next_n, H, 64),
                                case.q_e8m0.reshape(B, next_n, H, 4), kv_fp4, kv_scale, case.weights,
                                case.kwargs["context_lens"], next_n=next_n,
                                weight_scale=case.kwargs["weight_scale"])
    verdict = _logits_verdict(compare_logits(scored, np.asarray(got, np.float32), fill=-np.inf))
    record(MIXED, "b{}_ctx{}_n{}_h{}".format(*cfg) + f"_seed{seed}", verdict, seed=seed, profile="gfx950")


def fp8_ragged_case(seed: int, rows: int, kv_len: int, heads: int, oracle_on_device) -> tuple[dict, logits.ScoredLogits]:
    """fp8_mqa_logits inputs and the oracle's answer (``mxgate.inputs.aiter_fp8``), the oracle
    run where the gate runs it."""
    case = aiter_fp8.fp8_ragged_case(seed, rows, kv_len, heads)
    return case.kwargs, aiter_fp8.fp8_ragged_scored(case, scorer=oracle_on_device(logits.pa_mqa_logits_fp8_scored))


@pytest.mark.mxgate_op(FP8_RAGGED)
@pytest.mark.parametrize("cfg", [(24, 300, 32), (16, 512, 64), (9, 70, 16)], ids=lambda c: "s{}_kv{}_h{}".format(*c))
def test_fp8_mqa_logits(backend, record, cfg, oracle_on_device) -> None:
    seed = 9500 + sum(cfg)
    kwargs, scored = fp8_ragged_case(seed, *cfg, oracle_on_device)
    got = np.asarray(backend.op(FP8_RAGGED).run(**kwargs), np.float32)
    verdict = _logits_verdict(compare_logits(scored, got, fill=-np.inf))
    record(FP8_RAGGED, "s{}_kv{}_h{}".format(*cfg) + f"_seed{seed}", verdict, seed=seed, profile="gfx950")


# ---- indexer K quant-and-cache reference ----------------------------------------------------

INDEXER_K = OpName.AITER_INDEXER_K_QUANT_AND_CACHE


@pytest.mark.mxgate_op(INDEXER_K)
@pytest.mark.parametrize("preshuffle", [False, True], ids=["planar", "preshuffle"])
@pytest.mark.parametrize("tokens,block", [(40, 16), (70, 64)], ids=lambda v: str(v))
def test_indexer_k_quant_and_cache(backend, record, profile_override, tokens: int, block: int,
                                   preshuffle: bool) -> None:
    profile = _profile(backend, INDEXER_K, profile_override)
    seed = 9600 + tokens + block + int(preshuffle)
    rng = lc.rng_for(seed)
    k = lc.bf16_values(rng, (tokens, 128)) * np.exp2(rng.integers(-8, 8, (tokens, 1))).astype(np.float32)
    bits = oracle.bf16_bits(k.astype(np.float32))
    num_blocks = -(-tokens // block) + 1
    cache = layouts.get("aiter-fp8-kv").new_buffer(num_blocks=num_blocks, block_size=block)
    slots = rng.permutation(num_blocks * block)[:tokens].astype(np.int64)
    slots[::9] = -1
    got = np.asarray(backend.op(INDEXER_K).run(bits, cache, slots, 128, "ue8m0", preshuffle=preshuffle))
    want = indexer_k.indexer_k_quant_and_cache(bits, cache, slots, preshuffle=preshuffle, profile=profile)
    record(INDEXER_K, f"T{tokens}_B{block}_{'preshuffle' if preshuffle else 'planar'}_seed{seed}",
           compare_arrays(want, got, "kv_cache"), seed=seed, profile=profile)
