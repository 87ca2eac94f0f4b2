"""``mxgate check``: run the conformance suite on the chosen (or every available) backend and
print the matrix. The same run as ``pytest --pyargs mxgate.conformance``, with the same exit
status (mxgate.conformance.outcome)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from mxgate.cli import CliError
from mxgate.conformance import outcome

EPILOG = """exit status:
  0    every verdict exact or acceptable, and every --backend ran at least one op here
  1    at least one fail (known findings included, unless --xfail-known)
  2    usage error (unknown backend, profile, tier, device; an output path that cannot be
       written), said in one line before anything runs
  3    internal error
  5    nothing failed, but a --backend could run nothing here (package absent, no GPU);
       --allow-unsupported makes this 0
  130  interrupted (SIGINT); 143 terminated (SIGTERM): the reports are written and marked
       interrupted, the backends' workers ended

Each backend is loaded in a worker process of its own (under --startup-timeout) and its ops run
there: a backend whose import, available() or ops() raises, exits or hangs is a fail of that
backend; an op that raises, crashes its worker, runs past --timeout, writes into an input that
is not its output buffer, refuses inputs its declared contract does not exclude, or gives
different bytes when called again on the same inputs is a fail of that cell, named in the
matrix; the other cells and the report files still complete. A report path another live run
is writing is refused (2). Report paths are relative to the directory the command was started in."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="run the conformance gate on the available backends",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", action="append", default=None,
                        help="backend to check: a registered name (mxgate backends) or module.path:attr "
                             "(repeatable; default: every registered backend available here)")
    parser.add_argument("--tier", choices=("quick", "default", "exhaustive"), default="default")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--profile", default=None, help="judge every backend under this profile")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the matrix as JSON to this file")
    parser.add_argument("--markdown", dest="md_path", default=None, help="also write the matrix as Markdown to this file")
    parser.add_argument("--junitxml", default=None, help="JUnit XML report path")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="per-call limit of a backend op before it is killed and fails (default 300)")
    parser.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                        help="limit on loading a backend in its worker, apart from --timeout (default 600)")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="call every op N more times on fresh copies of its inputs (race hunting on a device); "
                             "default: a burst on each op's first call, every other call twice")
    parser.add_argument("--verbose", action="store_true", help="show pytest's own output as well")
    parser.add_argument("--xfail-known", action="store_true",
                        help="documented findings of shipped implementations are expected failures (exit 0 "
                             "if nothing else fails); without it they fail like any mismatch")
    parser.add_argument("--allow-unsupported", action="store_true",
                        help="exit 0 instead of 5 when a --backend could run nothing here")
    parser.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (e.g. 2 or auto)")
    parser.add_argument("pytest_args", nargs="*",
                        help="extra arguments passed to pytest (after --; e.g. -- --tb=long for tracebacks)")
    parser.set_defaults(run=run)


def _output_path(option: str, path: str | None) -> str | None:
    """The absolute path of a report file, refused in one line now if it cannot be written later."""
    if path is None:
        return None
    from mxgate.conformance.plugin import unwritable

    from mxgate.conformance import reports

    problem = unwritable(path)
    if problem:
        raise CliError(f"{option} {path}: {problem}")
    try:
        _HELD.append(reports.hold(path))  # the pytest run takes the same lock over (same process)
    except reports.Held as held:
        raise CliError(f"{option} {path}: {held}") from None
    return str(Path(path).resolve())


_HELD: list[Path] = []


