"""pytest plugin (registered through the ``pytest11`` entry point): backend selection, tiers,
Hypothesis profiles, verdict recording, process isolation of backend ops, the conformance matrix
and the exit status.

    pytest --pyargs mxgate.conformance --backend oracle --tier quick --mxgate-json matrix.json

Test contract: a test that takes the ``backend`` fixture is run once per selected backend that
can run here; mark it ``@pytest.mark.mxgate_op("op name")`` so backends that do not implement
the op are left out (no row) rather than failing. The test computes a ``Verdict`` and hands it
to the ``record`` fixture: ``record(op, config_id, verdict, seed=..., profile=...)``; a 'fail'
verdict fails the test with its reason.

The ``backend`` fixture's ops run in a worker process per backend (mxgate.kernels.isolation):
an op that raises, crashes the process or hangs past ``--mxgate-timeout`` seconds fails its
test, and the test's cell in the matrix says ``fail`` with the cause, while the rest of the run
and its reports complete. Exit statuses: mxgate.conformance.outcome.

Results travel in ``report.user_properties`` (key ``mxgate``), so under pytest-xdist every
worker's verdicts reach the controller, which prints the matrix and writes the JSON/Markdown
files. The same properties (verdict, seed, profile, first mismatch, Hypothesis profile) appear
in JUnit XML.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mxgate.conformance import hypothesis_settings, interruption, known_findings, outcome, reports
from mxgate.conformance import matrix as _matrix
from mxgate.conformance import reference as _reference
from mxgate.conformance.judge import FAIL, UNSUPPORTED, Verdict

TIERS = ("quick", "default", "exhaustive")
PROPERTY = "mxgate"
_RESULTS = pytest.StashKey[dict]()
_BACKENDS = pytest.StashKey[dict]()
_ISOLATED = pytest.StashKey[dict]()
_STATUS = pytest.StashKey[int]()
_LOCKS = pytest.StashKey[list]()
_PENDING = pytest.StashKey[list]()  # (temporary, final) report paths moved into place at the end
WORKERINPUT_KEY = "mxgate_backends"
LOAD_OP = "(loading)"  # the matrix row of a backend that did not load


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxgate", "mxgate conformance gate")
    group.addoption("--backend", action="append", default=None,
                    help="backend to check: a registered name or module.path:attr (repeatable; "
                         "default: every registered backend available here)")
    group.addoption("--tier", choices=TIERS, default="default", help="quick, default or exhaustive")
    group.addoption("--device", choices=("cpu", "cuda"), default="cpu", help="device the backends run on")
    group.addoption("--profile", default=None,
                    help="judge every backend under this semantic profile instead of its op's declared one")
    group.addoption("--mxgate-json", default=None, metavar="PATH", help="write the conformance matrix as JSON")
    group.addoption("--mxgate-md", default=None, metavar="PATH", help="write the conformance matrix as Markdown")
    group.addoption("--mxgate-hypothesis-profile", default=None, choices=hypothesis_settings.NAMES,
                    help="Hypothesis profile for the conformance tests (default: mxgate-ci when CI is set, "
                         f"else mxgate-dev; env {hypothesis_settings.ENV})")
    group.addoption("--mxgate-timeout", type=float, default=None, metavar="SECONDS",
                    help="per-call limit of a backend op; past it the op is killed and its cell fails "
                         "(default 300, or the environment variable MXGATE_TIMEOUT)")
    group.addoption("--mxgate-startup-timeout", type=float, default=None, metavar="SECONDS",
                    help="limit on loading a backend in its worker (import, available(), ops()), apart from the "
                         "per-call limit (default 600, or the environment variable MXGATE_STARTUP_TIMEOUT)")
    group.addoption("--mxgate-repeat", type=int, default=None, metavar="N",
                    help="make every op call N more times on fresh copies of its inputs (race hunting); a byte "
                         "that differs between calls is fail (nondeterministic). Default: a burst on each op's "
                         "first call, every other call twice (once in the quick tier)")
    group.addoption("--mxgate-xfail-known", action="store_true", default=False,
                    help="treat documented findings of shipped implementations (known_findings.py) as "
                         "expected failures; without it they fail like any other mismatch")
    group.addoption("--mxgate-terminal-only", action="store_true", default=False,
                    help="print mxgate's own lines only (progress, the matrix); pytest's output is kept back "
                         "and shown only when pytest itself fails (mxgate check sets this unless --verbose)")
    group.addoption("--mxgate-allow-unsupported", action="store_true", default=False,
                    help="exit 0 instead of 5 when a backend named with --backend could run nothing here")


def _gate_in_play(config: pytest.Config) -> bool:
    """Whether this pytest run involves the conformance suite (the plugin is loaded in every
    pytest run of an environment where mxgate is installed; other suites must not notice it)."""
    if config.getoption("--backend"):
        return True
    return any("conformance" in str(a) and "mxgate" in str(a) for a in config.args)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mxgate_op(name): the backend op a conformance test exercises")
    config.addinivalue_line("markers", "mxgate_backend_pairs: the test parametrizes backend_name itself")
    config.addinivalue_line("markers", "exhaustive: only in --tier exhaustive")
    config.addinivalue_line("markers", "gpu: needs --device cuda")
    config.stash[_RESULTS] = {}
    config.stash[_BACKENDS] = {}
    config.stash[_ISOLATED] = {}
    config.stash[_LOCKS] = []
    config.stash[_PENDING] = []
    if _gate_in_play(config):
        _validate(config)
        if config.getoption("--device") == "cpu":
            # triton fixes interpreter vs compiled at its first import: on the CPU every Triton
            # backend needs the interpreter, so choose it before anything imports triton.
            os.environ.setdefault("TRITON_INTERPRET", "1")
        if not _is_worker(config):
            interruption.install(config)
            config.pluginmanager.register(_JunitInPlace(config), "mxgate-junit-in-place")
            if config.getoption("--mxgate-terminal-only"):
                config.pluginmanager.register(_OwnTerminal(config), "mxgate-own-terminal")
            _load_backends(config)
            if getattr(config.option, "dist", "no") != "no" and config.pluginmanager.hasplugin("xdist"):
                config.pluginmanager.register(_XdistHandOver(config), "mxgate-xdist-hand-over")
        elif WORKERINPUT_KEY in config.workerinput:
            from mxgate.kernels import isolation

            # an xdist worker starts its backends one by one, at their first calls: whichever start
            # comes first, the fork server preloads what several of them import
            isolation.expect_starts(selected_backends(config))
    name = hypothesis_settings.choose(
        _option(config, "hypothesis_profile"), config.getoption("--mxgate-hypothesis-profile"),
        config.getoption("--tier"),
    )
    hypothesis_settings.select(name)
    config.pluginmanager.register(_Collector(config), "mxgate-result-collector")


def _usage_error(message: str) -> None:
    pytest.exit(f"mxgate: error: {message}", returncode=outcome.EXIT_USAGE)


def _validate(config: pytest.Config) -> None:
    """Every option the run depends on, checked in one line each before anything runs."""
    from mxgate import kernels
    from mxgate.oracle import profiles

    for name in config.getoption("--backend") or ():
        try:
            kernels.check_name(name)
        except (ValueError, TypeError) as error:
            _usage_error(str(error))
    repeat = config.getoption("--mxgate-repeat")
    if repeat is not None and not 0 <= repeat <= 10_000:
        _usage_error(f"--mxgate-repeat must be a whole number from 0 to 10000, got {repeat!r}")
    profile = config.getoption("--profile")
    if profile is not None and profile not in profiles.names():
        _usage_error(f"--profile must be one of {', '.join(profiles.names())}; got {profile!r}")
    try:
        timeout(config)
        startup_timeout(config)
    except ValueError as error:
        _usage_error(str(error))
    if _is_worker(config):
        return
    for option, path in (("--mxgate-json", config.getoption("--mxgate-json")),
                         ("--mxgate-md", config.getoption("--mxgate-md")),
                         ("--junitxml", getattr(config.option, "xmlpath", None))):
        if path:
            problem = unwritable(path)
            if problem:
                _usage_error(f"{option} {path}: {problem}")
            try:
                config.stash[_LOCKS].append(reports.hold(path))
            except reports.Held as held:
                _usage_error(f"{option} {path}: {held}")


def unwritable(path: str) -> str | None:
    """Why a report cannot be written at ``path`` (None when it can), checked before the run."""
    target = Path(path)
    if target.is_dir():
        return "is a directory"
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    if target.exists() and not os.access(target, os.W_OK):
        return "file is not writable"
    return None


def timeout(config: pytest.Config) -> float:
    return resolve_timeouts(config.getoption("--mxgate-timeout"), None)[0]


def startup_timeout(config: pytest.Config) -> float:
    return resolve_timeouts(None, config.getoption("--mxgate-startup-timeout"))[1]


def resolve_timeouts(call: float | None, startup: float | None) -> tuple[float, float]:
    """(per-call limit, start-up budget) from the options given, else the environment, else the defaults."""
    from mxgate.kernels.isolation import DEFAULT_STARTUP_S, DEFAULT_TIMEOUT_S

    return (_seconds(call, "MXGATE_TIMEOUT", DEFAULT_TIMEOUT_S, "--mxgate-timeout"),
            _seconds(startup, "MXGATE_STARTUP_TIMEOUT", DEFAULT_STARTUP_S, "--mxgate-startup-timeout"))


def _seconds(value: float | None, variable: str, default: float, option: str) -> float:
    if value is None:
        raw = os.environ.get(variable)
        try:
            value = float(raw) if raw else default
        except ValueError:
            raise ValueError(f"{variable} must be a number of seconds, got {raw!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{option} must be a positive number of seconds, got {value!r}")
    return float(value)


def _option(config: pytest.Config, dest: str) -> Any:
    try:
        return config.getoption(dest)
    except ValueError:  # the option's plugin is not loaded
        return None


def _candidates(config: pytest.Config) -> list[str]:
    chosen = config.getoption("--backend")
    if chosen:
        return list(dict.fromkeys(chosen))
    from mxgate import kernels

    return kernels.names()


def _load_backends(config: pytest.Config) -> None:
    """Load every backend this run considers, each in its own worker (side by side, under the
    start-up budget): a name that is no backend is a usage error now; a backend that did not load
    cleanly becomes a fail row of its own (``test_loading.py``)."""
    from mxgate import kernels
    from mxgate.kernels import isolation

    loaded = isolation.start_all(_candidates(config), config.getoption("--device"), timeout=timeout(config),
                                 startup_timeout=startup_timeout(config), policy=_policy(config), take=True)
    for name, result in loaded.items():
        if isinstance(result, kernels.NotABackend):
            for other in loaded.values():
                if isinstance(other, isolation.IsolatedBackend):
                    other.close()
            if name in (config.getoption("--backend") or ()):
                _usage_error(str(result))
            result = isolation.BackendLoadFailed(name, LOAD_OP, f"failed to load: {result}")  # an entry point gone bad
        config.stash[_BACKENDS][name] = _status_of(result)
        if isinstance(result, isolation.IsolatedBackend):
            config.stash[_ISOLATED][name] = result


def _status_of(result: Any) -> dict[str, Any]:
    """What every process of the run needs to know of one backend: its description, or why it
    did not load (pickled for pytest-xdist's workers)."""
    from mxgate.kernels.isolation import IsolatedBackend

    if isinstance(result, IsolatedBackend):
        return {"described": result.described, "fault": None}
    return {"described": None, "fault": result.cause}


def _policy(config: pytest.Config):
    from mxgate.kernels.isolation import repeat_policy

    return repeat_policy(config.getoption("--tier"), config.getoption("--mxgate-repeat"))


def _statuses(config: pytest.Config) -> dict[str, dict[str, Any]]:
    cache = config.stash[_BACKENDS]
    if not cache and _is_worker(config) and WORKERINPUT_KEY in config.workerinput:
        import pickle

        cache.update(pickle.loads(config.workerinput[WORKERINPUT_KEY]))
        for status in cache.values():
            if status["described"] is not None:
                status["described"].register_profiles()
    elif not cache:
        _load_backends(config)
    return cache


def backend_status(config: pytest.Config) -> dict[str, tuple[bool, str]]:
    """name -> (available here, reason) for every backend that loaded (computed once)."""
    out = {}
    for name, status in _statuses(config).items():
        if status["described"] is not None:
            available = status["described"].available
            out[name] = (bool(available), available.reason)
    return out


def failed_loads(config: pytest.Config) -> dict[str, str]:
    """name -> why it did not load, for every backend whose load was not clean."""
    return {name: s["fault"] for name, s in _statuses(config).items() if s["fault"] is not None}


def selected_backends(config: pytest.Config) -> list[str]:
    """The backends this run checks: the named (or all registered) ones that can run here."""
    return [name for name, (ok, _) in backend_status(config).items() if ok]


def unavailable_backends(config: pytest.Config) -> dict[str, str]:
    return {name: reason for name, (ok, reason) in backend_status(config).items() if not ok}


def isolated_backend(config: pytest.Config, name: str):
    """The backend ``name`` with its ops in a worker process (one per backend and pytest process)."""
    cache = config.stash[_ISOLATED]
    if name not in cache:
        from mxgate.kernels.isolation import IsolatedBackend, _Worker

        status = _statuses(config)[name]
        worker = _Worker(name, config.getoption("--device"), timeout(config), startup_timeout(config))
        cache[name] = IsolatedBackend(status["described"], worker, _policy(config))  # starts at its first call
    return cache[name]


class _OwnTerminal:
    """mxgate's lines only: pytest's terminal output goes to a buffer, shown only when pytest
    itself ends in an internal or usage error; mxgate prints progress and the matrix."""

    def __init__(self, config: pytest.Config) -> None:
        import io

        self.config, self.buffer, self.total, self.done, self.shown = config, io.StringIO(), 0, 0, 0

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from _pytest.config import create_terminal_writer

        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter._tw = create_terminal_writer(self.config, self.buffer)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)
        say(self.config, f"mxgate: {self.total} tests")

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.total:
            self.total = len(ids)
            say(self.config, f"mxgate: {self.total} tests over the workers")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not self.total:
            return
        self.done += 1
        tenth = self.done * 10 // self.total
        if tenth > self.shown:
            self.shown = tenth
            say(self.config, f"mxgate: {self.done}/{self.total} tests done")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        status = config.stash.get(_STATUS, None)
        if status in (None, outcome.EXIT_INTERNAL, outcome.EXIT_USAGE):
            import sys

            sys.stderr.write(self.buffer.getvalue())


