"""``mxgate sweep e2m1``: every float32 input through the oracle against an independent reference."""

from __future__ import annotations

import argparse

from mxgate.tools.sweep import AGAINST, TOTAL, CHUNK_BITS, sweep_e2m1

CHUNKS = TOTAL >> CHUNK_BITS
EPILOG = f"""exit status:
  0    no mismatch on the inputs swept (differences by design, the NaN rule against
       ml_dtypes, are counted apart and do not fail)
  1    mismatches: the oracle and the reference disagree (examples are printed)
  2    bad usage, said in one line before any work: unknown profile, --chunks outside
       [1, {CHUNKS}], --workers < 1, --against ml_dtypes without ml_dtypes installed
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  141  standard output was closed before the summary was written
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sweep", help="exhaustive sweep of an element encoder over all 2^32 float32 inputs",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("format", choices=("e2m1",), help="the element encoder to sweep")
    parser.add_argument("--profile", default="gfx950", help="oracle profile (see `mxgate profiles`)")
    parser.add_argument("--against", choices=AGAINST, default="exact-table", help="independent reference")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: available cores)")
    parser.add_argument(
        "--chunks", type=int, default=None, help=f"only the first N (1 to {CHUNKS}) of the {CHUNKS} chunks of 2^{CHUNK_BITS} inputs"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.chunks is not None and not 1 <= args.chunks <= CHUNKS:
        raise ValueError(f"--chunks must lie in [1, {CHUNKS}] (chunks of 2^{CHUNK_BITS} inputs), got {args.chunks}")
    chunks = None if args.chunks is None else range(args.chunks)
    result = sweep_e2m1(args.profile, args.against, args.workers, chunks, progress=not args.quiet)
    print(result.summary(), flush=True)  # a closed pipe shows here, not at interpreter exit
    return 1 if result.mismatches else 0
