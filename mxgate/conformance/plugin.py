"""pytest plugin (registered through the ``pytest11`` entry point): backend selection, tiers,
Hypothesis profiles, verdict recording and the conformance matrix.

    pytest --pyargs mxgate.conformance --backend oracle --tier quick --mxgate-json matrix.json

Test contract: a test that takes the ``backend`` fixture is run once per selected backend; mark
it ``@pytest.mark.mxgate_op("op name")`` so backends that do not implement the op are reported
as 'not supported here' rather than failing. The test computes a ``Verdict`` and hands it to the
``record`` fixture: ``record(op, config_id, verdict, seed=..., profile=...)``; a 'fail' verdict
fails the test with its reason.

Results travel in ``report.user_properties`` (key ``mxgate``), so under pytest-xdist every
worker's verdicts reach the controller, which prints the matrix and writes the JSON/Markdown
files. The same properties (verdict, seed, profile, first mismatch, Hypothesis profile) appear
in JUnit XML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mxgate.conformance import hypothesis_profiles, known_findings
from mxgate.conformance import matrix as _matrix
from mxgate.conformance.verdicts import FAIL, UNSUPPORTED, Verdict

TIERS = ("quick", "default", "exhaustive")
PROPERTY = "mxgate"
_RESULTS = pytest.StashKey[dict]()
_BACKENDS = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxgate", "mxgate conformance gate")
    group.addoption("--backend", action="append", default=None,
                    help="backend to check (repeatable; default: every backend available here)")
    group.addoption("--tier", choices=TIERS, default="default", help="quick, default or exhaustive")
    group.addoption("--device", choices=("cpu", "cuda"), default="cpu", help="device the backends run on")
    group.addoption("--profile", default=None,
                    help="judge every backend under this semantic profile instead of its op's declared one")
    group.addoption("--mxgate-json", default=None, metavar="PATH", help="write the conformance matrix as JSON")
    group.addoption("--mxgate-md", default=None, metavar="PATH", help="write the conformance matrix as Markdown")
    group.addoption("--mxgate-hypothesis-profile", default=None, choices=hypothesis_profiles.NAMES,
                    help="Hypothesis profile for the conformance tests (default: mxgate-ci when CI is set, "
                         f"else mxgate-dev; env {hypothesis_profiles.ENV})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mxgate_op(name): the backend op a conformance test exercises")
    config.addinivalue_line("markers", "mxgate_backend_pairs: the test parametrizes backend_name itself")
    config.addinivalue_line("markers", "exhaustive: only in --tier exhaustive")
    config.addinivalue_line("markers", "gpu: needs --device cuda")
    config.stash[_RESULTS] = {}
    config.stash[_BACKENDS] = {}
    if config.getoption("--device") == "cpu":
        # triton fixes interpreter vs compiled at its first import: on the CPU every Triton
        # backend needs the interpreter, so choose it before anything imports triton.
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
    name = hypothesis_profiles.choose(
        _option(config, "hypothesis_profile"), config.getoption("--mxgate-hypothesis-profile"),
        config.getoption("--tier"),
    )
    hypothesis_profiles.select(name)
    config.pluginmanager.register(_Collector(config), "mxgate-result-collector")


def _option(config: pytest.Config, dest: str) -> Any:
    try:
        return config.getoption(dest)
    except ValueError:  # the option's plugin is not loaded
        return None


def backend_status(config: pytest.Config) -> dict[str, tuple[bool, str]]:
    """name -> (available here, reason) for every registered backend (computed once)."""
    cache = config.stash[_BACKENDS]
    if not cache:
        from mxgate import kernels

        device = config.getoption("--device")
        for name in kernels.names():
            try:
                status = kernels.get(name, device=device).available()
                cache[name] = (bool(status), status.reason)
            except Exception as error:  # an adapter that cannot even say: not supported here
                cache[name] = (False, f"{type(error).__name__}: {error}")
    return cache


def selected_backends(config: pytest.Config) -> list[str]:
    from mxgate import kernels

    chosen = config.getoption("--backend")
    if chosen:
        unknown = [name for name in chosen if name not in kernels.names()]
        if unknown:
            raise pytest.UsageError(f"--backend must be one of {', '.join(kernels.names())}; got {', '.join(unknown)}")
        return list(dict.fromkeys(chosen))
    return [name for name, (ok, _) in backend_status(config).items() if ok]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test marked mxgate_backend_pairs parametrizes backend_name itself (with its own axis).
    if "backend_name" in metafunc.fixturenames and not metafunc.definition.get_closest_marker("mxgate_backend_pairs"):
        names = selected_backends(metafunc.config)
        metafunc.parametrize("backend_name", names, ids=names, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    device = config.getoption("--device")
    for item in items:
        if item.get_closest_marker("exhaustive") and tier != "exhaustive":
            item.add_marker(pytest.mark.skip(reason="exhaustive tier only (--tier exhaustive)"))
        if item.get_closest_marker("gpu") and device != "cuda":
            item.add_marker(pytest.mark.skip(reason="not supported here: needs --device cuda"))


@pytest.fixture(scope="session")
def tier(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--tier")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--device")


@pytest.fixture(scope="session")
def profile_override(request: pytest.FixtureRequest) -> str | None:
    name = request.config.getoption("--profile")
    if name is not None:
        from mxgate.oracle import profiles

        profiles.get(name)  # fail early with the list of valid names
    return name


def _attach(node: pytest.Item, backend: str, op: str, config_id: str, verdict: Verdict,
            seed: int | None, profile: str | None) -> None:
    """Put one result where every reporter (xdist controller, JUnit XML) can read it."""
    row = {
        "backend": backend, "op": op, "config": config_id, "verdict": verdict.verdict, "reason": verdict.reason,
        "mismatches": verdict.mismatches, "total": verdict.total,
        "first_mismatch": list(verdict.first_mismatch) if verdict.first_mismatch is not None else None,
        "seed": seed, "profile": profile, "hypothesis_profile": hypothesis_profiles.current(),
        "nodeid": node.nodeid, "index": sum(1 for k, _ in node.user_properties if k == PROPERTY),
    }
    node.user_properties.append((PROPERTY, json.dumps(row, sort_keys=True)))
    node.user_properties.append(("verdict", f"{op}/{config_id}: {verdict.verdict}"))
    if seed is not None:
        node.user_properties.append(("seed", str(seed)))
    if profile is not None:
        node.user_properties.append(("profile", profile))
    if verdict.first_mismatch is not None:
        node.user_properties.append(("first_mismatch", str(tuple(verdict.first_mismatch))))
    if not any(k == "hypothesis_profile" for k, _ in node.user_properties):
        node.user_properties.append(("hypothesis_profile", hypothesis_profiles.current()))


@pytest.fixture
def backend(backend_name: str, device: str, request: pytest.FixtureRequest):
    from mxgate import kernels

    instance = kernels.get(backend_name, device=device)
    status = instance.available()
    marker = request.node.get_closest_marker("mxgate_op")
    op = marker.args[0] if marker else "*"
    if not status:
        _attach(request.node, backend_name, op, "*", Verdict(UNSUPPORTED, status.reason), None, None)
        pytest.skip(f"not supported here: {backend_name}: {status.reason}")
    if op != "*" and not instance.implements(op):
        _attach(request.node, backend_name, op, "*", Verdict(UNSUPPORTED, f"{backend_name} does not implement {op}"),
                None, None)
        pytest.skip(f"not supported here: {backend_name} does not implement {op}")
    if op != "*":
        op_status = instance.available_for(op)
        if not op_status:  # e.g. a GPU-only op of a backend that otherwise runs here
            _attach(request.node, backend_name, op, "*", Verdict(UNSUPPORTED, op_status.reason), None, None)
            pytest.skip(f"not supported here: {backend_name} {op}: {op_status.reason}")
    return instance


@pytest.fixture
def record(request: pytest.FixtureRequest, backend_name: str):
    """record(op, config_id, verdict, seed=None, profile=None): store, attach to JUnit, fail on 'fail'."""

    def _record(op: str, config_id: str, verdict: Verdict, seed: int | None = None, profile: str | None = None) -> Verdict:
        _attach(request.node, backend_name, op, config_id, verdict, seed, profile)
        if verdict.verdict == FAIL:
            seed_note = f" (seed {seed})" if seed is not None else ""
            where = f" first mismatch at {tuple(verdict.first_mismatch)}" if verdict.first_mismatch is not None else ""
            message = f"{backend_name} {op} {config_id}{seed_note}: {verdict.reason}{where}"
            documented = known_findings.finding(backend_name, op)
            if documented is not None:
                pytest.xfail(f"known finding: {documented}; {message}")
            pytest.fail(message, pytrace=False)
        return verdict

    return _record


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


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _is_worker(config):
        return
    rows = results(config)
    # With --backend the chosen ones report themselves (unavailable ones per test); without it
    # every registered backend that cannot run here gets a 'not supported here' row.
    chosen = config.getoption("--backend")
    missing = {} if chosen or not rows else {n: r for n, (ok, r) in backend_status(config).items() if not ok}
    report = _matrix.build(rows, missing, tier=config.getoption("--tier"), hypothesis_profile=hypothesis_profiles.current())
    if rows or missing:
        terminalreporter.section("mxgate conformance matrix")
        for line in _matrix.text_lines(report):
            terminalreporter.write_line(line)
    for option, render in (("--mxgate-json", _matrix.to_json), ("--mxgate-md", _matrix.to_markdown)):
        path = config.getoption(option)
        if path:
            Path(path).write_text(render(report), encoding="utf-8")
            terminalreporter.write_line(f"mxgate: conformance matrix written to {path}")
