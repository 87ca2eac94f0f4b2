"""triton_kernels' torch reference quantizer (numerics_details/mxfp.py) as a peer: found through
MXGATE_TRITON_KERNELS_SRC (or an installed triton_kernels), judged by the gate, its defects'
bytes as docs/findings/peers.md states them. Without a source it is unavailable, saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxgate import kernels, oracle
from mxgate.kernels import sources
from mxgate.kernels.triton_kernels_reference import (TRITON_KERNELS_ENV, TRITON_KERNELS_SPEC,
                                                     TritonKernelsReferenceBackend)

HAS_SOURCE = sources.problem(TRITON_KERNELS_SPEC) is None
needs_source = pytest.mark.skipif(not HAS_SOURCE, reason=sources.problem(TRITON_KERNELS_SPEC) or "")
MODULE = "mxgate.kernels.triton_kernels_reference"


def _block(first: float | np.float32, rest: float = 0.0) -> np.ndarray:
    block = np.full((1, 32), rest, np.float32)
    block[0, 0] = first
    return block


def _bits(u: int) -> np.float32:
    return np.uint32(u).view(np.float32)


def _quantize(mode: str, x: np.ndarray, op: str = "mx.quantize") -> tuple[np.ndarray, np.ndarray]:
    return TritonKernelsReferenceBackend(mode=mode).op(op).run(x)


def test_unavailable_without_a_source_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRITON_KERNELS_ENV, raising=False)
    if sources.installed_root("triton_kernels") is not None:
        pytest.skip("an installed triton_kernels is found without the variable")
    status = TritonKernelsReferenceBackend().available()
    assert not status and TRITON_KERNELS_ENV in status.reason, status


def test_a_folder_without_mxfp_is_no_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "triton_kernels" / "numerics_details").mkdir(parents=True)
    monkeypatch.setenv(TRITON_KERNELS_ENV, str(tmp_path))
    status = TritonKernelsReferenceBackend(mode="round_down").available()
    assert not status and "numerics_details/mxfp.py" in status.reason, status


@needs_source
def test_round_up_nan_block_gets_byte_0_where_the_profile_gives_0xff() -> None:
    """(bits(NaN) + 0x7FFFFF) & 0x7F800000 = 0: byte 0x00, multiplier 0 (the known finding)."""
    for nan, code in ((np.float32(np.nan), 0x7), (_bits(0xFFC00000), 0xF)):
        x = _block(nan, 1.0)
        values, scales = _quantize("round_up", x)
        assert scales[0, 0] == 0x00 and values[0, 0] == code and not values[0, 1:].any(), (values, scales)
        assert oracle.quantize_mx(x, "triton-kernels-round-up")[1][0, 0] == 0xFF
        fp8_values, fp8_scales = _quantize("round_up", x, "mx.quantize_e4m3fn")
        assert fp8_scales[0, 0] == 0x00 and fp8_values[0, 0] == (code << 4 | 0xF) and not fp8_values[0, 1:].any()


@needs_source
def test_round_up_inf_block_is_the_profile_multiplied_by_one_over_inf() -> None:
    """Byte 0xFF, 1 / Inf = 0: the 1.0s become +0, the Inf the default NaN (-qNaN, code 0xF)."""
    x = _block(np.inf, 1.0)
    values, scales = _quantize("round_up", x)
    assert scales[0, 0] == 0xFF and values[0, 0] == 0x0F and not values[0, 1:].any(), (values, scales)
    expected = oracle.quantize_mx(x, "triton-kernels-round-up")
    assert (values == expected[0]).all() and (scales == expected[1]).all()


@needs_source
def test_round_down_defects_have_their_bytes() -> None:
    """fl(amax / 4) rounds 0x017FFFFF up to 2^-126: byte 1 where its profile (and OCP) give 0, the
    known finding; a byte-0 block is zeroed, which its profile (scale0_divisor 'one') reproduces
    and OCP's division by 2^-127 does not."""
    profile = "triton-kernels-round-down"
    values, scales = _quantize("round_down", _block(_bits(0x017FFFFF)))
    assert scales[0, 0] == 0x01 and values[0, 0] == 0x06
    assert oracle.quantize_mx(_block(_bits(0x017FFFFF)), profile)[1][0, 0] == 0x00
    x = _block(np.float32(6 * 2.0**-127))
    values, scales = _quantize("round_down", x)
    assert scales[0, 0] == 0x00 and values[0, 0] == 0x00
    assert oracle.quantize_mx(x, profile)[0][0, 0] == 0x00 and oracle.quantize_mx(x, "ocp")[0][0, 0] == 0x07
    values, scales = _quantize("round_down", _block(_bits(0x047FFFFF)), "mx.quantize_e4m3fn")
    assert scales[0, 0] == 0x01 and values[0, 0] == 0x78


def _backend_name(mode: str) -> tuple[str, bool]:
    """The registered name where the registry has it, else the module:factory spec."""
    name = f"triton-kernels-{mode.replace('_', '-')}"
    return (name, True) if name in kernels.names() else (f"{MODULE}:{mode}", False)


@needs_source
@pytest.mark.parametrize("mode,op,reason", [
    ("round_up", "mx.quantize", "(expected 0xFF, got 0x00)"),
    ("round_down", "mx.quantize", "(expected 0x00, got 0x01)"),
])
def test_the_gate_judges_it(tmp_path: Path, mode: str, op: str, reason: str) -> None:
    name, registered = _backend_name(mode)
    args = [sys.executable, "-m", "mxgate", "check", "--backend", name, "--json", "m.json"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, TRITON_KERNELS_ENV: os.environ.get(TRITON_KERNELS_ENV, "")})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    cells = {c["op"]: c for c in json.loads((tmp_path / "m.json").read_text())["cells"] if c["backend"] == name}
    assert cells["e2m1.decode"]["verdict"] == "exact", cells["e2m1.decode"]
    cell = cells[op]
    assert cell["verdict"] == "fail" and bool(cell["known_findings"]) == registered, cell
    assert reason in " ".join(f["reason"] for f in cell["failures"]), cell
