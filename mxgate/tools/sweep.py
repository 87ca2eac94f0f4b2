"""Exhaustive check of the E2M1 element encoder over all 2^32 float32 inputs.

References, both independent of the oracle's table lookup:
- ``exact-table``: the exact (Fraction) model evaluated at every place the answer can change
  (each midpoint and its successor, the zero, Inf and NaN boundaries, the NaN payload bits the
  profile's rule looks at), both ends of every interval checked, then expanded by interval fills.
  Rounding is monotone in the magnitude, so between two such points the code is constant.
- ``ml_dtypes``: the third-party C++ cast ``astype(ml_dtypes.float4_e2m1fn)``; where the profile
  differs from ml_dtypes by design (its NaN rule) the difference is counted separately.
The work is split over processes, one 2^24-input chunk at a time.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from mxgate.oracle import profiles
from mxgate.oracle.formats import e2m1
from mxgate.tools.optional import require
from mxgate.tools.progress import Progress

CHUNK_BITS = 24
TOTAL = 1 << 32
AGAINST = ("exact-table", "ml_dtypes")
_NAN_PAYLOAD_STEPS = (0x7F800001, 0x7FA00000, 0x7FA00001, 0x7FC00000, 0x7FC00001, 0x7FE00000, 0x7FE00001)


@dataclass
class SweepResult:
    profile: str
    against: str
    inputs: int = 0
    mismatches: int = 0
    by_design: int = 0  # differences the profile declares (e.g. its NaN rule vs ml_dtypes)
    examples: list[tuple[int, int, int]] = field(default_factory=list)  # (bits, oracle, reference)
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [
            f"e2m1 sweep, profile {self.profile}, against {self.against}: {self.inputs:,} inputs, "
            f"{self.mismatches:,} mismatches" + (f", {self.by_design:,} differences by design (NaN rule)" if self.by_design else "")
            + f", {self.seconds:.1f} s"
        ]
        for bits, ours, theirs in self.examples:
            lines.append(f"  input 0x{bits:08X}: oracle 0x{ours:X}, {self.against} 0x{theirs:X}")
        return "\n".join(lines)


def breakpoints(profile: str) -> tuple[np.ndarray, np.ndarray]:
    """(starts, codes): the exact model's code on [starts[i], starts[i+1]) over all 2^32 inputs."""
    from mxgate.oracle import exact

    p = profiles.get(profile)
    candidates = {0, 1, 0x7F800000}
    for m in e2m1.MIDPOINTS.tolist():
        bits = int(np.float32(m).view(np.uint32))
        candidates.update((bits, bits + 1))
    candidates.update(_NAN_PAYLOAD_STEPS)
    positive = sorted(candidates)
    starts = positive + [0x80000000 | b for b in positive]
    ends = starts[1:] + [TOTAL]
    codes = []
    for start, end in zip(starts, ends):
        first = exact.encode_e2m1(start, p)
        last = exact.encode_e2m1(end - 1, p)
        if first != last:  # would break the piecewise-constant argument: refuse to guess
            raise RuntimeError(f"exact model changes inside [0x{start:08X}, 0x{end - 1:08X}]: {first} vs {last}")
        codes.append(first)
    return np.array(starts, dtype=np.int64), np.array(codes, dtype=np.uint8)


def _expected_from_table(first: int, count: int, starts: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out = np.empty(count, dtype=np.uint8)
    stop = first + count
    i = int(np.searchsorted(starts, first, side="right")) - 1
    position = first
    while position < stop:
        end = int(starts[i + 1]) if i + 1 < len(starts) else TOTAL
        end = min(end, stop)
        out[position - first : end - first] = codes[i]
        position = end
        i += 1
    return out


def _chunk(args: tuple[int, str, str, tuple[np.ndarray, np.ndarray] | None]) -> tuple[int, int, int, list]:
    index, profile, against, table = args
    os.environ["MXGATE_THREADS"] = "1"  # one process per core already
    first = index << CHUNK_BITS
    count = 1 << CHUNK_BITS
    bits = np.arange(first, first + count, dtype=np.uint64).astype(np.uint32)
    ours = e2m1.encode_e2m1(bits.view(np.float32), profile)
    by_design = 0
    if against == "exact-table":
        assert table is not None
        theirs = _expected_from_table(first, count, *table)
        differ = ours != theirs
    else:
        import ml_dtypes

        with np.errstate(invalid="ignore"):  # NaN inputs are the point, not a problem
            theirs = bits.view(np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
        differ = ours != theirs
        if profiles.get(profile).nan != profiles.get("ml_dtypes").nan:
            is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
            by_design = int(np.count_nonzero(differ & is_nan))
            differ &= ~is_nan
    where = np.flatnonzero(differ)
    examples = [(int(bits[j]), int(ours[j]), int(theirs[j])) for j in where[:5]]
    return index, int(where.size), by_design, examples


def check_chunks(chunks: range | None) -> range:
    """The chunks to sweep (all when None); ValueError unless a non-empty range of indices in
    [0, 2^32 / 2^CHUNK_BITS): an empty sweep would report 0 mismatches as a pass."""
    count = TOTAL >> CHUNK_BITS
    if chunks is None:
        return range(count)
    if not isinstance(chunks, range):
        raise TypeError(f"chunks must be a range of chunk indices, got {type(chunks).__name__}")
    if len(chunks) == 0 or min(chunks) < 0 or max(chunks) >= count:
        raise ValueError(f"chunks must be a non-empty range inside [0, {count}), got {chunks!r}")
    return chunks


def sweep_e2m1(
    profile: str = "gfx950",
    against: str = "exact-table",
    workers: int | None = None,
    chunks: range | None = None,
    progress: bool = True,
) -> SweepResult:
    """Compare the oracle's E2M1 encoder with a reference on every float32 input (or ``chunks``)."""
    import time

    p = profiles.get(profile)
    if against not in AGAINST:
        raise ValueError(f"against must be one of {', '.join(AGAINST)}; got {against!r}")
    if against == "ml_dtypes":  # here, not in the worker processes after the work started
        require("ml_dtypes", "sweep against ml_dtypes")
    chunks = check_chunks(chunks)
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise TypeError(f"workers must be an int (or None for every core), got {type(workers).__name__}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1 (or None for every core), got {workers}")
    workers = workers or len(os.sched_getaffinity(0))
    table = breakpoints(p.name) if against == "exact-table" else None
    result = SweepResult(p.name, against)
    bar = Progress(len(chunks), f"e2m1/{p.name} vs {against}", enabled=progress)
    start = time.perf_counter()
    jobs = [(i, p.name, against, table) for i in chunks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for _, count, by_design, examples in pool.map(_chunk, jobs):
            result.inputs += 1 << CHUNK_BITS
            result.mismatches += count
            result.by_design += by_design
            result.examples.extend(examples[: max(0, 10 - len(result.examples))])
            bar.advance(1, f"mismatches {result.mismatches}")
    bar.close()
    result.seconds = time.perf_counter() - start
    return result
