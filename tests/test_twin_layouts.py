"""One layout, two namespaces: the oracle's own Layout on torch tensors gives the bytes it gives
on NumPy arrays (buffers, gathers, index maps) and the same errors (CPU in CI, the card with
``--device cuda``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate.oracle import layouts  # noqa: E402

from namespaces import assert_same, rng_of, tt  # noqa: E402
from test_layouts import CASES, CASE_IDS, SMALL, random_logical  # noqa: E402

SEED = 20261201
GPU_DEVICE = "cuda"


def _slots(layout: layouts.Layout, total: int, rng: np.random.Generator) -> np.ndarray:
    """Row-mask layouts: one slot per token, some < 0. Slot layouts: a random subset of the
    slots in random order, some rows skipped by -1, -2 or -64."""
    if layout.slot_rule == "row_mask":
        return np.where(rng.random(total) < 0.3, -1, int(rng.integers(0, 9))).astype(np.int64)
    n = int(rng.integers(0, total + 1))
    slots = rng.permutation(total)[:n].astype(np.int64)
    slots[rng.random(n) < 0.2] = int(rng.choice([-1, -2, -64]))
    return slots


def _roundtrip(name: str, dims: dict, seed: int, device: str) -> None:
    layout = layouts.get(name)
    rng = rng_of(seed)
    slots = _slots(layout, layout.num_slots(**dims), rng)
    arrays = random_logical(layout, slots.shape[0], rng, **dims)
    buf = layout.new_buffer(**dims)
    assert layout.scatter(buf, *arrays, slots=slots, **dims) is buf
    tbuf = layout.new_buffer(device=device, **dims)
    assert isinstance(tbuf, torch.Tensor) and tbuf.device.type == torch.device(device).type
    assert layout.scatter(tbuf, *[tt(a, device) for a in arrays], slots=tt(slots, device), **dims) is tbuf
    assert_same(buf, tbuf, f"seed {seed} {name} {dims} scatter")
    for want, got in zip(layout.gather(buf, slots=slots, **dims),
                         layout.gather(tbuf, slots=tt(slots, device), **dims), strict=True):
        assert isinstance(got, torch.Tensor) and got.device == tbuf.device
        assert_same(want, got, f"seed {seed} {name} gather")
    for want, got in zip(layout.gather(buf, **dims), layout.gather(tbuf, **dims), strict=True):
        assert_same(want, got, f"seed {seed} {name} gather every slot")
    # NumPy slots (and a list: an empty one is float64, refused on both) with a tensor
    # buffer: moved to its device, same bytes
    again = layout.scatter(layout.new_buffer(device=device, **dims), *[tt(a, device) for a in arrays],
                           slots=slots, **dims)
    assert_same(buf, again, f"seed {seed} {name} scatter with NumPy slots")
    host = slots.tolist() if slots.size else slots
    for want, got in zip(layout.gather(buf, slots=slots, **dims), layout.gather(tbuf, slots=host, **dims)):
        assert_same(want, got, f"seed {seed} {name} gather with list slots")


def _index_maps(name: str, dims: dict, device: str) -> None:
    layout = layouts.get(name)
    for f in layout.fields + layout.pads:
        want, got = layout.index_map(f.name, **dims), layout.index_map(f.name, device=device, **dims)
        assert got.offset.device.type == torch.device(device).type
        assert_same(want.offset, got.offset, f"{name} {f.name} index_map offset")
        assert (want.nibble is None) == (got.nibble is None)
        if want.nibble is not None:
            assert_same(want.nibble, got.nibble, f"{name} {f.name} index_map nibble")


@pytest.mark.parametrize("case", range(len(CASES)), ids=CASE_IDS)
def test_scatter_gather_on_tensors_equal_numpy(case: int) -> None:
    name, dims = CASES[case]
    for seed in range(SEED, SEED + 4):
        _roundtrip(name, dims, seed + case, "cpu")


@pytest.mark.parametrize("name", list(SMALL))
def test_small_cases_and_index_maps_on_tensors_equal_numpy(name: str) -> None:
    # SMALL holds the one layout CASES lacks (vllm-fp4-indexer-k, with unused page bytes)
    _roundtrip(name, SMALL[name], SEED, "cpu")
    _index_maps(name, SMALL[name], "cpu")


@pytest.mark.parametrize("case", range(len(CASES)), ids=CASE_IDS)
def test_index_map_on_tensors_equals_numpy(case: int) -> None:
    _index_maps(*CASES[case], "cpu")


def test_every_row_skipped_and_empty_buffers() -> None:
    kv = layouts.get("aiter-fp8-kv")
    dims = dict(num_blocks=1, block_size=4)
    data, scale = np.zeros((2, 128), np.uint8), np.array([np.nan, -0.0], np.float32)
    buf, tbuf = kv.new_buffer(**dims), kv.new_buffer(device="cpu", **dims)
    kv.scatter(buf, data, scale, slots=np.array([-1, -1]))
    kv.scatter(tbuf, tt(data), tt(scale), slots=torch.tensor([-1, -1]))
    assert_same(buf, tbuf, "every row skipped")
    for want, got in zip(kv.gather(buf, slots=np.array([-1, 2])), kv.gather(tbuf, slots=torch.tensor([-1, 2]))):
        assert_same(want, got, "gather of a skipped slot")
    empty = layouts.get("aiter-fp4-kv")
    for want, got in zip(empty.gather(empty.new_buffer(num_blocks=0)),
                         empty.gather(empty.new_buffer(num_blocks=0, device="cpu"))):
        assert_same(want, got, "gather of an empty buffer")


def test_a_buffer_view_with_a_storage_offset() -> None:
    # a contiguous slice of a larger tensor (the indexer op's q_scale_out[:t]) is written in place
    qs = layouts.get("aiter-fp4-q-scale")
    rng = rng_of(SEED)
    (e8m0,) = random_logical(qs, 3, rng, num_tokens=3, num_heads=48)
    whole = qs.new_buffer(num_tokens=5, num_heads=48)
    twhole = qs.new_buffer(num_tokens=5, num_heads=48, device="cpu")
    qs.scatter(whole[2:], e8m0, num_heads=48)
    qs.scatter(twhole[2:], tt(e8m0), num_heads=48)
    assert_same(whole, twhole, "scatter into a slice")
    assert_same(qs.gather(whole[2:], num_heads=48)[0], qs.gather(twhole[2:], num_heads=48)[0], "gather of a slice")


def _message(call) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return caught.type, str(caught.value)


def test_errors_are_the_same_on_both_namespaces() -> None:
    kv = layouts.get("aiter-fp4-kv")
    fp8 = layouts.get("aiter-fp8-kv")
    q = layouts.get("aiter-fp4-q")
    packed = np.zeros((2, 64), np.uint8)
    cases = [
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.array([3, 3]))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.array([0, 10**6]))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.array([1.0, 2.0]))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.array([True, False]))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.array([1]))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), slots=S(np.zeros((2, 1), np.int64))),
        lambda B, A, S: kv.scatter(B(np.zeros((1, 1, 4, 64, 15), np.uint8)), A(packed)),
        lambda B, A, S: kv.scatter(B(np.zeros((1, 1, 4, 64, 16), np.int8)), A(packed)),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed.astype(np.int8))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(np.zeros((2, 63), np.uint8))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(np.zeros((), np.uint8))),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), A(packed)),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(packed), num_blocks=3),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=2))[:, :, :, ::2], A(packed)),
        lambda B, A, S: kv.scatter(B(kv.new_buffer(num_blocks=1)), A(np.zeros((70, 64), np.uint8))),
        lambda B, A, S: kv.gather(B(kv.new_buffer(num_blocks=1)), slots=S(np.array([64]))),
        lambda B, A, S: fp8.scatter(B(fp8.new_buffer(num_blocks=1, block_size=4)), A(np.zeros((1, 128), np.uint8)),
                                    A(np.zeros(1, np.float64))),
        lambda B, A, S: q.scatter(B(q.new_buffer(num_tokens=3, num_heads=16)), A(np.zeros((2, 16, 64), np.uint8))),
        lambda B, A, S: q.scatter(B(q.new_buffer(num_tokens=3, num_heads=16)), A(np.zeros((3, 16, 64), np.uint8)),
                                  slots=S(np.array([0, 1]))),
        lambda B, A, S: layouts.get("aiter-fp4-q-scale").gather(B(np.zeros((1, 1, 4, 16, 4), np.uint8))),
    ]
    same = lambda a: a  # noqa: E731
    tensor = lambda a: torch.from_numpy(np.array(a))  # noqa: E731 - tt would make a scalar 1-D
    for k, case in enumerate(cases):
        want = _message(lambda: case(same, same, same))
        got = _message(lambda: case(tensor, tensor, tensor))
        assert got == want, f"case {k}"


def test_mixed_kinds_and_devices_are_refused() -> None:
    kv = layouts.get("aiter-fp4-kv")
    tbuf = kv.new_buffer(num_blocks=1, device="cpu")
    with pytest.raises(TypeError, match="packed must be a tensor, as the buffer is, got ndarray"):
        kv.scatter(tbuf, np.zeros((1, 64), np.uint8))
    with pytest.raises(TypeError, match="packed must be a numpy array, got Tensor"):
        kv.scatter(kv.new_buffer(num_blocks=1), torch.zeros((1, 64), dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"packed must be on the buffer's device \(cpu\), got meta"):
        kv.scatter(tbuf, torch.zeros((1, 64), dtype=torch.uint8, device="meta"))
    with pytest.raises(ValueError, match=r"slots must be on the buffer's device \(cpu\), got meta"):
        kv.gather(tbuf, slots=torch.zeros(1, dtype=torch.int64, device="meta"))
    with pytest.raises(ValueError, match=r"fill must be"):
        kv.new_buffer(256, num_blocks=1, device="cpu")


def test_device_without_torch_says_so() -> None:
    code = ("import sys, mxgate.oracle.layouts as L\n"
            "try:\n    L.get('aiter-fp4-kv').new_buffer(num_blocks=1, device='cpu')\n"
            "except TypeError as e:\n    print(e)\n"
            "assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "device='cpu' asks for a torch tensor, but torch is not imported" in done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(CASES)), ids=CASE_IDS)
def test_gpu_layouts(case: int) -> None:
    name, dims = CASES[case]
    _roundtrip(name, dims, SEED + case, GPU_DEVICE)
    _index_maps(name, dims, GPU_DEVICE)
