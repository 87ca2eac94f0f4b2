"""DeepGEMM's reference FP4 quantizer (deep_gemm/utils/math.py per_token_cast_to_fp4) as a peer:
found through MXGATE_DEEPGEMM_SRC (or an installed deep_gemm), judged by the gate under the
`deepgemm` profile, its bytes on the probed blocks as docs/findings/peers.md states them. Without
a source it is unavailable, saying why."""

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
from mxgate.kernels.deepgemm_reference import DEEPGEMM_ENV, DEEPGEMM_SPEC, PROFILE, DeepGemmReferenceBackend

HAS_SOURCE = sources.problem(DEEPGEMM_SPEC) is None
needs_source = pytest.mark.skipif(not HAS_SOURCE, reason=sources.problem(DEEPGEMM_SPEC) or "")
NAME = "deepgemm-reference"
SPEC = "mxgate.kernels.deepgemm_reference:Backend"


def _bits(u: int) -> np.float32:
    return np.uint32(u).view(np.float32)


def _block(*elements: float | np.float32, rest: float = 0.0) -> np.ndarray:
    block = np.full((1, 32), rest, np.float32)
    block[0, : len(elements)] = elements
    return block


def _codes(packed: np.ndarray) -> np.ndarray:
    """The E2M1 codes of packed bytes, element 2i in the low nibble."""
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (-1,))


# (name, block, scale byte, first codes): the bytes of DeepGEMM's rules worked by hand, seed-free.
# amax' = max(amax, 1e-4); sf = ceil_pow2(amax' / 6) with the field clamped to [1, 254]; codes by
# strict `|y| > midpoint` crossings of y = x * (1 / sf), sign only on a nonzero code.
PROBES = [
    ("all +0", _block(0.0), 112, [0, 0]),  # fl(1e-4) / 6 = 1.67e-5 -> 2^-15
    ("all -0", _block(rest=-0.0), 112, [0, 0]),  # -0 gives 0x0
    ("-0 beside 1.0", _block(1.0, rest=-0.0), 125, [6, 0]),  # 1 / 6 -> 2^-2; y = 4
    ("-1e-3 beside 1.0", _block(1.0, -1e-3), 125, [6, 0]),  # -0.004 -> code 0, sign cleared
    ("subnormal amax 5*2^-149", _block(_bits(5)), 112, [0]),
    ("tiny amax 2^-130", _block(_bits(0x00080000)), 112, [0]),
    ("amax fl(1e-4) - 1 ulp", _block(_bits(0x38D1B716)), 112, [5]),  # floored: y = 3.2768
    ("amax 8 - 1 ulp", _block(_bits(0x40FFFFFF)), 128, [6]),  # y = 3.9999998 > 3.5
    ("amax 8", _block(8.0), 128, [6]),
    ("amax 6", _block(6.0), 127, [7]),
    ("amax 6 + 1 ulp", _block(_bits(0x40C00001)), 128, [5]),  # y = 3.0000002 > 2.5
    ("midpoints toward zero", _block(6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -5.0),
     127, [7, 0, 1, 2, 3, 4, 5, 6, 0, 0x9, 0xE]),
    ("just past the midpoints", _block(6.0, _bits(0x3E800001), _bits(0x40A00001)), 127, [7, 1, 7]),
    ("3e38", _block(3e38), 253, [6]),  # 5e37 -> 2^126; y = 3.53
    ("FLT_MAX and -1e38", _block(_bits(0x7F7FFFFF), -1e38), 253, [6, 0xA]),  # y = 4, -1.18
    ("NaN beside 1.0s", _block(np.nan, rest=1.0), 254, [0, 0]),  # field 256 -> 254; NaN > m is False
    ("-NaN beside 1.0s", _block(_bits(0xFFC00000), rest=1.0), 254, [0, 0]),
    ("Inf beside 1.0s", _block(np.inf, rest=1.0), 254, [7, 0]),  # field 255 -> 254; Inf * 2^-127 = Inf
    ("-Inf beside -1.0s", _block(-np.inf, rest=-1.0), 254, [0xF, 0]),
]