def pytest_arguments(args: argparse.Namespace, backends: list[str], ini: str) -> list[str]:
    # -c/--rootdir: no ini file of the current directory (or of a checkout) changes the run;
    # --noconftest: no conftest.py of the current directory is loaded into the gate.
    # no:unraisableexception: its session end runs gc.collect five times (0.3 s a run), and the
    # backends run in their workers, where it would see nothing.
    import mxgate.conformance

    package = str(Path(mxgate.conformance.__file__).parent)
    argv = ["--pyargs", "mxgate.conformance", "-c", ini, "--rootdir", package, "--noconftest",
            "-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:unraisableexception", "-q", "--tb=no", "-rN", "--tier", args.tier, "--device", args.device,
            "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if not args.verbose:
        argv.append("--mxgate-terminal-only")
    for name in backends:
        argv += ["--backend", name]
    options = (("--profile", args.profile), ("--mxgate-json", args.json_path), ("--mxgate-md", args.md_path),
               ("--junitxml", args.junitxml), ("--mxgate-timeout", args.timeout),
               ("--mxgate-startup-timeout", args.startup_timeout), ("--mxgate-repeat", args.repeat), ("-n", args.workers))
    for option, value in options:
        if value is not None:
            argv += [option, str(value)]
    if args.xfail_known:
        argv.append("--mxgate-xfail-known")
    if args.allow_unsupported:
        argv.append("--mxgate-allow-unsupported")
    if not _plugin_installed():
        argv = ["-p", "mxgate.conformance.plugin"] + argv
    return argv + list(args.pytest_args)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mxgate"


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11"))


def _validate(args: argparse.Namespace) -> None:
    from mxgate import kernels
    from mxgate.oracle import profiles

    for name in args.backend or ():
        kernels.check_name(name)  # unknown names and malformed specs: one line, status 2
    if args.profile is not None and args.profile not in profiles.names():
        raise CliError(f"--profile must be one of {', '.join(profiles.names())}; got {args.profile!r}")
    for option, value in (("--timeout", args.timeout), ("--startup-timeout", args.startup_timeout)):
        if value is not None and not (0 < value < float("inf")):
            raise CliError(f"{option} must be a positive number of seconds, got {value!r}")
    if args.repeat is not None and not 0 <= args.repeat <= 10_000:
        raise CliError(f"--repeat must be a whole number from 0 to 10000, got {args.repeat!r}")
    args.json_path = _output_path("--json", args.json_path)
    args.md_path = _output_path("--markdown", args.md_path)
    args.junitxml = _output_path("--junitxml", args.junitxml)
    _load(args)


def _load(args: argparse.Namespace) -> None:
    """Load every backend of the run in its worker now: a name that is no backend (a module that
    does not exist, an object that is no Backend) is a usage error before anything runs. The
    pytest run takes these loads over (a fault while loading is a fail row there)."""
    from mxgate import kernels
    from mxgate.kernels import isolation
    from mxgate.conformance.plugin import resolve_timeouts

    try:
        call, startup = resolve_timeouts(args.timeout, args.startup_timeout)
    except ValueError as error:
        raise CliError(str(error)) from None
    names = list(dict.fromkeys(args.backend)) if args.backend else kernels.names()
    loaded = isolation.start_all(names, args.device, timeout=call, startup_timeout=startup, keep=True)
    for name in args.backend or ():
        if isinstance(loaded[name], kernels.NotABackend):
            isolation.forget_kept()
            raise CliError(str(loaded[name]))


def run(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        # Before anything imports triton: on the CPU its kernels run under the interpreter.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    # Hypothesis keeps its example database outside the caller's directory. Set before the
    # backends load: a worker restarted after a crash then has the environment the fork server
    # started under, and forks from it instead of spawning (importing torch again).
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(_cache_dir() / "hypothesis"))
    try:
        return _run(args)
    finally:
        from mxgate.conformance import reports
        from mxgate.kernels import isolation

        isolation.forget_kept()
        while _HELD:
            reports.release(_HELD.pop())


def _run(args: argparse.Namespace) -> int:
    _validate(args)
    import pytest

    from mxgate import kernels

    backends = list(dict.fromkeys(args.backend)) if args.backend else kernels.names()
    print(f"mxgate check: tier {args.tier}, device {args.device}, backends: {', '.join(backends)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="mxgate-check-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        code = pytest.main(pytest_arguments(args, list(args.backend or ()), str(ini)))
    sys.stdout.flush()
    code = int(code)
    if code == int(pytest.ExitCode.USAGE_ERROR):  # pytest refused its own arguments (after --)
        return outcome.EXIT_USAGE
    return code if code in outcome.MEANING else outcome.EXIT_INTERNAL
