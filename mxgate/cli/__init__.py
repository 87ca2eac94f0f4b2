"""The ``mxgate`` command: check, profiles, sweep, bench, vectors, explain."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module under mxgate.cli providing add_parser(subparsers) and run(args) -> int
_COMMANDS = {
    "check": "check_cmd",
    "profiles": "profiles_cmd",
    "sweep": "sweep_cmd",
    "bench": "bench_cmd",
    "vectors": "vectors_cmd",
    "explain": "explain_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mxgate", description="Bit-exact FP4/FP8 quantization conformance suite")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in _COMMANDS.items():
        try:
            module = importlib.import_module(f"mxgate.cli.{module_name}")
        except ImportError as error:
            broken = sub.add_parser(name, help=f"(unavailable: {error})")
            broken.set_defaults(_broken=str(error))
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_broken", None):
        print(f"mxgate {args.command}: unavailable: {args._broken}", file=sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except (ValueError, TypeError) as error:
        print(f"mxgate {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
