"""``mxgate explain EXPECTED ACTUAL --layout NAME``: name the root cause of every differing
nibble. Exit status: 0 the buffers are equal, 1 they differ (explained or not), 2 bad input."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import numpy as np

HELP = "explain the mismatches between an expected and an actual buffer"
EXIT_EQUAL, EXIT_DIFFER, EXIT_BAD_INPUT = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("explain", help=HELP, description=__doc__,
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
    p.add_argument("--input-dtype", default="float32", help="dtype of a raw --input (default float32)")
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
    from mxgate.explain.io import load_array, parse_dtype, parse_shape

    shape = parse_shape(args.shape, "--shape") if args.shape else None
    dtype = parse_dtype(args.dtype, "--dtype")
    kw: dict[str, object] = {
        "expected": load_array(args.expected, "EXPECTED", shape, dtype),
        "actual": load_array(args.actual, "ACTUAL", shape, dtype),
        "layout": args.layout, "profile": args.profile, "dims": _dims(args.dims) or None,
    }
    if args.input:
        ishape = parse_shape(args.input_shape, "--input-shape") if args.input_shape else None
        kw["input"] = load_array(args.input, "--input", ishape,
                                 parse_dtype(args.input_dtype, "--input-dtype"))
    sshape = parse_shape(args.scales_shape, "--scales-shape") if args.scales_shape else None
    if args.scales:
        kw["scales"] = _scales(args.scales, sshape, load_array)
    if args.actual_scales:
        if not args.scales:
            raise ValueError("--actual-scales needs --scales (the expected side)")
        exp = kw["scales"][0] if isinstance(kw["scales"], tuple) else kw["scales"]
        kw["scales"] = (exp, load_array(args.actual_scales, "--actual-scales", sshape))
    if args.slots:
        kw["slots"] = load_array(args.slots, "--slots")
    if args.profiles:
        kw["profiles"] = [p.strip() for p in args.profiles.split(",") if p.strip()]
    return kw


def _scales(spec: str, shape, load_array) -> object:
    from pathlib import Path

    if spec.lower().endswith(".npz") and Path(spec).is_file():
        with np.load(spec, allow_pickle=False) as archive:
            if {"expected", "actual"} <= set(archive.files):
                return (archive["expected"], archive["actual"])
    return load_array(spec, "--scales", shape)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    from mxgate.explain import explain
    from mxgate.oracle import profiles

    try:
        kw = _load(args)
        if "profiles" in kw:
            for name in kw["profiles"]:  # type: ignore[union-attr]
                try:
                    profiles.get(name)
                except ValueError as exc:
                    raise ValueError(f"--profiles: {exc}") from None
        report = explain(**kw)  # type: ignore[arg-type]
    except (ValueError, TypeError, OSError) as exc:
        print(f"mxgate explain: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    if args.json:
        rows = None if args.max_rows < 0 else args.max_rows
        print(report.to_json(max_rows=rows, indent=1), file=out)
    else:
        print(report.summary(max_rows=args.rows, grid=not args.no_grid), file=out)
    if args.plot:
        try:
            path = report.plot(args.plot)
        except ImportError as exc:
            print(f"mxgate explain: error: --plot: {exc}", file=err)
            return EXIT_BAD_INPUT
        if not args.json:
            print(f"heat map written to {path}", file=out)
    return EXIT_EQUAL if report.equal else EXIT_DIFFER


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m mxgate.cli.explain_cmd``)."""
    parser = argparse.ArgumentParser(prog="mxgate explain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
