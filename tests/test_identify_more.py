"""mxgate identify on vLLM's paged top-k ops, AITER's ragged FP8 scorer and its FP8 K cache
writer: kernels built from the oracle are named by their declared profile, a planted profile
field is named (and the declared profile is not), a planted rule no field describes is
unexplained. Kernels: tests/user_backends/identify_more_kernels.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mxgate.identify.run import MATCH, UNEXPLAINED, identify
from mxgate.op_table import OpName
from mxgate.oracle import profiles

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "user_backends"))  # the workers (spawned) inherit sys.path

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TOPS = (OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK, OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK)
FP8_RAGGED, K_CACHE = OpName.AITER_FP8_MQA_LOGITS, OpName.AITER_INDEXER_K_QUANT_AND_CACHE
_RESULTS: dict[str, object] = {}
# the tests that read one cached result run on one xdist worker, so it is made once
_NO_ROUND, _K_OK = pytest.mark.xdist_group("identify-k-cache-no-round"), pytest.mark.xdist_group("identify-k-cache-ok")


def _identified(name: str):
    if name not in _RESULTS:
        _RESULTS[name] = identify(f"identify_more_kernels:{name}")
    return _RESULTS[name]


@pytest.mark.parametrize("name,ops", [("topk_ok", TOPS), ("fp8_ragged_ok", (FP8_RAGGED,)),
                                      pytest.param("k_cache_ok", (K_CACHE,), marks=_K_OK)])
def test_oracle_kernels_named_by_their_declared_profile(name: str, ops: tuple[str, ...]) -> None:
    result = _identified(name)
    assert [o.op for o in result.ops] == list(ops) and result.status == 0
    for op in result.ops:
        assert op.status == MATCH and op.declared == "gfx950" and "gfx950" in op.inference.matches, (op.op, op.cause)


def test_topk_byte0_planted_is_named_with_its_evidence() -> None:
    result = _identified("topk_byte0_zero")
    assert [o.op for o in result.ops] == list(TOPS)
    for op in result.ops:
        d = op.inference.fields["byte0"]
        assert d.decided and d.value == "zero", (op.op, d)
        # the registered profiles reading scale byte 0 as 0 (triton-dot-scaled, sglang-cuda-scorer), no other
        assert "triton-dot-scaled" in op.inference.matches and "gfx950" not in op.inference.matches
        assert all(profiles.get(n).byte0 == "zero" for n in op.inference.matches), op.inference.matches
        proof = next(e for e in d.evidence if e.rejected == "pow2")
        # the short-context special call: under pow2 the oracle's set holds tokens the backend left out
        assert "batch 0's context 19" in proof.where and proof.backend == 0 < proof.under_rejected, proof


@pytest.mark.parametrize("name,op,field", [("fp8_ragged_fnuz", FP8_RAGGED, "fp8_variant"),
                                           ("k_cache_fnuz", K_CACHE, "fp8_variant")])
def test_fp8_variant_planted_is_named(name: str, op: str, field: str) -> None:
    (found,) = _identified(name).ops
    assert found.op == op and found.status == MATCH
    d = found.inference.fields[field]
    assert d.decided and d.value == "fnuz" and d.evidence
    assert found.inference.matches == ["aiter-gfx942"], found.inference.matches  # the only fnuz profile


@pytest.mark.parametrize("name,ops", [("topk_lowest", TOPS), ("fp8_ragged_scaled", (FP8_RAGGED,)),
                                      pytest.param("k_cache_no_round", (K_CACHE,), marks=_NO_ROUND)])
def test_planted_rule_no_field_describes_is_unexplained(name: str, ops: tuple[str, ...]) -> None:
    result = _identified(name)
    assert [o.op for o in result.ops] == list(ops) and result.status == 1
    for op in result.ops:
        assert op.status == UNEXPLAINED and op.inference.unexplained > 0, (op.op, op.status, op.cause)
        assert op.inference.matches == []


@_NO_ROUND
def test_k_cache_unexplained_row_is_shrunk() -> None:
    (found,) = _identified("k_cache_no_round").ops
    assert found.shrunk is not None and found.shrunk.cases.shape == (1, 128)
    assert found.shrunk.backend != found.shrunk.expected


@_K_OK
def test_k_cache_fields_the_probes_cannot_separate_are_said_so() -> None:
    """No bf16 K row overflows e4m3fn once its scale is amax / 448 rounded up, so 'nan' and
    'saturate' give the same bytes; 'satfinite' is rejected by a row holding an Inf (Inf / Inf
    is a NaN whose sign 'satfinite' does not keep); a bf16 subnormal amax decides the rounding."""
    (found,) = _identified("k_cache_ok").ops
    d = found.inference.fields["fp8_overflow"]
    assert not d.decided and set(d.consistent) == {"nan", "saturate"}
    assert found.inference.fields["ue8m0_rounding"].decided
