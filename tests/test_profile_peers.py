"""The peer profiles' new rules against the exact model (issue 24): every bf16 pattern and the
float32 boundaries, through the fast oracle and mxgate.oracle.exact."""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.oracle.bits import unique_patterns
from mxgate import oracle
from mxgate.oracle import exact as X
from mxgate.oracle import profiles, scales

NEW_RULES = ["nvidia-ue8m0", "torchao-rceil", "torchao-floor", "microxcaling", "onnx"]
ALL_BF16 = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16))
ALL_BF16_MAGNITUDES = ALL_BF16[ALL_BF16 < 0x80000000]


def _boundaries() -> np.ndarray:
    """Every float32 within 64 ulps of each power of two and of 6 * 2^k, the subnormal edges, specials."""
    pows = np.arange(0, 255, dtype=np.int64) << 23
    six = (np.arange(1, 254, dtype=np.int64) << 23) | 0x400000
    offs = np.arange(-64, 65, dtype=np.int64)
    around = (np.concatenate([pows, six])[:, None] + offs[None, :]).ravel()
    edges = np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x7FFFFFFF])
    u = np.concatenate([around, edges])
    return unique_patterns(u[(u >= 0) & (u <= 0x7FFFFFFF)]).astype(np.uint32)


# the log2f rules share the exact model's memo of log2f values: one xdist worker computes them once
LOG2_RULES = ("torchao-rceil", "microxcaling")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group("profile-peers-log2f"))
                                  if n in LOG2_RULES else n for n in NEW_RULES])
def test_e8m0_scale_against_exact_on_every_bf16_and_boundary(name: str) -> None:
    u = unique_patterns(np.concatenate([ALL_BF16_MAGNITUDES, _boundaries()]))
    with np.errstate(all="ignore"):
        fast = scales.e8m0_scale(u.view(np.float32), name)
    table = scales.e8m0_scale_of_bits(u, name)
    want = np.array([X.e8m0_scale(int(b), name) for b in u], np.uint8)
    assert np.array_equal(fast, want), [hex(int(b)) for b in u[fast != want][:5]]
    assert np.array_equal(table, want)


BYTES = [0, 1, 127, 253, 254, 255]
# The exact model's codes per scale byte, kept by the profile fields its calls read: profiles that
# agree on all of them get the same exact codes (nvidia-ue8m0 and onnx do), computed once. The
# tests of one byte run on one xdist worker, so that the memo is shared.
_EXACT_SCALED = {byte: profiles.MemoByReads(
    lambda p, byte=byte: np.array([X.encode_e2m1_scaled(int(b), byte, p, quotient="f32") for b in ALL_BF16], np.uint8))
    for byte in BYTES}


@pytest.mark.parametrize("name", NEW_RULES)
@pytest.mark.parametrize("byte", [pytest.param(b, marks=pytest.mark.xdist_group(f"profile-peers-byte-{b}")) for b in BYTES])
def test_scaled_e2m1_against_exact_on_every_bf16(name: str, byte: int) -> None:
    x = ALL_BF16
    with np.errstate(all="ignore"):
        fast = oracle.encode_e2m1(x.view(np.float32), name, scale=np.full(x.shape, byte, np.uint8))
    want = _EXACT_SCALED[byte](profiles.get(name))
    bad = np.flatnonzero(fast != want)
    assert bad.size == 0, [(hex(int(x[i])), int(fast[i]), int(want[i])) for i in bad[:5]]


def test_the_rules_the_issue_names() -> None:
    amax = np.uint32([0x40FFFFFF, 0x00400000, 0x00400001, 0x7F800000, 0x7FC00000]).view(np.float32) * np.float32(1)
    assert scales.e8m0_scale(np.uint32([0x40FFFFFF]).view(np.float32), "microxcaling")[0] == 128
    assert scales.e8m0_scale(np.uint32([0x40FFFFFF]).view(np.float32), "ocp")[0] == 127
    v = np.uint32([0x00400000, 0x00400001]).view(np.float32) * np.float32(6)  # 6 * 2^-127 and just above
    assert list(scales.e8m0_scale(v, "nvidia-ue8m0")) == [0, 1]
    assert list(scales.e8m0_scale(np.float32([np.inf, np.nan]), "nvidia-ue8m0")) == [0xFE, 0xFF]
    assert list(scales.e8m0_scale(np.float32([np.inf, np.nan]), "torchao-floor")) == [0xFD, 0xFF]
    assert list(oracle.encode_e2m1(np.float32([-0.0, -1e-3]), "microxcaling")) == [0x0, 0x8]
    assert list(oracle.encode_e2m1(np.float32([np.nan, -np.nan]), "onnx")) == [0x7, 0x7]
    assert amax.dtype == np.float32


def test_torch_log2_is_the_modelled_log2f_near_every_power_of_two() -> None:
    torch = pytest.importorskip("torch", reason="torch's log2 is what microxcaling and torchao RCEIL call")
    u = _boundaries()
    u = u[(u & 0x7FFFFFFF) != 0]
    u = u[u < 0x7F800000]
    t = torch.from_numpy(u.view(np.float32).copy())
    assert np.array_equal(torch.floor(torch.log2(t)).numpy().astype(np.int64), scales._floor_log2f_bits(u))
    assert np.array_equal(torch.ceil(torch.log2(t)).numpy().astype(np.int64), scales._ceil_log2f_bits(u))


def test_every_peer_profile_is_in_the_vector_table() -> None:
    for name in NEW_RULES + ["torch-cuda-saturating", "torch-cpu-nonsaturating"]:
        assert name in profiles.vector_names()
