"""Time the scatter of 1M tokens into the AITER FP4 K cache and its scale buffer, on one core.

    python -m benchmarks.bench_layouts [--tokens 1048576] [--repeats 5] [--seed 0]

(from the repository root, or with the package installed: python benchmarks/bench_layouts.py)

Prints the best and median wall time of ``aiter-fp4-kv`` + ``aiter-fp4-kv-scale`` scatters
(validation included) for slots in order, in a random order, and with 1 in 8 slots < 0. The
target is under 1 s for 1M tokens.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from mxgate.oracle import layouts
from mxgate.tools.pinning import pin_one_core

BLOCK = 64




def _slot_sets(n: int, num_slots: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    shuffled = rng.permutation(num_slots)[:n].astype(np.int64)
    holes = shuffled.copy()
    holes[rng.random(n) < 0.125] = -1
    return {"in order": np.arange(n, dtype=np.int64), "random order": shuffled,
            "random, 1/8 slot -1": holes}


def _time_once(packed: np.ndarray, e8m0: np.ndarray, slots: np.ndarray,
               kv: np.ndarray, kv_scale: np.ndarray) -> float:
    start = time.perf_counter()
    layouts.get("aiter-fp4-kv").scatter(kv, packed, slots=slots)
    layouts.get("aiter-fp4-kv-scale").scatter(kv_scale, e8m0, slots=slots)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"numpy {np.__version__}; {pin_one_core()}; seed {args.seed}")

    rng = np.random.Generator(np.random.PCG64(args.seed))
    num_blocks = -(-args.tokens // BLOCK)
    packed = rng.integers(0, 256, (args.tokens, 64), dtype=np.uint8)
    e8m0 = rng.integers(0, 256, (args.tokens, 4), dtype=np.uint8)
    kv = layouts.get("aiter-fp4-kv").new_buffer(num_blocks=num_blocks)
    kv_scale = layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=num_blocks)
    print(f"{args.tokens} tokens -> kv_cache {kv.shape} ({kv.nbytes / 2**20:.0f} MiB) + "
          f"kv_cache_scale {kv_scale.shape}")

    for label, slots in _slot_sets(args.tokens, num_blocks * BLOCK, rng).items():
        times = [_time_once(packed, e8m0, slots, kv, kv_scale) for _ in range(args.repeats)]
        rate = args.tokens / min(times) / 1e6
        print(f"  {label:22s} best {min(times):.3f} s  median {statistics.median(times):.3f} s"
              f"  ({rate:.1f} M tokens/s)")


if __name__ == "__main__":
    main()