def say(config: pytest.Config, line: str) -> None:
    """One line of mxgate's own output: to the terminal, or straight to standard output when
    pytest's terminal output is kept back."""
    if config.getoption("--mxgate-terminal-only"):
        print(line, flush=True)
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


class _JunitInPlace:
    """pytest's JUnit XML goes to a temporary file beside its path and is moved into place when
    the run ends, so that the path never holds half a report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        if xml is not None:
            final = xml.logfile
            xml.logfile = reports.partial_path(final)
            self.config.stash[_PENDING].append((xml.logfile, final))


class _XdistHandOver:
    """Hands every pytest-xdist worker the backends as the controller loaded them, so that each
    worker parametrizes the same tests and loads a backend only when it runs one of its ops."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        from mxgate.kernels import isolation

        isolation.close_all(list(config.stash[_ISOLATED].values()))  # the controller runs no op
        config.stash[_ISOLATED].clear()

    def pytest_configure_node(self, node: Any) -> None:
        import pickle

        node.workerinput[WORKERINPUT_KEY] = pickle.dumps(dict(self.config.stash[_BACKENDS]))


def pytest_unconfigure(config: pytest.Config) -> None:
    from mxgate.kernels import isolation

    isolation.close_all(list(config.stash.get(_ISOLATED, {}).values()))  # the workers end side by side
    reports.finish(config.stash.get(_PENDING, []), config.stash.get(_LOCKS, []))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test marked mxgate_backend_pairs parametrizes backend_name itself (with its own axis).
    if "backend_name" in metafunc.fixturenames and not metafunc.definition.get_closest_marker("mxgate_backend_pairs"):
        names = selected_backends(metafunc.config)
        metafunc.parametrize("backend_name", names, ids=names, scope="session")
    if "unloaded_backend" in metafunc.fixturenames:
        names = sorted(failed_loads(metafunc.config)) or [_NONE]
        metafunc.parametrize("unloaded_backend", names, ids=names)