def test_unavailable_without_a_source_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEEPGEMM_ENV, raising=False)
    if sources.installed_root("deep_gemm") is not None:
        pytest.skip("an installed deep_gemm is found without the variable")
    status = DeepGemmReferenceBackend().available()
    assert not status and DEEPGEMM_ENV in status.reason, status


def test_a_folder_without_utils_math_is_no_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "deep_gemm" / "utils").mkdir(parents=True)
    monkeypatch.setenv(DEEPGEMM_ENV, str(tmp_path))
    status = DeepGemmReferenceBackend().available()
    assert not status and "deep_gemm/utils/math.py" in status.reason and DEEPGEMM_ENV in status.reason, status


def test_its_ops_are_declared_under_the_deepgemm_profile() -> None:
    ops = DeepGemmReferenceBackend().ops()
    assert sorted(ops) == ["fp4_indexer.quantize", "mx.quantize"]
    assert {op.profile for op in ops.values()} == {PROFILE}


@pytest.mark.parametrize(("name", "block", "scale", "codes"), PROBES, ids=[p[0] for p in PROBES])
def test_the_profile_gives_the_worked_bytes(name: str, block: np.ndarray, scale: int, codes: list[int]) -> None:
    packed, e8m0 = oracle.quantize_mx(block, PROFILE)
    assert e8m0[0, 0] == scale and _codes(packed)[0, : len(codes)].tolist() == codes, (name, packed, e8m0)


@needs_source
@pytest.mark.parametrize(("name", "block", "scale", "codes"), PROBES, ids=[p[0] for p in PROBES])
def test_deepgemm_gives_the_worked_bytes(name: str, block: np.ndarray, scale: int, codes: list[int]) -> None:
    packed, e8m0 = DeepGemmReferenceBackend().op("mx.quantize").run(block)
    assert e8m0[0, 0] == scale and _codes(packed)[0, : len(codes)].tolist() == codes, (name, packed, e8m0)
    expected = oracle.quantize_mx(block, PROFILE)
    assert (packed == expected[0]).all() and (e8m0 == expected[1]).all()


@needs_source
def test_scales_are_read_back_from_deepgemms_packed_words() -> None:
    """Rows of 64 (2 scales, padded to 4 by DeepGEMM) and 160 (5, padded to 8) keep their own bytes."""
    rng = np.random.default_rng(20260624)
    for n in (64, 160):
        x = (rng.standard_normal((3, n)) * np.exp2(rng.integers(-20, 20, (3, 1)))).astype(np.float32)
        packed, e8m0 = DeepGemmReferenceBackend().op("mx.quantize").run(x)
        expected = oracle.quantize_mx(x, PROFILE)
        assert e8m0.shape == (3, n // 32) and (e8m0 == expected[1]).all() and (packed == expected[0]).all()


def _backend_name() -> tuple[str, bool]:
    """The registered name where the registry has it, else the module:attr spec."""
    return (NAME, True) if NAME in kernels.names() else (SPEC, False)


@needs_source
def test_the_gate_judges_it_exact(tmp_path: Path) -> None:
    name, _ = _backend_name()
    args = [sys.executable, "-m", "mxgate", "check", "--tier", "quick", "--backend", name, "--json", "m.json"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, DEEPGEMM_ENV: os.environ.get(DEEPGEMM_ENV, "")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cells = {c["op"]: c for c in json.loads((tmp_path / "m.json").read_text())["cells"] if c["backend"] == name}
    assert set(cells) == {"mx.quantize", "fp4_indexer.quantize"}, cells
    for op, cell in cells.items():
        assert cell["verdict"] == "exact" and cell["profiles"] == [PROFILE], (op, cell)
