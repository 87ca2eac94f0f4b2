"""Throughput of the oracle's ``indexer_qk_rope_quant_and_cache`` on one core, in rows/s.

    python -m benchmarks.bench_indexer [--tokens 65536] [--heads 64] [--mode fp4|fp8]
                                       [--repeats 3] [--seed 0]

A row is one (token, head) pair: T x H Q rows per call (the T K rows ride along). Inputs are
bf16 with random signs, exponents in [2^-9, 2^3) and mantissas (no zeros, so every chunk runs
the fast path); every token has its own slot, in a random order. MXGATE_THREADS is forced to 1
and the process is pinned to one core. Prints the best and median wall time of whole calls
(validation, RoPE, LayerNorm, quantization and the cache writes included), the best CPU time
(which excludes time the core spent on other processes), and rows/s for both. The target
for FP4 at T = 65,536, H = 64 is more than 1M rows/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["MXGATE_THREADS"] = "1"  # before mxgate reads it: the figure is per core

import numpy as np  # noqa: E402

from mxgate.oracle import layouts, ops  # noqa: E402
from mxgate.tools.pinning import pin_one_core  # noqa: E402

HEAD_DIM = 128
MAX_POS = 8192




def _bf16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random bf16 bit patterns (uint16): sign, exponent 118..129, mantissa uniform."""
    sign = rng.integers(0, 2, size=shape, dtype=np.uint16) << np.uint16(15)
    exponent = rng.integers(118, 130, size=shape, dtype=np.uint16) << np.uint16(7)
    mantissa = rng.integers(0, 128, size=shape, dtype=np.uint16)
    return sign | exponent | mantissa


def _inputs(tokens: int, heads: int, mode: str, seed: int) -> dict[str, object]:
    rng = np.random.Generator(np.random.PCG64(seed))
    fp4 = mode == "fp4"
    blocks = -(-tokens // 64) + 1
    slots = rng.permutation(blocks * 64)[:tokens].astype(np.int64)
    return dict(
        q=_bf16(rng, (tokens, heads, HEAD_DIM)),
        weights=_bf16(rng, (tokens, heads)),
        k=_bf16(rng, (tokens, HEAD_DIM)),
        slot_mapping=slots,
        norm_weight=(1.0 + 0.1 * rng.standard_normal(HEAD_DIM)).astype(np.float32),
        norm_bias=(0.1 * rng.standard_normal(HEAD_DIM)).astype(np.float32),
        positions=rng.integers(0, MAX_POS, size=tokens, dtype=np.int64),
        cos_cache=_bf16(rng, (MAX_POS, 32)),
        sin_cache=_bf16(rng, (MAX_POS, 32)),
        epsilon=1e-6,
        quant_block_size=32 if fp4 else HEAD_DIM,
        scale_fmt="ue8m0",
        weights_scale=HEAD_DIM**-0.5,
        is_neox=True,
        blocks=blocks,
    )


def _outputs(args: dict[str, object], tokens: int, heads: int, mode: str) -> dict[str, np.ndarray]:
    blocks = int(args["blocks"])
    poison = layouts.POISON
    if mode == "fp4":
        return dict(
            q_out=layouts.get("aiter-fp4-q").new_buffer(num_tokens=tokens, num_heads=heads),
            weights_out=np.full((tokens, heads), poison * 0x0101, dtype=np.uint16),
            kv_cache=layouts.get("aiter-fp4-kv").new_buffer(num_blocks=blocks),
            q_scale_out=layouts.get("aiter-fp4-q-scale").new_buffer(num_tokens=tokens, num_heads=heads),
            kv_cache_scale=layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=blocks),
        )
    return dict(
        q_out=np.full((tokens, heads, HEAD_DIM), poison, dtype=np.uint8),
        weights_out=np.zeros((tokens, heads), dtype=np.float32),
        kv_cache=layouts.get("aiter-fp8-kv").new_buffer(num_blocks=blocks, block_size=64),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=65536)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--mode", choices=("fp4", "fp8"), default="fp4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"numpy {np.__version__}; {pin_one_core()}; MXGATE_THREADS=1; seed {args.seed}")

    inputs = _inputs(args.tokens, args.heads, args.mode, args.seed)
    inputs.pop("blocks")
    outputs = _outputs({**inputs, "blocks": -(-args.tokens // 64) + 1}, args.tokens, args.heads, args.mode)
    rows = args.tokens * args.heads
    walls, cpus = [], []
    for _ in range(args.repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        ops.indexer_qk_rope_quant_and_cache(**inputs, **outputs)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    best, median, best_cpu = min(walls), statistics.median(walls), min(cpus)
    print(f"{args.mode} T={args.tokens} H={args.heads}, {args.repeats} calls: wall best {best:.3f} s "
          f"(median {median:.3f} s), CPU best {best_cpu:.3f} s")
    print(f"  {rows / best / 1e6:.2f} M rows/s (token x head) by wall time, "
          f"{rows / best_cpu / 1e6:.2f} M rows/s per CPU second (differs when the core is shared)")


if __name__ == "__main__":
    main()