_NONE = "-"  # the parameter of a test that has no backend to judge: deselected


def implements(config: pytest.Config, name: str, op: str) -> bool:
    """Whether backend ``name`` implements ``op``, as its worker described it (the gate's own
    process never imports a backend)."""
    status = _statuses(config).get(name)
    return status is None or status["described"] is None or str(op) in status["described"].ops


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    device = config.getoption("--device")
    # An op a backend does not implement is no row of the matrix: its tests are deselected
    # (the marker may sit on a parametrize value, so this is decided per collected item).
    dropped = [item for item in items if _backend_of(item) is not None and _op_of(item) != "*"
               and not implements(config, _backend_of(item), _op_of(item))]
    dropped += [item for item in items if getattr(item, "callspec", None) is not None
                and item.callspec.params.get("unloaded_backend") == _NONE]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        keep = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in keep]
    group = _group_by_backend(config, items)
    for item in items:
        backend = _backend_of(item)
        if group and backend is not None and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(BACKEND_GROUP + backend))
        if item.get_closest_marker("exhaustive") and tier != "exhaustive":
            item.add_marker(pytest.mark.skip(reason="exhaustive tier only (--tier exhaustive)"))
        if item.get_closest_marker("gpu") and device != "cuda":
            item.add_marker(pytest.mark.skip(reason="not supported here: needs --device cuda"))


