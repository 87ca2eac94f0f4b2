"""``mxgate sweep e2m1``: every float32 input through the oracle against an independent reference."""

from __future__ import annotations

import argparse

from mxgate.tools.sweep import AGAINST, TOTAL, CHUNK_BITS, sweep_e2m1


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sweep", help="exhaustive sweep of an element encoder over all 2^32 float32 inputs")
    parser.add_argument("format", choices=("e2m1",), help="the element encoder to sweep")
    parser.add_argument("--profile", default="gfx950", help="oracle profile (see `mxgate profiles`)")
    parser.add_argument("--against", choices=AGAINST, default="exact-table", help="independent reference")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: available cores)")
    parser.add_argument(
        "--chunks", type=int, default=None, help=f"only the first N of the {TOTAL >> CHUNK_BITS} chunks of 2^{CHUNK_BITS} inputs"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    chunks = None if args.chunks is None else range(min(args.chunks, TOTAL >> CHUNK_BITS))
    result = sweep_e2m1(args.profile, args.against, args.workers, chunks, progress=not args.quiet)
    print(result.summary())
    return 1 if result.mismatches else 0
