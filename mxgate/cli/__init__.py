"""The ``mxgate`` command: check, backends, diff, profiles, sweep, bench, vectors, explain.

Exit statuses shared by every command (each command's ``--help`` adds its own meaning of 0/1):
2 a usage error or bad input, said in one line on stderr before any work; 3 an internal error
of mxgate (a bug: please report it; ``--debug`` shows the traceback); 141 standard output was
closed early (``mxgate profiles | head -1``): the rest of the output is dropped, as a program
ended by SIGPIPE would report it in a shell, so a pipeline under ``pipefail`` never reads a cut
report as a pass.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_CLOSED_PIPE = 141

# subcommand -> module under mxgate.cli providing add_parser(subparsers) and run(args) -> int
_COMMANDS = {
    "check": "check_cmd",
    "backends": "backends_cmd",
    "diff": "diff_cmd",
    "profiles": "profiles_cmd",
    "sweep": "sweep_cmd",
    "bench": "bench_cmd",
    "vectors": "vectors_cmd",
    "explain": "explain_cmd",
    "identify": "identify_cmd",
}


class CliError(Exception):
    """A user-facing error: printed as one line ``mxgate CMD: error: MESSAGE``, exit ``status``."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def _version() -> str:
    """The installed distribution's version (what pip installed), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mxgate")
    except PackageNotFoundError:  # run from a checkout that was never installed
        from mxgate import __version__

        return __version__


class _VersionAction(argparse.Action):
    """argparse's "version" action, reading the version only when asked: the metadata read costs
    every other command about 20 ms of start-up."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, default: str = argparse.SUPPRESS,
                 help: str = "show program's version number and exit") -> None:  # noqa: A002 - argparse's keyword
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        try:
            print(f"mxgate {_version()}", flush=True)
        except BrokenPipeError:
            parser.exit(_closed_pipe())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mxgate", description="Bit-exact FP4/FP8 quantization conformance suite",
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error instead of one line, and the warnings and log lines "
                             "of the packages mxgate imports (sets MXGATE_DEBUG=1)")
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


def _one_line(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return " ".join(text.split())


def _closed_pipe() -> int:
    # Point stdout at /dev/null so the interpreter's final flush cannot raise again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_PIPE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, nested subcommands included (`vectors regen --debug`)
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    if debug:
        argv.remove("--debug")
        # also for the packages mxgate imports, here and in worker processes (mxgate.kernels.quiet)
        os.environ["MXGATE_DEBUG"] = "1"
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse's own usage errors already print one line; keep its status
        return int(stop.code or 0)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "_broken", None):
        print(f"mxgate {args.command}: unavailable: {args._broken}", file=sys.stderr)
        return EXIT_USAGE
    try:
        status = int(args.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        print(f"mxgate {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if debug:
            raise
        if isinstance(error, CliError):
            status, kind = error.status, "error"
        elif isinstance(error, (ValueError, TypeError, OSError, ImportError)):
            # bad input, an unreadable or unwritable path, a missing optional package
            status, kind = EXIT_USAGE, "error"
        else:
            status, kind = EXIT_INTERNAL, f"internal error ({type(error).__name__}; rerun with --debug)"
        try:
            print(f"mxgate {args.command}: {kind}: {_one_line(error)}", file=sys.stderr)
        except BrokenPipeError:
            pass
        return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
