"""``mxgate bench``: oracle throughput against ml_dtypes' casts, as ratios from one run."""

from __future__ import annotations

import argparse
import json
import platform

EPILOG = """exit status:
  0    the table (or --json) was printed; ratios are figures, not a verdict
  2    bad usage, said in one line before any work: --log2-size outside [10, 28],
       --repeat < 1, ml_dtypes (the peer) not installed
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  141  standard output was closed before the table was written
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="oracle throughput against ml_dtypes' casts (ratios)",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log2-size", type=int, default=24, help="elements = 2^N (default 24)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the best is kept")
    parser.add_argument("--seed", type=int, default=20261129, help="seed of the N(0, 4^2) input")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mxgate.tools.bench import format_table, run_bench
    from mxgate.tools.optional import require

    if not 10 <= args.log2_size <= 28:
        raise ValueError(f"--log2-size must lie in [10, 28], got {args.log2_size}")
    if args.repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {args.repeat}")
    ml_dtypes = require("ml_dtypes", "the benchmark (its peer is ml_dtypes' casts)")
    rows = run_bench(args.log2_size, args.repeat, args.seed)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        import numpy

        print(f"mxgate bench: seed {args.seed}, numpy {numpy.__version__}, ml_dtypes {ml_dtypes.__version__}, {platform.machine()}")
        print(format_table(rows))
    print(end="", flush=True)  # a closed pipe shows here, not at interpreter exit
    return 0
