"""mxgate identify's probes of the three ops whose real backends need ``--device cuda``
(sglang's paged FP4 scorer and index_k_rope_pack, AITER's kv_fp4_preshuffle_layout), run on the
CPU with kernels built from the oracle's functions (tests/user_backends/identify_cuda_op_kernels.py):
the oracle's model named (or consistent), a planted wrong one caught; and the real backends on
the CPU say they need cuda."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mxgate.identify import report
from mxgate.identify.run import MATCH, UNEXPLAINED, identify
from mxgate.op_table import OpName
from mxgate.oracle import profiles

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "user_backends"))  # the workers (spawned) inherit sys.path

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PAGED, ROPE_PACK, KV_LAYOUT = (OpName.SGLANG_FP4_INDEX_LOGITS_PAGED, OpName.SGLANG_INDEX_K_ROPE_PACK,
                               OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT)


def _identified(name: str):
    result = identify(f"identify_cuda_op_kernels:{name}")
    (op,) = result.ops
    return result, op


def test_paged_scorer_oracle_named_and_byte0_decided() -> None:
    result, op = _identified("paged_ok")
    assert (op.op, op.status, result.status) == (PAGED, MATCH, 0)
    assert "threshold" in op.inference.matches and op.scorer.exact == op.scorer.cells > 0
    assert op.inference.fields["byte0"].decided  # by the special-bytes call (ratio 2)
    assert len(op.scorer.calls) == 2 and op.scorer.calls[1].endswith("ratio 2")


def test_paged_scorer_scaled_is_unexplained() -> None:
    result, op = _identified("paged_scaled")
    assert (op.status, result.status) == (UNEXPLAINED, 1) and op.inference.matches == []
    assert "outside the bound" in "\n".join(report.text(result))


def test_rope_pack_oracle_model_named_by_sglang_rne() -> None:
    result, op = _identified("rope_pack_ok")
    assert (op.op, op.status, result.status) == (ROPE_PACK, MATCH, 0)
    assert "sglang-rne" in op.inference.matches and op.inference.fields["tie"].consistent == ("even",)


def test_rope_pack_ties_toward_zero_named() -> None:
    _, op = _identified("rope_pack_ties_zero")
    inf = op.inference
    assert inf.fields["tie"].consistent == ("zero",)
    assert "sglang-rne" not in inf.matches  # the declared profile no longer explains the bytes
    for f, d in inf.fields.items():  # every other field read is the declared profile's
        if f != "tie" and d.read:
            assert getattr(profiles.get("sglang-rne"), f) in d.consistent, f


def test_kv_layout_reads_no_field_consistent() -> None:
    result, op = _identified("layout_ok")
    assert (op.op, op.status, result.status) == (KV_LAYOUT, MATCH, 0)
    assert not any(d.read for d in op.inference.fields.values())
    assert "reads no profile field; the backend's bytes match the oracle: consistent" in "\n".join(report.text(result))


def test_kv_layout_swapped_scales_unexplained_and_shrunk_to_one_slot() -> None:
    result, op = _identified("layout_scales_swapped")
    assert (op.status, result.status) == (UNEXPLAINED, 1) and op.inference.matches == []
    s = op.shrunk
    assert s.cases.shape == (1, 68) and op.driver.unit_name(s.unit) in ("e8m0[0]", "e8m0[1]")
    assert s.backend != s.expected


@pytest.mark.parametrize("backend,ops", [("sglang-triton", [PAGED, ROPE_PACK])])
def test_real_backends_on_the_cpu_need_cuda(backend: str, ops: list[str]) -> None:
    result = identify(backend, ops)
    if any(op == "*" for op, _ in result.not_run):
        pytest.skip(f"not supported here: {result.not_run[0][1]}")
    assert result.status == 5 and not result.ops
    assert sorted(op for op, _ in result.not_run) == sorted(ops)
    assert all("cuda" in why for _, why in result.not_run)
