"""mxgate identify on the decoders, the page68 reader and the scorers: the oracle's functions
named by their declared profile (exit 0), a planted wrong kernel per op family reported as
unexplained (exit 1), a planted scorer field named, and an op with no
probes (exit 5, tests/user_backends/identify_more_kernels.py). Kernels: tests/user_backends/identify_reader_kernels.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mxgate.identify.run import INCONSISTENT, MATCH, UNEXPLAINED, identify

HERE = Path(__file__).parent
USER_BACKENDS = HERE / "user_backends"
sys.path.insert(0, str(USER_BACKENDS))  # the workers (spawned) inherit sys.path
from identify_cli import run_identify  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _spec(name: str) -> str:
    return f"identify_reader_kernels:{name}"


_cli = run_identify


@pytest.fixture(scope="module")
def ok_run() -> subprocess.CompletedProcess:
    return _cli("--backend", _spec("readers_ok"))


def test_oracle_functions_named_by_their_declared_profile_exit_0(ok_run) -> None:
    assert ok_run.returncode == 0, ok_run.stdout + ok_run.stderr
    for op in ("e2m1.decode", "e4m3fn.decode", "sglang-page68.gather", "aiter.dsv4_shuffle_scale",
               "pa_mqa_logits_fp4.decode", "vllm.fp4_mqa_logits"):
        assert f"] {op} (declared gfx950)" in ok_run.stdout, op
    assert ok_run.stdout.count("(declared profile among them)") == 6, ok_run.stdout
    # the readers read no field; the FP4 scorers' fields are decided by the special-bytes call
    assert ok_run.stdout.count("reads no profile field; the backend's bytes match the oracle: consistent") == 4
    assert "decided: byte0='pow2', byte255='nan'" in ok_run.stdout
    assert "decided: byte0='pow2'\n" in ok_run.stdout


@pytest.mark.parametrize("name,op", [("decode_saturating", "e4m3fn.decode"),
                                     ("gather_scales_reversed", "sglang-page68.gather"),
                                     ("shuffle_heads_swapped", "aiter.dsv4_shuffle_scale"),
                                     ("scorer_scaled", "pa_mqa_logits_fp4.decode")])
def test_planted_wrong_kernel_is_unexplained(name: str, op: str) -> None:
    result = identify(_spec(name))
    (found,) = result.ops
    assert (found.op, found.status, result.status) == (op, UNEXPLAINED, 1), (found.status, found.cause)
    assert found.inference.matches == []


def test_a_scorer_answering_two_ways_is_inconsistent() -> None:
    """The gate's repeat calls mark window cells that differed between calls with its UNSTABLE
    NaN; identify reports the scorer as inconsistent (exit 1), not as an unexplained field."""
    result = identify(_spec("scorer_flipping"))
    (found,) = result.ops
    assert (found.status, result.status) == (INCONSISTENT, 1), (found.status, found.cause)
    assert "differed between calls of the same inputs" in found.cause


def test_decoder_mismatch_is_shrunk_to_the_code() -> None:
    (found,) = identify(_spec("decode_saturating")).ops
    assert found.shrunk is not None and found.shrunk.cases.tolist() == [0x7F]  # 0x7F alone: 448, not NaN
    assert found.shrunk.backend == 0x43E00000  # 448.0


def test_planted_wrong_kernel_exit_1_on_the_command_line() -> None:
    run = _cli("--backend", _spec("gather_scales_reversed"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "unexplained:" in run.stdout and "first case, shrunk to an input of 1 block(s)" in run.stdout


def test_scorer_field_named_with_its_evidence() -> None:
    (found,) = identify(_spec("scorer_byte0_zero")).ops
    d = found.inference.fields["byte0"]
    assert d.decided and d.value == "zero" and found.inference.fields["byte255"].value == "nan"
    assert "gfx950" not in found.inference.matches and found.inference.matches == ["triton-dot-scaled"]
    proof = next(e for e in d.evidence if e.rejected == "pow2")
    assert "special scale bytes" in proof.where and proof.backend != proof.under_rejected


def test_an_op_that_cannot_run_here_is_status_5() -> None:
    run = _cli("--backend", "sglang-triton", "--op", "sglang.index_k_rope_pack")  # it needs --device cuda
    assert run.returncode == 5, run.stdout + run.stderr
    assert "not run here: sglang.index_k_rope_pack" in run.stdout and "needs device='cuda'" in run.stdout


def test_a_topk_kernel_answering_zeros_is_unexplained() -> None:
    """``topk_only`` gives column 0 k times: repeats no admissible set holds."""
    (found,) = identify(_spec("topk_only")).ops
    assert found.status == UNEXPLAINED and found.inference.matches == [], (found.status, found.cause)
    assert "invalid choice(s)" in found.scorer.first_text


def test_oracle_scorers_match_the_declared_profile() -> None:
    result = identify("oracle", ["pa_mqa_logits_fp4.prefill", "pa_mqa_logits_fp8.decode", "e4m3fnuz.decode"])
    for found in result.ops:
        assert found.status == MATCH and found.declared in found.inference.matches, (found.op, found.status)
    assert result.ops[0].scorer.exact == result.ops[0].scorer.cells
