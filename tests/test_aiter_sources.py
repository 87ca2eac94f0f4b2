"""AITER source backends: without a source one line naming MXGATE_AITER_SRC; the op-test
extractor runs only definitions; with a checkout (MXGATE_AITER_SRC) the backends load, record the
revision, and their ops return the shipped functions' bytes (the gate judges them)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

from mxgate import kernels, oracle
from mxgate.kernels import aiter_loader as loader
from mxgate.kernels import sources

_SRC = os.environ.get("MXGATE_AITER_SRC", "").strip()
needs_checkout = pytest.mark.skipif(not _SRC, reason="MXGATE_AITER_SRC is not set (no AITER checkout)")


@pytest.mark.parametrize("name", ["aiter-triton", "aiter-reference"])
def test_without_a_source_the_reason_names_the_variable(name: str, monkeypatch) -> None:
    monkeypatch.delenv("MXGATE_AITER_SRC", raising=False)
    if sources.installed_root("aiter") is not None:
        pytest.skip("an aiter package is installed here")
    status = kernels.get(name).available()
    assert not status and "set MXGATE_AITER_SRC to a ROCm/aiter checkout" in status.reason


_SCRIPT = '''
import argparse
import torch
from os import path as p, sep
dev = "cuda"
SCALE = 2
torch.set_default_device("cuda")
def helper(x):
    return x * SCALE
def wanted(x):
    return helper(x) + len(p.sep)
def unrelated():
    raise RuntimeError("never defined")
parser = argparse.ArgumentParser()
args = parser.parse_args()
raise SystemExit("the script part ran")
'''


def test_extract_takes_definitions_and_their_dependencies_only(tmp_path: Path) -> None:
    path = tmp_path / "op_test.py"
    path.write_text(_SCRIPT)
    kept = loader.dependency_closure(ast.parse(_SCRIPT), ("wanted",))
    assert [type(n).__name__ for n in kept] == ["ImportFrom", "Assign", "FunctionDef", "FunctionDef"]
    assert [a.name for a in kept[0].names] == ["path"]  # `sep` is not needed
    module = loader.extract(path, ("wanted",), "mxgate_test_extract", {}, {"SCALE": 3})
    assert module.wanted(2) == 7 and not hasattr(module, "unrelated") and not hasattr(module, "args")
    with pytest.raises(sources.SourceError, match="no top-level missing"):
        loader.extract(path, ("missing",), "mxgate_test_extract", {})
    with pytest.raises(sources.SourceError, match="no module constant nope"):
        loader.extract(path, ("wanted",), "mxgate_test_extract", {}, {"nope": 1})


def test_extract_leaves_sys_modules_as_it_was(tmp_path: Path) -> None:
    import sys

    path = tmp_path / "op_test.py"
    path.write_text("from aiter import dtypes\ndef f():\n    return dtypes\n")
    before = {n for n in sys.modules if n == "aiter" or n.startswith("aiter.")}
    stub = sources.stub_module("aiter", dtypes="DT")
    module = loader.extract(path, ("f",), "mxgate_test_extract2", {"aiter": stub})
    assert module.f() == "DT"
    assert {n for n in sys.modules if n == "aiter" or n.startswith("aiter.")} == before


# ---- with a checkout ------------------------------------------------------------------------


@needs_checkout
@pytest.mark.parametrize("name", ["aiter-triton", "aiter-reference"])
def test_backends_load_and_record_the_revision(name: str) -> None:
    backend = kernels.get(name)
    status = backend.available()
    if not status and "triton" in status.reason:
        pytest.skip(status.reason)
    assert status, status.reason
    assert backend.origin.startswith("checkout $MXGATE_AITER_SRC at ")


@needs_checkout
def test_reference_element_encoder_ties_and_sign_of_zero() -> None:
    """f32_to_mxfp4 at scale 2^0: every midpoint to the even code, -0 and -0.1 keep the sign."""
    backend = kernels.get("aiter-reference")
    x = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, -0.0, -0.1])
    assert backend.op("e2m1.encode").run(x).tolist() == [0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x8, 0xE, 0x8, 0x8]


@needs_checkout
def test_argmin_generator_rounds_ties_down() -> None:
    """fp4_quant_e2m1_with_e8m0 at scale 2^0 (amax 6): ties to the lower grid value, -0 cleared."""
    backend = kernels.get("aiter-reference")
    row = np.zeros((1, 32), np.float32)
    row[0, :9] = [6.0, 0.25, 0.75, 2.5, 5.0, -0.25, -2.5, -5.0, -0.0]
    packed, e8m0 = backend.op("aiter.fp4_quant_e2m1_with_e8m0").run(row)
    codes = oracle.unpack_nibbles(packed)[0, :9].tolist()
    assert e8m0[0, 0] == 127 and codes == [0x7, 0x0, 0x1, 0x4, 0x6, 0x9, 0xD, 0xF, 0x0]


@needs_checkout
def test_shipped_dynamic_mxfp4_quant_under_the_interpreter_gives_six_everywhere() -> None:
    """The `not` on a tensor (quant.py _mxfp4_quant_op) is a Python bool in the interpreter: every
    nibble takes the saturation branch (0x7 | sign), while the scale bytes follow EVEN."""
    backend = kernels.get("aiter-triton")
    status = backend.available()
    if not status:
        pytest.skip(status.reason)
    if backend.mode != "interpret":
        pytest.skip("the interpreter's behaviour")
    x = (np.random.Generator(np.random.PCG64(15)).standard_normal((4, 64)) * 3).astype(np.float32)
    packed, e8m0 = backend.op("mx.quantize").run(x)
    codes = oracle.unpack_nibbles(packed)
    assert np.array_equal(codes, np.where(np.signbit(x), 0xF, 0x7).astype(np.uint8))
    assert np.array_equal(e8m0, oracle.quantize_mx(x, "aiter-even")[1])


@needs_checkout
def test_k_rope_pairs_of_the_fp8_k_path() -> None:
    """cache_kernels.cu's FP8 K RoPE: between two __syncthreads each lane below ROPE_DIM reads
    normed[pair_dim] and writes normed[dim]; neox pairs (i, i + 32) cross a 32-lane wave,
    interleaved pairs (2i, 2i + 1) never do."""
    text = (Path(_SRC) / "csrc/kernels/cache_kernels.cu").read_text(encoding="utf-8", errors="replace")
    start = text.index("__shared__ float normed[HEAD_DIM];")
    region = text[start:text.index("float k_amax = fabsf(normed[dim]);", start)]
    rope = region[region.index("if(dim < ROPE_DIM)"):]
    assert region.count("__syncthreads()") == 2 and "__syncthreads()" not in rope[: rope.rindex("normed[dim] = k_val;")]
    assert "const float pair_val = normed[pair_dim];" in rope and "dim < HALF ? dim + HALF : dim - HALF" in rope
    assert "(dim % 2 == 0) ? dim + 1 : dim - 1" in rope
    lanes = np.arange(64)
    neox = np.where(lanes < 32, lanes + 32, lanes - 32)
    interleaved = lanes ^ 1
    assert np.all(neox // 32 != lanes // 32) and np.all(interleaved // 32 == lanes // 32)
    assert np.all(neox // 64 == lanes // 64)  # one wave64 holds every rope lane
