"""ONNX's reference QuantizeLinear (scale 1.0, zero point 0) as a peer: the gate as users run it,
and the bytes docs/findings/peers.md lists, from the backend and from its profile's oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx-quantizelinear backend runs ONNX's reference evaluator")

from mxgate import kernels, oracle  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW  # noqa: E402

BACKEND = "onnx-quantizelinear"
PROFILE = "onnx-quantizelinear"

# input -> measured byte (onnx 1.23.2). -0.0 / 1.0 + 0 is +0: 0x0, where the Cast gives 0x8; a
# negative value that rounds to zero keeps its sign.
E2M1_BYTES = [(-0.0, 0x0), (-1e-3, 0x8), (1.25, 0x2), (np.inf, 0x7), (1e30, 0x7)]
E2M1_NAN_BYTES = [(np.nan, 0x8), (-np.nan, 0x0)]  # ml_dtypes' inverted NaN codes: the known finding
# FLOAT8E4M3FN: the reference adds no zero point for float8, so -0.0 stays 0x80 (as the Cast)
E4M3FN_BYTES = [(-0.0, 0x80), (-1e-3, 0x81), (1.25, 0x3A), (np.inf, 0x7E), (-np.inf, 0xFE), (1e30, 0x7E),
                (np.nan, 0x7F), (-np.nan, 0xFF)]


def _signed(pairs: list[tuple[float, int]]) -> np.ndarray:
    """The float32 inputs, each NaN the quiet NaN of its sign (0x7FC00000 / 0xFFC00000), spelled out
    so that no conversion on the way decides a NaN's sign."""
    bits = []
    for v, _ in pairs:
        if np.isnan(v):
            bits.append(0xFFC00000 if np.signbit(v) else 0x7FC00000)
        else:
            bits.append(int(np.float32(v).view(np.uint32)))
    return np.uint32(bits).view(np.float32)


@pytest.fixture(scope="module")
def ops() -> dict:
    backend = kernels.get(BACKEND)
    assert backend.available(), backend.available().reason
    return backend.ops()


def _bytes(ops: dict, op: str, x: np.ndarray) -> list[int]:
    return [int(b) for b in ops[op].run(x)]


def test_nan_inputs_are_signed_as_written() -> None:
    x = _signed(E2M1_NAN_BYTES)
    assert list(x.view(np.uint32)) == [0x7FC00000, 0xFFC00000]


def test_e2m1_bytes_of_the_backend(ops: dict) -> None:
    pairs = E2M1_BYTES + E2M1_NAN_BYTES
    assert _bytes(ops, "e2m1.encode", _signed(pairs)) == [b for _, b in pairs]


def test_e4m3fn_bytes_of_the_backend(ops: dict) -> None:
    assert _bytes(ops, "e4m3fn.encode", _signed(E4M3FN_BYTES)) == [b for _, b in E4M3FN_BYTES]


def test_only_minus_zero_separates_it_from_the_cast() -> None:
    """On every bf16 pattern the two reference ops agree on E2M1 except -0.0, and agree on e4m3fn
    everywhere: QuantizeLinear adds the FLOAT4E2M1 zero point only."""
    quantize, cast = kernels.get(BACKEND).ops(), kernels.get("onnx-reference").ops()
    x = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    q, c = quantize["e2m1.encode"].run(x), cast["e2m1.encode"].run(x)
    assert list(x[q != c].view(np.uint32)) == [0x80000000]
    assert (q[x.view(np.uint32) == 0x80000000], c[x.view(np.uint32) == 0x80000000]) == (0x0, 0x8)
    assert np.array_equal(quantize["e4m3fn.encode"].run(x), cast["e4m3fn.encode"].run(x))


def test_the_profile_is_onnx_with_microxcalings_zero_sign() -> None:
    p = profiles.get(PROFILE)
    assert p.differences(profiles.get("onnx")) == {"zero_sign": ("if_negative", "keep")}
    assert p.zero_sign == profiles.get("microxcaling").zero_sign
    assert PROFILE in profiles.names() and PROFILE not in profiles.vector_names()  # the golden vectors unchanged


def test_the_profile_gives_the_backend_bytes_except_nan(ops: dict) -> None:
    x = _signed(E2M1_BYTES)
    assert [int(b) for b in oracle.encode_e2m1(x, PROFILE)] == [b for _, b in E2M1_BYTES]
    # the spec's NaN -> 6, which the backend's 0x8 / 0x0 contradict
    assert [int(b) for b in oracle.encode_e2m1(_signed(E2M1_NAN_BYTES), PROFILE)] == [0x7, 0x7]
    assert [int(b) for b in oracle.encode_e2m1(np.float32([-0.0]), "onnx")] == [0x8]  # the Cast's profile
    # the e4m3fn.encode reference reads only fp8_overflow (the op table), as the gate calls it
    saturate = SATURATE_OF_OVERFLOW[profiles.get(PROFILE).fp8_overflow]
    want = [int(b) for b in oracle.encode_e4m3(_signed(E4M3FN_BYTES), "fn", saturate=saturate)]
    assert want == [b for _, b in E4M3FN_BYTES]


def test_the_profile_is_the_backend_on_every_bf16_pattern_but_nan(ops: dict) -> None:
    x = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    got, want = ops["e2m1.encode"].run(x), oracle.encode_e2m1(x, PROFILE)
    differ = x.view(np.uint32)[got != want]
    assert differ.size and np.isnan(differ.view(np.float32)).all()
    assert np.array_equal(got[np.isnan(x)], np.where(np.signbit(x[np.isnan(x)]), 0x0, 0x8))


def _cell(matrix: dict, op: str) -> dict:
    return next(c for c in matrix["cells"] if (c["backend"], c["op"]) == (BACKEND, op))


@pytest.mark.parametrize("xfail_known", [False, True], ids=["plain", "xfail-known"])
def test_the_gate_as_users_run_it(tmp_path: Path, xfail_known: bool) -> None:
    args = [sys.executable, "-m", "mxgate", "check", "--backend", BACKEND, "--json", "m.json"]
    args += ["--xfail-known"] if xfail_known else []
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == (0 if xfail_known else 1), done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((tmp_path / "m.json").read_text())
    assert matrix["exit_status"] == done.returncode
    fp8 = _cell(matrix, "e4m3fn.encode")
    assert fp8["verdict"] == "exact" and fp8["profiles"] == [PROFILE], fp8
    cell = _cell(matrix, "e2m1.encode")
    assert cell["verdict"] == "fail" and cell["profiles"] == [PROFILE], cell
    assert cell["expected_failure"] is xfail_known
    assert len(cell["known_findings"]) == 1 and "QuantizeLinear" in cell["known_findings"][0]
    assert "+qNaN gives 0x8 and -qNaN 0x0" in cell["known_findings"][0]
    # only NaN inputs fail: the -0.0 and small-negative configs are exact under the profile
    assert cell["failures"] and all("nan" in f["config"] for f in cell["failures"]), cell["failures"]
    assert all("(expected 0x07, got 0x08)" in f["reason"] for f in cell["failures"]), cell["failures"]
    assert cell["counts"]["exact"] > 0
