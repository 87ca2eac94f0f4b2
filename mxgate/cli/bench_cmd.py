"""``mxgate bench``: throughput as ratios against peers measured in the same run.

Without --device: the NumPy oracle against ml_dtypes' casts on this host. With --device cpu|cuda:
the torch twin (mxgate.twin) on that device against the NumPy oracle on the host, the shipped
torch references (sglang's fake_quant_fp4; AITER's f32_to_mxfp4 and its indexer K run_torch where
AITER is importable or $MXGATE_AITER_SRC names a checkout) and the card's copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

EPILOG = """exit status:
  0    the table (or --json) was printed; ratios are figures, not a verdict
  2    bad usage, said in one line before any work: --log2-size outside [10, 28],
       --repeats < 1, ml_dtypes (the host peer) or torch (--device) not installed,
       --device cuda without a CUDA device, --elements/--tokens/--heads < 1
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  141  standard output was closed before the table was written
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="throughput against peers from one run (oracle, or the twin with --device)",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="bench the torch twin on this device (default: the NumPy oracle against ml_dtypes)")
    parser.add_argument("--log2-size", type=int, default=24, help="oracle bench: elements = 2^N (default 24)")
    parser.add_argument("--repeats", "--repeat", dest="repeats", type=int, default=None, metavar="N",
                        help="oracle bench: interleaved repetitions per case (1 thread, every thread, "
                             "ml_dtypes; again), reported as the median ratio and its min-max (default 7); "
                             "--device: runs per row, the best is kept (default 5)")
    parser.add_argument("--seed", type=int, default=20261129, help="oracle bench: seed of the N(0, 4^2) input")
    parser.add_argument("--elements", type=int, default=None, help="--device: quantize size (default 2^28 on CUDA, 2^20 on CPU)")
    parser.add_argument("--tokens", type=int, default=None, help="--device: indexer tokens (default 2^20 on CUDA, 256 on CPU)")
    parser.add_argument("--heads", type=int, default=64, help="--device: indexer heads (default 64)")
    parser.add_argument("--context", type=int, default=None,
                        help="--device: scorer context tokens (default 2^18 on CUDA, 512 on CPU)")
    parser.add_argument("--only", choices=("quantize", "sweep", "indexer", "scorer"), action="append", default=None,
                        help="--device: run only these parts (repeatable)")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="machine-readable output: to standard output, or with --device to PATH")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mxgate.tools.optional import require

    if args.repeats is not None and args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if args.device is not None:
        return _device_bench(args, require)
    if not 10 <= args.log2_size <= 28:
        raise ValueError(f"--log2-size must lie in [10, 28], got {args.log2_size}")
    from mxgate.tools.bench import format_table, run_bench

    ml_dtypes = require("ml_dtypes", "the benchmark (its peer is ml_dtypes' casts)")
    rows = run_bench(args.log2_size, 7 if args.repeats is None else args.repeats, args.seed)
    if args.json is not None:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        import numpy

        repeats = rows[0].repeats if rows else 0
        threads = rows[0].threads if rows else 1
        print(f"mxgate bench: 2^{args.log2_size} float32 N(0, 4^2), seed {args.seed}, numpy {numpy.__version__}, "
              f"peer ml_dtypes {ml_dtypes.__version__}, {platform.machine()}, {threads} threads")
        print(f"medians of {repeats} interleaved repetitions (oracle 1 thread, oracle {threads} threads, peer, "
              "machine reference); ratio = peer time / oracle time per repetition, (min-max) over repetitions; "
              f"machine = plain NumPy work on {threads} threads / on 1: what free CPUs allowed then; "
              "CPU-time ratio: the calling thread's CPU time, peer / oracle on 1 thread (leaves out other processes)")
        print(format_table(rows))
    print(end="", flush=True)  # a closed pipe shows here, not at interpreter exit
    return 0


def _device_bench(args: argparse.Namespace, require) -> int:
    for name in ("elements", "tokens", "heads", "context"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value}")
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the fused kernel and sglang's run interpreted
    torch = require("torch", "mxgate bench --device (the twin runs on torch)")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device here")
    from mxgate.tools.bench_device import main

    argv = ["--device", args.device, "--repeat", str(5 if args.repeats is None else args.repeats),
            "--heads", str(args.heads)]
    for name in ("elements", "tokens", "context"):
        if getattr(args, name) is not None:
            argv += [f"--{name}", str(getattr(args, name))]
    for part in args.only or ():
        argv += ["--only", part]
    if args.json not in (None, "-"):
        argv += ["--json", args.json]
    code = main(argv)
    print(end="", flush=True)
    return code
