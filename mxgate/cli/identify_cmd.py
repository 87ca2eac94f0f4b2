"""``mxgate identify --backend NAME|module:attr [--op OP ...] [--device cpu|cuda] [--json F]``:
infer a kernel's profile fields from its bytes (docs/identify.md). For each op the backend
implements, probe inputs that separate every candidate value of every field the op reads run
through it (each call twice, on fresh copies); the oracle under candidate profiles says which
field values explain the bytes. The report names the registered profiles it matches, or the
nearest one with the fields that differ and their evidence, and prints a ready-to-paste
``profiles.register(...)`` call."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from mxgate.cli import CliError

EPILOG = """exit status:
  0    every op identified matches a registered profile (equal in every field the op reads)
  1    a field differs from every registered profile, an op has bytes no combination of field
       values explains, the backend answered the same input differently on two calls
       (inconsistent), or an op faulted (raised, crashed, timed out) or did not load
  2    usage error, in one line before anything runs
  3    internal error
  5    nothing ran: the backend is not available here, or implements no op identify probes
  130  interrupted

The probe pools are deterministic (random parts seeded with 0x1D25): the same backend gives
the same report."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("identify", help="infer a kernel's profile fields from its bytes",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", required=True, metavar="NAME", help="a registered backend or module.path:attr")
    parser.add_argument("--op", action="append", default=None, metavar="OP",
                        help="op to identify (repeatable; default: every op of the backend identify has probes for)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", default=None, metavar="F", help="write the evidence file here")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="per-call limit of a backend op before its worker is killed (default 300)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
    # The probes hold NaN, Inf and overflowing values on purpose: NumPy would warn in the workers.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::RuntimeWarning")
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # the oracle's threads, in this process
    if args.timeout is not None and not (0 < args.timeout < float("inf")):
        raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout!r}")
    if args.json is not None:
        target = Path(args.json)
        if target.is_dir() or not target.absolute().parent.is_dir():
            raise CliError(f"--json {args.json}: not a writable file path (its folder must exist)")
    from mxgate import kernels
    from mxgate.identify import report
    from mxgate.identify.run import check_ops, identify

    try:
        check_ops(args.op)
        kernels.check_name(args.backend)
    except (ValueError, kernels.NotABackend) as error:
        raise CliError(str(error)) from None
    print(f"mxgate identify: backend {args.backend}, device {args.device}", flush=True)
    try:
        result = identify(args.backend, args.op, args.device, timeout=args.timeout or 300.0)
    except kernels.NotABackend as error:
        raise CliError(str(error)) from None
    if result.load_fault:
        print(f"mxgate identify: {args.backend} {result.load_fault}")
    elif result.description:
        print(f"  {result.description}" + (f" (revision {result.revision})" if result.revision else ""))
    for line in report.text(result):
        print(line, flush=True)
    if args.json is not None:
        Path(args.json).write_text(report.evidence_text(result))
    status = result.status
    what = {0: "every op matches a registered profile", 1: "not every op matches a registered profile",
            5: "nothing ran here"}[status]
    print(f"mxgate identify: {len(result.ops)} op(s) identified; {what}; exit status {status}")
    return status


if __name__ == "__main__":  # pragma: no cover
    from mxgate.cli import main

    sys.exit(main(["identify", *sys.argv[1:]]))
