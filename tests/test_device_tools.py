"""`mxgate sweep --device` and `mxgate bench --device` as a user runs them (CPU here; the same
code runs on CUDA in the GPU tier), and the device sweep's judging on planted encoders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate import oracle  # noqa: E402
from mxgate import kernels  # noqa: E402
from mxgate.op_table import OpName  # noqa: E402
from mxgate.twin.sweep import encoder_of, from_numpy_op, sweep_device, sweep_op  # noqa: E402

HERE = Path(__file__).resolve().parent


def _mxgate(tmp_path: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(HERE / "user_backends"))
    return subprocess.run([sys.executable, "-m", "mxgate", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_device_sweep_finds_a_planted_code_and_names_the_input() -> None:
    def wrong(x: torch.Tensor) -> torch.Tensor:
        from mxgate import twin

        codes = twin.encode_e2m1(x, "gfx950")
        return torch.where(x.view(torch.int32) == 0x3E800000, codes ^ 1, codes)  # 0.25, a tie

    result = sweep_device(wrong, "gfx950", "cpu", chunk_bits=16, chunks=[0x3E80, 0x3E81])
    assert (result.inputs, result.mismatches, result.nan_mismatches) == (1 << 17, 1, 0)
    assert result.examples == [(0x3E800000, 0x00, 0x01)]


def test_device_sweep_of_a_numpy_op_agrees_with_the_oracle() -> None:
    run = from_numpy_op(lambda x: oracle.encode_e2m1(x, "ocp"), "cpu")
    result = sweep_device(run, "ocp", "cpu", chunk_bits=16, chunks=[0, 0x3F80, 0x7F80, 0xFFFF])
    assert (result.inputs, result.mismatches) == (4 << 16, 0)


@pytest.mark.parametrize("op_name", [OpName.E4M3FN_ENCODE, OpName.E4M3FNUZ_ENCODE])
def test_device_sweep_takes_a_backends_tensor_op_and_agrees_with_its_numpy_op(op_name: str) -> None:
    """The torch backend's encoders run on device tensors in the sweep (run_tensor): the same
    codes as through their NumPy interface, judged the same (torch-cpu saturates e4m3fn)."""
    op = kernels.get("torch", device="cpu").op(op_name)
    assert op.run_tensor is not None and encoder_of(op, "cpu") is op.run_tensor
    chunks = [0, 0x3F80, 0x43E0, 0x7F80, 0xC3E0, 0xFF80]  # zero, one, 448 and its neighbours, Inf / NaN
    fmt = "e4m3fn" if op_name == OpName.E4M3FN_ENCODE else "e4m3fnuz"
    on_device = sweep_device(encoder_of(op, "cpu"), op.profile, "cpu", fmt=fmt, chunk_bits=16, chunks=chunks)
    through_host = sweep_device(from_numpy_op(op.run, "cpu"), op.profile, "cpu", fmt=fmt, chunk_bits=16, chunks=chunks)
    assert on_device.inputs == through_host.inputs == len(chunks) << 16
    assert (on_device.mismatches, on_device.examples) == (through_host.mismatches, through_host.examples)
    assert on_device.mismatches == 0, on_device.summary()
    x = torch.arange(0, 1 << 16, dtype=torch.int32).view(torch.float32) + 0.0
    assert np.array_equal(op.run_tensor(x).numpy(), op.run(x.numpy()))


def test_isolated_backend_sweeps_in_its_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's backends run in a worker process: the device sweep runs there too (its tensors
    never cross a process), a few chunks per call, and the summed counts are the in-process ones."""
    from mxgate.kernels import isolation

    monkeypatch.setattr(isolation, "SWEEP_CALL_INPUTS", 1 << 17)  # two 2^16 chunks a call: three calls
    here = kernels.get("torch", device="cpu")
    chunks = [0, 0x3F80, 0x43E0, 0x7F80, 0xC3E0, 0xFF80]
    isolated = isolation.isolate(here, timeout=120)
    try:
        got = isolated.device_sweep(OpName.E4M3FN_ENCODE, "torch-cpu", "e4m3fn", chunks, 16, sweep=sweep_op)
        wrong_rule = isolated.device_sweep(OpName.E4M3FN_ENCODE, "torch-cuda", "e4m3fn", chunks, 16, sweep=sweep_op)
    finally:
        isolated.close()
    want = here.device_sweep(OpName.E4M3FN_ENCODE, "torch-cpu", "e4m3fn", chunks, 16, sweep=sweep_op)
    assert (got.inputs, got.mismatches, got.examples) == (want.inputs, want.mismatches, want.examples) == (6 << 16, 0, [])
    # judged under the CUDA rule (no saturation) the CPU cast's saturated infinities are the mismatches:
    # +-Inf -> +-448 (0x7E / 0xFE) where the rule gives NaN (0x7F / 0xFF)
    assert (wrong_rule.inputs, wrong_rule.mismatches) == (6 << 16, 2)
    assert [(b & 0xFFFFFFFF, t, k) for b, t, k in wrong_rule.examples] == [(0x7F800000, 0x7F, 0x7E), (0xFF800000, 0xFF, 0xFE)]


