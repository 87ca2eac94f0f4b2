"""The one raise a known finding expects is an expected failure under --xfail-known; no other fault is.

microxcaling's e2m1 encoder returns NaN for |y| >= 0x7F7FFFD4, for which no E2M1 code exists, so
its adapter raises NotACode (docs/findings/peers.md). These tests plant microxcaling checkouts
whose encoder is right except on huge inputs, where it does one of: return NaN (the finding),
return a wrong finite value, or raise. Only the first may exit 0, and only with --xfail-known.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxgate.conformance import known_findings, outcome
from mxgate.op_table import OpName

pytest.importorskip("torch", reason="the microxcaling adapter hands its peer torch tensors")

_FORMATS = '''
class ElemFormat:
    fp4_e2m1 = "fp4_e2m1"


def _get_format_params(fmt):
    return 2, 3, 2, 6.0, 1.0
'''

# Right on every input below 2^127 (the oracle under the microxcaling profile); HUGE on the rest.
_ELEMWISE = '''
import numpy as np
import torch
from mxgate import oracle


def _quantize_elemwise_core(A, bits, exp_bits, max_norm, round="nearest", saturate_normals=False,
                            allow_denorm=True):
    x = A.numpy().astype(np.float32)
    values = oracle.decode_e2m1(oracle.encode_e2m1(x, "microxcaling")).astype(np.float32)
    huge = np.abs(x) >= np.float32(2.0 ** 127)
    if huge.any():
{huge}
    return torch.from_numpy(values)
'''

HUGE = {
    "nan": "        values[huge] = np.nan",
    "finite": "        values[huge] = np.float32(7.0)",
    "raise": "        raise RuntimeError('planted: huge input')",
}


def _checkout(root: Path, huge: str) -> Path:
    mx = root / "mx"
    mx.mkdir(parents=True)
    (mx / "formats.py").write_text(_FORMATS)
    (mx / "specs.py").write_text("")
    (mx / "elemwise_ops.py").write_text(_ELEMWISE.replace("{huge}", HUGE[huge]))
    (mx / "mx_ops.py").write_text("from mx.elemwise_ops import _quantize_elemwise_core\n")
    return root


def _gate(tmp_path: Path, huge: str, *flags: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    work = tmp_path / f"run-{huge}{''.join(flags)}"
    work.mkdir()
    env = dict(os.environ, MXGATE_MICROXCALING_SRC=str(_checkout(work / "checkout", huge)),
               MXGATE_MICROXCALING_REV="planted")
    args = [sys.executable, "-m", "mxgate", "check", "--backend", "microxcaling", "--tier", "quick", "--json",
            "m.json", *flags, "--", "-k", "e2m1_encode or e2m1.encode"]
    done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    matrix = json.loads((work / "m.json").read_text())
    rows = [r for r in matrix["results"] if r["op"] == OpName.E2M1_ENCODE and r["verdict"] == "fail"]
    return done, rows


def test_the_documented_nan_is_an_expected_failure_only_when_asked(tmp_path: Path) -> None:
    done, rows = _gate(tmp_path, "nan", "--xfail-known")
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-2000:]
    assert rows and all(r["expected_failure"] and "raised NotACode: the peer returned nan" in r["reason"]
                        for r in rows), rows
    assert "saturation" in " ".join(r["config"] for r in rows)
    plain, rows = _gate(tmp_path, "nan")
    assert plain.returncode == outcome.EXIT_FAIL, plain.stdout[-3000:]
    assert rows and not any(r["expected_failure"] for r in rows) and all(r["known"] for r in rows)


@pytest.mark.parametrize("huge, says", [("finite", "raised NotACode: the peer returned 7.0"),
                                        ("raise", "raised RuntimeError: planted: huge input")])
def test_any_other_fault_of_the_same_pair_still_fails(tmp_path: Path, huge: str, says: str) -> None:
    done, rows = _gate(tmp_path, huge, "--xfail-known")
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-2000:]
    faulted = [r for r in rows if says in r["reason"]]
    assert faulted and not any(r["expected_failure"] for r in faulted), rows


def test_the_rule_names_one_exception_and_message() -> None:
    pair = ("microxcaling", OpName.E2M1_ENCODE)
    assert pair in known_findings.KNOWN_FAULTS and pair in known_findings.KNOWN_FINDINGS
    hit = known_findings.expected_fault(*pair, "NotACode", "the peer returned nan (bits 0xffc00000), which is ...")
    assert hit == known_findings.KNOWN_FINDINGS[pair]
    assert known_findings.expected_fault(*pair, "ValueError", "the peer returned nan") is None
    assert known_findings.expected_fault("microxcaling", OpName.MX_QUANTIZE, "NotACode", "the peer returned nan") \
        is None
    assert known_findings.expected_fault("oracle", OpName.E2M1_ENCODE, "NotACode", "the peer returned nan") is None
