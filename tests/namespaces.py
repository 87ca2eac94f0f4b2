"""Shared pieces of the two-namespace tests: NumPy arrays as tensors with the same bytes, byte
equality with a message naming the first differing inputs, and the input sets (strided float32
patterns, the boundary classes, every bf16 pattern)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxgate.oracle.bits import unique_patterns  # noqa: E402
from mxgate.oracle import profiles  # noqa: E402
from mxgate.inputs.bits import NAN_PAYLOADS, bf16_patterns  # noqa: E402
from mxgate.inputs.boundaries import element_boundaries  # noqa: E402


def rng_of(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def tt(a: np.ndarray, device: str = "cpu") -> torch.Tensor:
    """NumPy -> torch with the same bytes (uint16 / uint32 through their signed views)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.uint16).to(device)
    if a.dtype == np.uint32:
        return torch.from_numpy(a.view(np.int32).copy()).to(device)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def raw_bytes(a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().contiguous().cpu()
        return a.view(torch.uint8).numpy().reshape(-1) if a.numel() else np.zeros(0, np.uint8)
    return np.ascontiguousarray(a).view(np.uint8).reshape(-1)


def assert_same(expected, actual, note: str, inputs: np.ndarray | None = None) -> int:
    """Byte equality (shape included); returns the number of elements compared."""
    e_shape = tuple(np.shape(expected))
    a_shape = tuple(actual.shape)
    assert e_shape == a_shape, f"{note}: shape {a_shape}, oracle {e_shape}"
    eb, ab = raw_bytes(expected), raw_bytes(actual)
    if not np.array_equal(eb, ab):
        item = max(1, eb.size // max(1, int(np.prod(e_shape))))
        bad = np.flatnonzero(eb != ab)
        first = sorted(set((bad // item).tolist()))[:5]
        shown = ""
        if inputs is not None:
            flat = np.ascontiguousarray(inputs).reshape(-1)
            shown = " inputs " + ", ".join(f"0x{int(flat[i].view(np.uint32)) if flat.dtype == np.float32 else int(flat[i]):08X}"
                                           for i in first if i < flat.size)
        raise AssertionError(f"{note}: {bad.size} bytes differ, first elements {first}{shown}")
    return int(np.prod(e_shape))


def strided_patterns(count: int, seed: int) -> np.ndarray:
    """count float32 patterns spread over all 2^32: a random start, an odd random stride."""
    rng = rng_of(seed)
    start = int(rng.integers(0, 1 << 32))
    stride = int(rng.integers(1 << 10, 1 << 22)) | 1
    return ((start + stride * np.arange(count, dtype=np.uint64)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def boundary_patterns() -> np.ndarray:
    """The suite's element boundary classes, NaN payloads, and scale edges (6*2^k, floors, 2^k +-1)."""
    pats = [element_boundaries().view(np.uint32), np.array(NAN_PAYLOADS, dtype=np.uint64).astype(np.uint32)]
    edges = []
    for k in range(-149, 128):
        p = (k + 127) << 23 if k >= -126 else 1 << (k + 149)
        for b in (p, int(np.float32(6.0 * 2.0**k).view(np.uint32)) if -146 <= k <= 125 else p):
            edges += [b - 1, b, b + 1]
    for floor in (profiles.AITER_AMAX_FLOOR, 1e-10, 1e-8, 1e-4):
        b = int(np.float32(floor).view(np.uint32))
        edges += [b - 1, b, b + 1]
    edges = np.array([e for e in edges if 0 <= e < 0x80000000], dtype=np.uint32)
    pats += [edges, edges | np.uint32(0x80000000)]
    return unique_patterns(np.concatenate(pats))


def element_inputs(seed: int) -> np.ndarray:
    """2^20 strided patterns, every boundary class, every bf16 pattern (as float32)."""
    return unique_patterns(np.concatenate([strided_patterns(1 << 20, seed), boundary_patterns(), bf16_patterns()]))


def profiles_by_behaviour(run: Callable[[profiles.Profile], object]) -> Iterator[tuple[str, object]]:
    """(name, run(profile)) for every registered profile that behaves differently from those before it.

    ``run(profile)`` is called on a recording copy of each profile that is not skipped, and
    records the fields its call read. A later profile equal to an earlier one in every field that
    earlier call read is skipped: a deterministic call whose branches read only those fields runs
    the same way, and gives the same result, under both. (A profile hashed or compared whole reads
    every field, and then nothing is skipped.)"""
    results: list[object] = []
    memo = profiles.MemoByReads(lambda q: results.append(run(q)) or len(results) - 1)
    yielded: set[int] = set()
    for name in profiles.names():
        index = memo(profiles.get(name))  # an earlier index: behaves as an earlier profile
        if index not in yielded:
            yielded.add(index)
            yield name, results[index]
