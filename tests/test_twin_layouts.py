"""The layouts on torch tensors against the NumPy oracle's buffers, byte for byte (CPU in CI, the card with ``--device cuda``)."""

from __future__ import annotations



import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate.oracle import layouts as olayouts  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.twin import layouts as tlayouts  # noqa: E402
from mxgate.twin import coverage  # noqa: E402

from namespaces import assert_same, rng_of, tt  # noqa: E402
SEED = 20261201
PROFILES = [name for name in profiles.names() if coverage.models(name)]  # the rest: test_twin_coverage
SATURATE = {"nan": False, "saturate": True, "satfinite": "satfinite"}
E4M3_RULES = [(v, s) for v in ("fn", "fnuz") for s in (False, True, "satfinite")]
CHILD_FLAG = "MXGATE_TWIN_INTERPRETER_CHILD"
GPU_DEVICE = "cuda"



# ---- layouts ---------------------------------------------------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_layouts import CASES, random_logical  # noqa: E402


def _layout_roundtrip(name: str, dims: dict, seed: int, device: str) -> int:
    layout, twin_layout = olayouts.get(name), tlayouts.get(name)
    rng = rng_of(seed)
    total = layout.num_slots(**dims)
    if layout.slot_rule == "row_mask":
        n = total
        slots = np.where(rng.random(n) < 0.3, -1, int(rng.integers(0, 9))).astype(np.int64)
    else:
        n = int(rng.integers(0, total + 1))
        slots = rng.permutation(total)[:n].astype(np.int64)
        slots[rng.random(n) < 0.2] = int(rng.choice([-1, -2, -64]))
    arrays = random_logical(layout, n, rng, **dims)
    buf = layout.new_buffer(**dims)
    layout.scatter(buf, *arrays, slots=slots, **dims)
    tbuf = twin_layout.new_buffer(device=device, **dims)
    assert twin_layout.scatter(tbuf, *[tt(a, device) for a in arrays], slots=tt(slots, device), **dims) is tbuf
    assert_same(buf, tbuf, f"seed {seed} {name} {dims} scatter")
    for got, want in zip(twin_layout.gather(tbuf, slots=tt(slots, device), **dims), layout.gather(buf, slots=slots, **dims)):
        assert_same(want, got, f"seed {seed} {name} gather")
    for got, want in zip(twin_layout.gather(tbuf, **dims), layout.gather(buf, **dims)):
        assert_same(want, got, f"seed {seed} {name} gather every slot")
    return buf.size


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{n}-{'-'.join(f'{k}{v}' for k, v in d.items())}" for n, d in CASES])
def test_layout_scatter_gather_equals_the_oracle(case: int) -> None:
    name, dims = CASES[case]
    for seed in range(SEED, SEED + 4):
        _layout_roundtrip(name, dims, seed + case, "cpu")


def test_layout_errors_are_the_oracles() -> None:
    kv, tkv = olayouts.get("aiter-fp4-kv"), tlayouts.get("aiter-fp4-kv")
    packed = np.zeros((2, 64), np.uint8)
    for slots in ([3, 3], [0, 10**6]):
        with pytest.raises(ValueError) as want:
            kv.scatter(kv.new_buffer(num_blocks=1), packed, slots=np.array(slots))
        with pytest.raises(ValueError) as got:
            tkv.scatter(tkv.new_buffer(num_blocks=1), tt(packed), slots=torch.tensor(slots))
        assert str(got.value) == str(want.value)
    with pytest.raises(ValueError) as want:
        kv.scatter(np.zeros((1, 1, 4, 64, 15), np.uint8), packed)
    with pytest.raises(ValueError) as got:
        tkv.scatter(torch.zeros((1, 1, 4, 64, 15), dtype=torch.uint8), tt(packed))
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError, match="unknown layout"):
        tlayouts.get("no-such-layout")



@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(CASES)))
def test_gpu_layouts(case: int) -> None:
    name, dims = CASES[case]
    _layout_roundtrip(name, dims, SEED + case, GPU_DEVICE)
