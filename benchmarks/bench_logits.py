"""Time the FP4 decode scorer oracle: 4 rows x 64 heads x 131,072 tokens, on one core.

    python -m benchmarks.bench_logits [--batch 4] [--next-n 1] [--heads 64] [--tokens 131072]
                                      [--repeats 3] [--seed 0] [--threads 1]

(from the repository root, or with the package installed: python benchmarks/bench_logits.py)

Prints the best and median wall time (and the process CPU time, which a busy machine does not
inflate) of the exact form (exact value + rigorous bound, no
emulation), of the emulated order alone, and of both together, for rows = batch * next_n query
rows each scoring every token of its sequence. Target: the exact form under 10 s on one core.
Thread counts (MXGATE_THREADS, BLAS, OpenMP) are fixed before NumPy loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--next-n", type=int, default=1)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=131072)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = _args()
    threads = str(args.threads)
    for var in ("MXGATE_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = threads  # before NumPy (and its BLAS) loads
    pinned = "not pinned"
    if args.threads == 1 and hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        pinned = f"pinned to core {core}"

    import numpy as np

    from mxgate.inputs import logits as lc
    from mxgate.oracle.scorers import aiter_fp4 as logits

    rows = args.batch * args.next_n
    print(f"numpy {np.__version__}; python {sys.version.split()[0]}; threads {threads}; {pinned}; seed {args.seed}")
    print(f"shape: {rows} rows (batch {args.batch} x next_n {args.next_n}) x {args.heads} heads x "
          f"{args.tokens} tokens, head_dim 128")
    start = time.perf_counter()
    case = lc.fp4_decode_case(args.seed, args.batch, args.tokens, args.next_n, args.heads,
                              context_lens=np.full(args.batch, args.tokens))
    print(f"inputs built in {time.perf_counter() - start:.1f} s (not timed below)")

    forms = {
        "exact form (value + bound)": lambda: logits.pa_mqa_logits_fp4_exact(**case.kwargs, emulate=False),
        "emulated order alone": lambda: logits.pa_mqa_logits_fp4(**case.kwargs),
        "both forms in one pass": lambda: logits.pa_mqa_logits_fp4_exact(**case.kwargs),
    }
    for name, run in forms.items():
        times, cpu = [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        cells = rows * args.heads * args.tokens
        print(f"{name:28s} wall best {min(times):6.2f} s  median {statistics.median(times):6.2f} s  "
              f"cpu best {min(cpu):6.2f} s  ({cells / min(times) / 1e6:.1f} M row-head-token cells/s)")


if __name__ == "__main__":
    main()
