"""``mxgate check``: run the conformance suite on the backends available here and print the matrix."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="run the conformance gate on the available backends")
    parser.add_argument("--backend", action="append", default=None, help="backend to check (repeatable; default: every available one)")
    parser.add_argument("--tier", choices=("quick", "default", "exhaustive"), default="default")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--profile", default=None, help="judge every backend under this profile")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the matrix as JSON to this file")
    parser.add_argument("--markdown", dest="md_path", default=None, help="also write the matrix as Markdown to this file")
    parser.add_argument("--junitxml", default=None, help="JUnit XML report path")
    parser.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (e.g. 2 or auto)")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    parser.set_defaults(run=run)


def pytest_arguments(args: argparse.Namespace, backends: list[str]) -> list[str]:
    argv = ["--pyargs", "mxgate.conformance", "-p", "no:cacheprovider", "-q", "--tier", args.tier, "--device", args.device]
    for name in backends:
        argv += ["--backend", name]
    if args.profile:
        argv += ["--profile", args.profile]
    if args.json_path:
        argv += ["--mxgate-json", args.json_path]
    if args.md_path:
        argv += ["--mxgate-md", args.md_path]
    if args.junitxml:
        argv += ["--junitxml", args.junitxml]
    if args.workers:
        argv += ["-n", str(args.workers)]
    if not _plugin_installed():
        argv = ["-p", "mxgate.conformance.plugin"] + argv
    return argv + list(args.pytest_args)


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11"))


def run(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        # Before anything imports triton: on the CPU its kernels run under the interpreter.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import pytest

    from mxgate import kernels

    if args.backend:
        backends = args.backend
        for name in backends:
            kernels.get(name, args.device)  # unknown names fail here with the list
    else:
        backends = kernels.available(args.device)
        skipped = [n for n in kernels.names() if n not in backends]
        for name in skipped:
            print(f"not supported here: {name}: {kernels.get(name, args.device).available().reason}")
    print(f"mxgate check: tier {args.tier}, device {args.device}, backends: {', '.join(backends)}", flush=True)
    # The conformance package must not pick up a checkout's rootdir conftest twice.
    with tempfile.TemporaryDirectory() as scratch:
        cwd = os.getcwd()
        os.chdir(scratch)
        try:
            code = pytest.main(pytest_arguments(args, backends))
        finally:
            os.chdir(cwd)
    sys.stdout.flush()
    return int(code)