BACKEND_GROUP = "mxgate-backend-"  # xdist_group name of a backend's cells; xdist appends "@" + it to node ids


def _reported_nodeid(item: pytest.Item) -> str:
    """The node id without the backend's xdist group, so that reports read the same with or without it."""
    backend = _backend_of(item)
    return item.nodeid.removesuffix(f"@{BACKEND_GROUP}{backend}") if backend is not None else item.nodeid


def _group_by_backend(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Under pytest-xdist's ``--dist loadgroup`` with several backends, each backend's cells go to
    one worker, which then starts that backend once instead of every worker starting it."""
    # an xdist worker has dist "no" and the flag xdist sets from the controller's --dist
    if not (getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", "no") == "loadgroup"):
        return False
    return len({_backend_of(item) for item in items} - {None}) > 1


@pytest.fixture(scope="session")
def tier(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--tier")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--device")


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest):
    """reference(op) -> what the gate judges ``op`` against, NumPy in and out: the NumPy oracle,
    or on --device cuda the torch twin on the card (``mxgate.conformance.reference``)."""
    device = request.config.getoption("--device")
    return lambda op: _reference.reference(op, device)


@pytest.fixture(scope="session")
def oracle_on_device(request: pytest.FixtureRequest):
    """oracle_on_device(function) -> the oracle's ``function`` as the gate computes it, NumPy in
    and out: itself, or on --device cuda its torch twin on the card (the scorers' ``*_scored``
    forms are judged this way)."""
    device = request.config.getoption("--device")
    return lambda function: _reference.computed_on(function, device)


@pytest.fixture(scope="session")
def profile_override(request: pytest.FixtureRequest) -> str | None:
    name = request.config.getoption("--profile")
    if name is not None:
        from mxgate.oracle import profiles

        profiles.get(name)  # fail early with the list of valid names
    return name


def _attach(node: pytest.Item, backend: str, op: str, config_id: str, verdict: Verdict,
            seed: int | None, profile: str | None, known: str | None = None, expected: bool = False,
            information: bool = False) -> None:
    """Put one result where every reporter (xdist controller, JUnit XML) can read it."""
    row = {
        "information": information,
        "backend": backend, "op": op, "config": config_id, "verdict": verdict.verdict, "reason": verdict.reason,
        "mismatches": verdict.mismatches, "total": verdict.total,
        "first_mismatch": list(verdict.first_mismatch) if verdict.first_mismatch is not None else None,
        "seed": seed, "profile": profile, "hypothesis_profile": hypothesis_settings.current(),
        "known": known, "expected_failure": expected,
        "nodeid": _reported_nodeid(node), "index": sum(1 for k, _ in node.user_properties if k == PROPERTY),
    }
    node.user_properties.append((PROPERTY, json.dumps(row, sort_keys=True)))
    node.user_properties.append(("verdict", f"{op}/{config_id}: {verdict.verdict}"))
    if seed is not None:
        node.user_properties.append(("seed", str(seed)))
    if profile is not None:
        node.user_properties.append(("profile", profile))
    if verdict.first_mismatch is not None:
        node.user_properties.append(("first_mismatch", str(tuple(verdict.first_mismatch))))
    if known is not None:
        node.user_properties.append(("known_finding", known))
    if not any(k == "hypothesis_profile" for k, _ in node.user_properties):
        node.user_properties.append(("hypothesis_profile", hypothesis_settings.current()))


def _op_of(node: pytest.Item) -> str:
    marker = node.get_closest_marker("mxgate_op")
    return marker.args[0] if marker else "*"


@pytest.fixture
def backend(backend_name: str, request: pytest.FixtureRequest):
    instance = isolated_backend(request.config, backend_name)
    op = _op_of(request.node)
    if op != "*":
        op_status = instance.available_for(op)
        if not op_status:  # e.g. a GPU-only op of a backend that otherwise runs here
            _attach(request.node, backend_name, op, "*", Verdict(UNSUPPORTED, op_status.reason), None, None)
            pytest.skip(f"not supported here: {backend_name} {op}: {op_status.reason}")
    return instance


@pytest.fixture
def record_load_failure(request: pytest.FixtureRequest, unloaded_backend: str):
    """Fail the test with the backend's load fault, as a row of the matrix."""
    def _record() -> None:
        cause = failed_loads(request.config)[unloaded_backend]
        known = known_findings.finding(unloaded_backend, LOAD_OP, request.config.getoption("--device"))
        _attach(request.node, unloaded_backend, LOAD_OP, "import, available() and ops()", Verdict(FAIL, cause),
                None, None, known=known)
        pytest.fail(f"{unloaded_backend}: {cause}", pytrace=False)

    return _record


@pytest.fixture
def record(request: pytest.FixtureRequest, backend_name: str):
    """record(op, config_id, verdict, seed=None, profile=None): store, attach to JUnit, fail on 'fail'."""
    xfail_known = request.config.getoption("--mxgate-xfail-known")
    device = request.config.getoption("--device")

    def _record(op: str, config_id: str, verdict: Verdict, seed: int | None = None, profile: str | None = None,
                information: bool = False) -> Verdict:
        """``information=True``: a relation to another profile, shown apart, never a verdict."""
        if information and verdict.verdict == FAIL:
            raise ValueError("an information row cannot be a fail")
        known = known_findings.finding(backend_name, op, device) if verdict.verdict == FAIL else None
        note = _backend_notes(request.config, backend_name, op)
        if note and verdict.verdict != UNSUPPORTED:
            # cells that differed between repeat calls were judged as NaN: say so beside the verdict
            import dataclasses

            verdict = dataclasses.replace(verdict, reason="; ".join(filter(None, [verdict.reason, note])))
        _attach(request.node, backend_name, op, config_id, verdict, seed, profile, known=known,
                expected=bool(known and xfail_known), information=information)
        if verdict.verdict == FAIL:
            seed_note = f" (seed {seed})" if seed is not None else ""
            where = f" first mismatch at {tuple(verdict.first_mismatch)}" if verdict.first_mismatch is not None else ""
            message = f"{backend_name} {op} {config_id}{seed_note}: {verdict.reason}{where}"
            if known is not None and xfail_known:
                pytest.xfail(f"known finding: {known}; {message}")
            pytest.fail(message + (f" [known finding: {known}]" if known else ""), pytrace=False)
        return verdict

    return _record


def _backend_notes(config: pytest.Config, name: str, op: str) -> str:
    backend = config.stash[_ISOLATED].get(name)
    return backend.take_notes(op) if backend is not None and hasattr(backend, "take_notes") else ""


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """An adapter's OutsideContract (the inputs are outside its kernel's contract) makes that one
    config 'not supported here', with the adapter's reason, wherever a test meets it."""
    from mxgate.kernels.base import OutsideContract

    try:
        return (yield)
    except OutsideContract as error:
        name = _backend_of(pyfuncitem)
        if name is None:
            raise
        reason = " ".join(f"{name} declares these inputs outside its kernel's contract: {error}".split())
        _attach(pyfuncitem, name, _op_of(pyfuncitem), _config_of(pyfuncitem), Verdict(UNSUPPORTED, reason), None, None)
        pytest.skip(f"not supported here: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test of a backend that failed without recording a fail (the op raised, crashed or hung,
    or the test itself broke) still gets its fail row, so the matrix and JUnit show the cell.
    The one raise a known finding expects (known_findings.KNOWN_FAULTS) is an expected failure
    when the run asks for them, as a mismatch of that finding would be."""
    name = _backend_of(item)
    expected = None
    if call.when in ("setup", "call") and call.excinfo is not None and name is not None:
        expected = _attach_fault(item, name, call.excinfo.value)
    report = (yield).get_result()
    if expected is not None and report.failed:
        report.outcome, report.wasxfail = "skipped", f"known finding: {expected}"


def _backend_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("backend_name") if callspec is not None else None


def _attach_fault(item: pytest.Item, name: str, error: BaseException) -> str | None:
    """Record the fault's fail row; the finding when it is the expected raise of an
    --mxgate-xfail-known run, else None."""
    from mxgate.kernels.isolation import BackendFault, BackendRaised

    if isinstance(error, (pytest.skip.Exception, pytest.xfail.Exception, KeyboardInterrupt)):
        return None
    if isinstance(error, pytest.fail.Exception) and _recorded_fail(item):
        return None  # record() already put the verdict in place
    if isinstance(error, BackendFault):
        op, reason = error.op, error.cause
    else:
        op, reason = _op_of(item), f"the conformance test broke: {type(error).__name__}: {error}"
    known = known_findings.finding(name, op, item.config.getoption("--device"))
    expected = None
    if isinstance(error, BackendRaised) and item.config.getoption("--mxgate-xfail-known"):
        expected = known_findings.expected_fault(name, op, error.type_name, error.message)
    _attach(item, name, op, _config_of(item), Verdict(FAIL, " ".join(reason.split())), None, None, known=known,
            expected=expected is not None)
    return expected


def _recorded_fail(item: pytest.Item) -> bool:
    return any(k == PROPERTY and json.loads(v)["verdict"] == FAIL for k, v in item.user_properties)


def _config_of(item: pytest.Item) -> str:
    """The test and its parameters, without the backend (the cell already names it)."""
    name = getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return name
    backend = str(callspec.params.get("backend_name", ""))
    parts = [p for p in callspec.id.split("-") if p and p != backend] if backend not in callspec.id else \
        [callspec.id.replace(backend, "", 1).strip("-")]
    tail = "-".join(p for p in parts if p)
    return f"{name}[{tail}]" if tail else name


class _Collector:
    """Gathers result rows from every test report (local, or forwarded by an xdist worker)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        store = self.config.stash[_RESULTS]
        for key, value in report.user_properties:
            if key == PROPERTY:  # the same row rides on setup, call and teardown reports: keep one
                row = json.loads(value)
                store[(row["nodeid"], row["index"])] = row


def results(config: pytest.Config) -> list[dict[str, Any]]:
    """Every recorded result row of this session, in a stable order."""
    rows = list(config.stash.get(_RESULTS, {}).values())
    return sorted(rows, key=lambda r: (r["backend"], r["op"], r["config"], r["nodeid"], r["index"]))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config) or not _gate_in_play(config):
        return
    stopped = interruption.which(config)
    if stopped is not None:
        _junit_interrupted(config, stopped)
    status = outcome.exit_status(exitstatus, results(config), list(config.getoption("--backend") or ()),
                                 allow_unsupported=config.getoption("--mxgate-allow-unsupported"),
                                 interrupted_by=stopped)
    config.stash[_STATUS] = status
    session.exitstatus = status


