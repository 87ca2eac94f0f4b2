"""``mxgate explain EXPECTED ACTUAL --layout NAME``: name the root cause of every differing
nibble of the buffers, and of every differing e8m0 byte of the scales given for both sides.

exit status:
  0    equal: the buffers, and the scales where both sides' are given
  1    they differ, whether or not every unit is explained (the counts are printed)
  2    bad input, said in one line on stderr before any work: a missing, empty or unreadable
       file, a directory given as a file, an unknown layout or profile, an input or scales
       that do not fit the buffers, a --plot path that cannot be written, a missing package
  3    an internal error of mxgate (a bug; --debug shows the traceback); never 1
  141  standard output was closed before the whole report was written
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

HELP = "explain the mismatches between an expected and an actual buffer"
_DESCRIPTION, _STATUSES = __doc__.split("\n\n", 1)  # the epilog lists the exit statuses
EXIT_EQUAL, EXIT_DIFFER = 0, 1  # bad input is 2, raised to mxgate.cli.main


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("explain", help=HELP, description=_DESCRIPTION, epilog=_STATUSES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)
    p.set_defaults(run=run, func=run)
    return p


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("expected", metavar="EXPECTED",
                   help="expected buffer: .npy, .npz (FILE.npz:KEY to pick one) or raw")
    p.add_argument("actual", metavar="ACTUAL", help="actual buffer, same forms")
    p.add_argument("--layout", required=True,
                   help="layout name (mxgate.oracle.layouts.names()); 'packed-row' also takes "
                        "plain [rows, N/2] packed codes")
    p.add_argument("--profile", default="gfx950", help="profile of the expected bytes (default gfx950)")
    p.add_argument("--input", metavar="X", help="float32/bf16 input the quantizer saw")
    p.add_argument("--scales", metavar="S",
                   help="e8m0 scales of FP4 data (both sides, or the expected side with "
                        "--actual-scales); an .npz with arrays 'expected' and 'actual' gives both")
    p.add_argument("--actual-scales", metavar="S", help="the actual side's e8m0 scales")
    p.add_argument("--slots", metavar="FILE", help="slot mapping the kernel ran with (int array)")
    p.add_argument("--dims", nargs="*", default=[], metavar="K=V",
                   help="layout dims the shape does not fix, e.g. num_heads=32")
    p.add_argument("--shape", help="shape of raw EXPECTED/ACTUAL files, e.g. 4,1,4,64,16")
    p.add_argument("--dtype", default="uint8", help="dtype of raw EXPECTED/ACTUAL (default uint8)")
    p.add_argument("--input-shape", help="shape of a raw --input file")
    p.add_argument("--input-dtype", default=None,
                   help="dtype of a raw --input (default float32); bfloat16 also reads a .npy of uint16 "
                        "(or int16) bf16 bit patterns, as torch's t.view(torch.uint16).numpy() gives")
    p.add_argument("--scales-shape", help="shape of raw --scales/--actual-scales files")
    p.add_argument("--profiles", help="comma-separated profiles to re-derive (default: all)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--max-rows", type=int, default=1000,
                   help="rows in --json output (default 1000; -1 for all)")
    p.add_argument("--rows", type=int, default=20, help="rows in the text report (default 20)")
    p.add_argument("--no-grid", action="store_true", help="leave the hex grid out of the text report")
    p.add_argument("--plot", metavar="PNG", help="write a heat map of the mismatches (needs matplotlib)")


def _dims(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--dims entries must be K=V, got {item!r}")
        try:
            out[key] = int(value)
        except ValueError:
            raise ValueError(f"--dims {key} must be an integer, got {value!r}") from None
    return out


def _load(args: argparse.Namespace) -> dict[str, object]:
    from mxgate.explain.io import as_input, load_array, parse_dtype, parse_shape

    shape = parse_shape(args.shape, "--shape") if args.shape else None
    dtype = parse_dtype(args.dtype, "--dtype")
    kw: dict[str, object] = {
        "expected": load_array(args.expected, "EXPECTED", shape, dtype),
        "actual": load_array(args.actual, "ACTUAL", shape, dtype),
        "layout": args.layout, "profile": args.profile, "dims": _dims(args.dims) or None,
    }
    if args.input:
        ishape = parse_shape(args.input_shape, "--input-shape") if args.input_shape else None
        raw_dtype = parse_dtype(args.input_dtype or "float32", "--input-dtype")
        kw["input"] = as_input(load_array(args.input, "--input", ishape, raw_dtype), args.input, "--input",
                               args.input_dtype)
    sshape = parse_shape(args.scales_shape, "--scales-shape") if args.scales_shape else None
    if args.scales:
        kw["scales"] = _scales(args.scales, sshape)
    if args.actual_scales:
        if not args.scales:
            raise ValueError("--actual-scales needs --scales (the expected side)")
        exp = kw["scales"][0] if isinstance(kw["scales"], tuple) else kw["scales"]
        kw["scales"] = (exp, load_array(args.actual_scales, "--actual-scales", sshape))
    if args.slots:
        kw["slots"] = load_array(args.slots, "--slots")
    if args.profiles is not None:
        kw["profiles"] = [p.strip() for p in args.profiles.split(",") if p.strip()]
    return kw


def _scales(spec: str, shape: tuple[int, ...] | None) -> object:
    """--scales: one array, or an .npz archive holding both sides as 'expected' and 'actual'."""
    from pathlib import Path

    from mxgate.explain.io import load_archive, load_array

    if spec.lower().endswith(".npz"):
        arrays = load_archive(Path(spec), "--scales")
        if {"expected", "actual"} <= set(arrays):
            return (arrays["expected"], arrays["actual"])
    return load_array(spec, "--scales", shape)


def _check_outputs(args: argparse.Namespace) -> None:
    """Everything that would fail after the work, checked before it."""
    if args.rows < 0:
        raise ValueError(f"--rows must be >= 0, got {args.rows}")
    if args.max_rows < -1:
        raise ValueError(f"--max-rows must be >= 0, or -1 for all, got {args.max_rows}")
    if args.plot is not None:
        from mxgate.explain.io import check_writable
        from mxgate.explain.plot import require_matplotlib

        check_writable(args.plot, "--plot")
        require_matplotlib("--plot")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Errors are raised (ValueError, TypeError, ImportError): ``mxgate.cli.main`` prints
    them as one line with status 2."""
    out = sys.stdout if out is None else out
    from mxgate.explain import explain

    _check_outputs(args)
    report = explain(**_load(args))  # type: ignore[arg-type]
    if args.json:
        rows = None if args.max_rows < 0 else args.max_rows
        print(report.to_json(max_rows=rows, indent=1), file=out)
    else:
        print(report.summary(max_rows=args.rows, grid=not args.no_grid), file=out)
    if args.plot:
        path = report.plot(args.plot)
        if not args.json:
            print(f"heat map written to {path}", file=out)
    out.flush()  # a closed pipe shows here, inside the command, not at interpreter exit
    return EXIT_EQUAL if report.equal else EXIT_DIFFER


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m mxgate.cli.explain_cmd``): the same command, the
    same exit statuses and one-line errors as ``mxgate explain``."""
    from mxgate.cli import main as cli_main

    return cli_main(["explain", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