# `python -m mxgate ARGS`, saying on stderr at its exit whether that process imported torch
_TORCH_PROBE = ("import atexit, runpy, sys; "
                "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules, file=sys.stderr)); "
                "sys.argv = ['mxgate', *sys.argv[1:]]; runpy.run_module('mxgate', run_name='__main__', alter_sys=True)")


def test_sweep_cli_device_exit_status(tmp_path: Path) -> None:
    bad = _mxgate(tmp_path, "sweep", "e2m1", "--device", "cpu", "--backend", "planted_encoders:wrong_at_zero",
                  "--chunk-bits", "16", "--chunks", "1", "--quiet")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "1 mismatches" in bad.stdout and "input 0x00000000: oracle 0x00, backend 0x01" in bad.stdout
    # the same command, watched: the sweep runs in the backend's worker, this process never imports torch
    good = subprocess.run([sys.executable, "-c", _TORCH_PROBE, "sweep", "e2m1", "--device", "cpu", "--backend",
                           "planted_encoders:right", "--chunk-bits", "16", "--chunks", "2", "--quiet"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(HERE / "user_backends")), capture_output=True, text=True,
                          timeout=300)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "131,072 inputs, 0 mismatches" in good.stdout
    assert "torch imported: False" in good.stderr, good.stderr


@pytest.mark.parametrize("args, message", [
    (["e2m1", "--device", "cpu"], "--device and --backend go together"),
    (["e4m3fn"], "sweep a backend's e4m3fn encoder with --device"),
    (["e2m1", "--device", "cpu", "--backend", "ml_dtypes", "--chunk-bits", "8"], "--chunk-bits must lie in [16, 28]"),
    (["e2m1", "--device", "cpu", "--backend", "ml_dtypes", "--chunks", "17"], "--chunks must lie in [1, 16]"),
    (["e2m1", "--device", "cpu", "--backend", "no-such-backend"], "no-such-backend"),
    (["e2m1", "--device", "cpu", "--backend", "ml_dtypes", "--profile", "nope"], "nope"),
])
def test_sweep_cli_device_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = _mxgate(tmp_path, "sweep", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_sweep_cli_device_backend_not_here_exits_5(tmp_path: Path) -> None:
    done = _mxgate(tmp_path, "sweep", "e2m1", "--device", "cpu", "--backend", "triton-dot-scaled", "--chunks", "1")
    assert done.returncode == 5, done.stdout + done.stderr
    assert "not supported here" in done.stdout


def test_bench_cli_device_cpu_reports_ratios(tmp_path: Path) -> None:
    done = _mxgate(tmp_path, "bench", "--device", "cpu", "--elements", "65536", "--tokens", "16", "--repeat", "1",
                   "--only", "quantize", "--only", "indexer", "--json", "bench.json")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "bench.json").read_text())["rows"]}
    assert rows["copy f32"]["GBps"] > 0
    assert rows["oracle quantize_mx (host)"]["twin_speedup"] > 0
    assert rows["indexer fp4 (oracle, host)"]["twin_speedup"] > 0
    assert "skipped" in rows["aiter f32_to_mxfp4"] or rows["aiter f32_to_mxfp4"]["ms"] > 0


@pytest.mark.parametrize("args, message", [
    (["--device", "cpu", "--elements", "0"], "--elements must be >= 1"),
    (["--device", "cpu", "--repeat", "0"], "--repeats must be >= 1"),  # --repeat: the alias of --repeats
])
def test_bench_cli_device_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = _mxgate(tmp_path, "bench", *args)
    assert done.returncode == 2 and message in done.stderr, done.stdout + done.stderr
