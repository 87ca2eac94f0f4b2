"""The torch backend declares the e4m3fn and bf16 rules of the torch that runs it (issue 24, finding 3)."""

from __future__ import annotations

import numpy as np
import pytest

from mxgate import oracle
from mxgate.op_table import OpName
from mxgate.oracle import profiles

pytest.importorskip("torch", reason="the torch backend needs torch")
from mxgate.kernels import codecs  # noqa: E402

# (e4m3fn bytes of 1e6 and +Inf, bf16 bits of NaN) as each torch behaviour gives them
PLANTED = {
    "torch-cpu": ((0x7E, 0x7E), 0xFFFF),                # torch 2.13 CPU (measured here)
    "torch-cuda": ((0x7F, 0x7F), 0x7FFF),               # torch 2.11 CUDA (measured on the H200)
    "torch-cuda-saturating": ((0x7E, 0x7E), 0x7FFF),    # torch >= 2.13 CUDA (pytorch#178817)
    "torch-cpu-nonsaturating": ((0x7F, 0x7F), 0xFFFF),  # torch <= 2.12 CPU
}


def _planted(fp8: tuple[int, int], bf16: int):
    def cast(x: np.ndarray, dtype_name: str, view_name: str, device: str) -> np.ndarray:
        if dtype_name == "float8_e4m3fn":
            return np.uint8(fp8)
        assert dtype_name == "bfloat16"
        return np.uint16([bf16]).view(np.int16)

    return cast


@pytest.mark.parametrize("expected", sorted(PLANTED))
def test_declared_profile_follows_the_planted_cast(monkeypatch: pytest.MonkeyPatch, expected: str) -> None:
    fp8, bf16 = PLANTED[expected]
    monkeypatch.setattr(codecs, "_cast_bits", _planted(fp8, bf16))
    ops = codecs.TorchCastBackend("cpu").ops()
    assert ops[OpName.E4M3FN_ENCODE].profile == expected
    assert ops[OpName.BF16_ROUND].profile == expected
    # the declared profile's own rule gives the planted bytes
    p = profiles.get(expected)
    got = oracle.encode_e4m3(codecs._PROBE_FP8, variant="fn", saturate=p.fp8_overflow == "saturate")
    assert tuple(int(b) for b in got) == fp8
    assert int(oracle.bf16_bits(np.float32([np.nan]), p)[0]) == bf16


def test_a_cast_that_fits_no_profile_fails_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "_cast_bits", _planted((0x7E, 0x7F), 0xFFFF))
    with pytest.raises(RuntimeError, match="fit no torch profile"):
        codecs.TorchCastBackend("cpu").ops()


def test_the_real_torch_here_is_probed() -> None:
    import torch

    ops = codecs.TorchCastBackend("cpu").ops()
    saturates = int(torch.tensor([1e6]).to(torch.float8_e4m3fn).view(torch.uint8)[0]) == 0x7E
    assert profiles.get(ops[OpName.E4M3FN_ENCODE].profile).fp8_overflow == ("saturate" if saturates else "nan")