def _junit_interrupted(config: pytest.Config, stopped: str) -> None:
    """An error entry in the JUnit XML: a run cut short must not read as 'failures=0'."""
    from _pytest.junitxml import xml_key
    from _pytest.reports import TestReport

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    report = TestReport(nodeid="mxgate::interrupted", location=("mxgate", 0, "interrupted"), keywords={},
                        outcome="failed", longrepr=f"the run was interrupted by {stopped}: the matrix is partial",
                        when="setup")
    xml.pytest_runtest_logreport(report)


def _report(config: pytest.Config) -> dict[str, Any]:
    status = config.stash.get(_STATUS, None)
    stopped = interruption.which(config)
    return _matrix.build(results(config), unavailable_backends(config), tier=config.getoption("--tier"),
                         device=config.getoption("--device"), hypothesis_profile=hypothesis_settings.current(),
                         exit_status=status, interrupted=stopped)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _is_worker(config) or not _gate_in_play(config):
        return
    report = _report(config)
    if not config.getoption("--mxgate-terminal-only"):
        terminalreporter.section("mxgate conformance matrix")
    for line in _matrix.text_lines(report):
        say(config, line)
    for option, render in (("--mxgate-json", _matrix.to_json), ("--mxgate-md", _matrix.to_markdown)):
        path = config.getoption(option)
        if path:
            reports.write_atomically(path, render(report))
            say(config, f"mxgate: conformance matrix written to {path}")
