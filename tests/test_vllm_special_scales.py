"""The gate's vLLM ragged FP4 configs with scale bytes 0, 250 and 255 (inputs.vllm.
fp4_ragged_special_case): finite quantized data never holds byte 255, so only these configs
judge what a scorer makes of it. Kernels: tests/user_backends/vllm_special_kernels.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxgate.conformance import outcome

USER_BACKENDS = Path(__file__).parent / "user_backends"


def _check(backend: str, where: Path) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(USER_BACKENDS), str(Path(__file__).parents[1])]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, "-m", "mxgate", "check", "--backend", f"vllm_special_kernels:{backend}",
                           "--json", "m.json", "--", "-k", "special_scale_bytes"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=600)
    cell = json.loads((where / "m.json").read_text())["cells"][0]
    return done, cell


def test_the_oracles_logits_are_exact_on_both_decode_paths(tmp_path: Path) -> None:
    done, cell = _check("ragged_ok", tmp_path)
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-2000:]
    assert cell["verdict"] == "exact" and cell["counts"]["exact"] == 2, cell


def test_a_scorer_that_keeps_the_nan_of_byte_255_fails(tmp_path: Path) -> None:
    done, cell = _check("ragged_nan_at_byte255", tmp_path)
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-2000:]
    assert cell["verdict"] == "fail" and cell["counts"]["fail"] == 2, cell
    assert "scale-bytes-0-250-255" in done.stdout
