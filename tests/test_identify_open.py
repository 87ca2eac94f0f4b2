"""mxgate identify agrees with the gate on the element codes SPEC 3 leaves open: on the ops the
gate judges with ``judge_mx_blocks``, units that differ only as element codes of 0xFF-scale
blocks are open (the op matches, exit 0); any other difference keeps the op unexplained.
Kernels: tests/user_backends/identify_open_kernels.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mxgate import oracle
from mxgate.conformance.judge import ACCEPTABLE, FAIL, judge_mx_blocks
from mxgate.identify import probes
from mxgate.op_table import OpName

HERE = Path(__file__).parent
USER_BACKENDS = HERE / "user_backends"
sys.path.insert(0, str(USER_BACKENDS))

import identify_open_kernels as planted  # noqa: E402
from identify_cli import run_identify  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

OPEN_LINE = "element unit(s) of 0xFF-scale blocks differ: SPEC 3 leaves them open (the gate rates this acceptable)"


_cli = run_identify


def _differing_codes(op: str, x: np.ndarray) -> int:
    """Element codes where the planted kernel and the oracle under gfx950 differ on blocks ``x``."""
    if op == OpName.MX_QUANTIZE:
        ours = oracle.unpack_nibbles(oracle.quantize_mx(x, planted.PROFILE)[0])
        theirs = oracle.unpack_nibbles(planted.mx_open(x)[0])
    else:
        ours = oracle.quantize_mx_e4m3fn(x, planted.PROFILE)[0]
        theirs = planted.mxfp8_open(x)[0]
    return int((ours.reshape(-1) != theirs.reshape(-1)).sum())


@pytest.fixture(scope="module")
def blocks() -> np.ndarray:
    """identify's probe blocks for these ops, as one float32 array."""
    return np.ascontiguousarray(probes.mx_blocks()).reshape(-1)


def test_the_gate_rates_the_planted_codes_acceptable_and_the_other_difference_fail(blocks) -> None:
    """What identify must agree with: ``judge_mx_blocks`` on identify's own probe blocks."""
    for reference, kernel in ((oracle.quantize_mx, planted.mx_open), (oracle.quantize_mx_e4m3fn, planted.mxfp8_open)):
        verdict = judge_mx_blocks(*reference(blocks, planted.PROFILE), kernel(blocks))
        assert verdict.verdict == ACCEPTABLE, (kernel, verdict)
    verdict = judge_mx_blocks(*oracle.quantize_mx(blocks, planted.PROFILE), planted.mx_open_and_one_more(blocks))
    assert verdict.verdict == FAIL, verdict


def test_codes_of_0xff_scale_blocks_are_open_and_the_ops_match(tmp_path: Path, blocks) -> None:
    out = tmp_path / "evidence.json"
    run = _cli("--backend", "identify_open_kernels:scale_255_codes", "--op", OpName.MX_QUANTIZE,
               "--op", OpName.MX_QUANTIZE_E4M3FN, "--json", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert [op["op"] for op in doc["ops"]] == [OpName.MX_QUANTIZE, OpName.MX_QUANTIZE_E4M3FN]
    for op in doc["ops"]:
        differing = _differing_codes(op["op"], blocks)
        assert differing > 0
        assert op["status"] == "match" and planted.PROFILE in op["matches"], (op["op"], op["status"])
        # counted against the profile the search settles on, which may explain a few planted codes
        units = op["open"]["units"]
        assert 0 < units <= differing and f"{units} {OPEN_LINE}" in run.stdout, (op["op"], units, differing)
        assert "unexplained" not in op and "register" not in op
        # only those codes decide nan_scale: the evidence they would give is left out
        nan_scale = op["fields"]["nan_scale"]
        assert not nan_scale["decided"] and nan_scale["left_open"], nan_scale
        # the other units still decide: the scale bytes reject a floor scale
        assert "floor" not in op["fields"]["scale_policy"]["consistent"], op["fields"]["scale_policy"]
    assert "undecided: nan_scale:" in run.stdout and "SPEC 3 leaves those open" in run.stdout


def test_a_difference_outside_those_codes_keeps_the_op_unexplained(tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    run = _cli("--backend", "identify_open_kernels:scale_255_codes_and_one_more", "--op", OpName.MX_QUANTIZE,
               "--json", str(out))
    assert run.returncode == 1, run.stdout + run.stderr
    (op,) = json.loads(out.read_text())["ops"]
    assert op["status"] == "unexplained" and "open" not in op and OPEN_LINE not in run.stdout
    assert op["unexplained"]["units"] > 0
    shrunk = op["unexplained"]["shrunk"]  # the planted flip: element 31's lowest code bit
    assert shrunk["unit"] == "nibbles[31]", shrunk
    assert int(shrunk["output"], 16) ^ int(shrunk["expected_closest"], 16) == 1, shrunk
