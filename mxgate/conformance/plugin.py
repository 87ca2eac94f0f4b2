"""pytest plugin (registered through the ``pytest11`` entry point): backend selection, tiers,
verdict recording and the conformance matrix.

Test contract: a test that takes the ``backend`` fixture is run once per selected backend; mark
it ``@pytest.mark.mxgate_op("op name")`` so backends that do not implement the op are reported
as 'not supported here' rather than failing. The test computes a ``Verdict`` and hands it to the
``record`` fixture: ``record(op, config_id, verdict, seed=..., profile=...)``; a 'fail' verdict
fails the test with its reason.
"""

from __future__ import annotations

import pytest

from mxgate.conformance.verdicts import FAIL, UNSUPPORTED, Verdict

TIERS = ("quick", "default", "exhaustive")
_RESULTS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxgate", "mxgate conformance gate")
    group.addoption("--backend", action="append", default=None, help="backend to check (repeatable; default: every registered one)")
    group.addoption("--tier", choices=TIERS, default="default", help="quick, default or exhaustive")
    group.addoption("--device", choices=("cpu", "cuda"), default="cpu", help="device the backends run on")
    group.addoption("--profile", default=None, help="judge every backend under this profile instead of its declared one")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mxgate_op(name): the backend op a conformance test exercises")
    config.addinivalue_line("markers", "exhaustive: only in --tier exhaustive")
    config.addinivalue_line("markers", "gpu: needs --device cuda")
    config.stash[_RESULTS] = []


def selected_backends(config: pytest.Config) -> list[str]:
    from mxgate import kernels

    chosen = config.getoption("--backend") or kernels.names()
    unknown = [name for name in chosen if name not in kernels.names()]
    if unknown:
        raise pytest.UsageError(f"--backend must be one of {', '.join(kernels.names())}; got {', '.join(unknown)}")
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
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


@pytest.fixture
def backend(backend_name: str, device: str, request: pytest.FixtureRequest):
    from mxgate import kernels

    instance = kernels.get(backend_name, device=device)
    status = instance.available()
    marker = request.node.get_closest_marker("mxgate_op")
    op = marker.args[0] if marker else None
    if not status:
        _store(request.config, backend_name, op or "*", "*", Verdict(UNSUPPORTED, status.reason))
        pytest.skip(f"not supported here: {backend_name}: {status.reason}")
    if op is not None and not instance.implements(op):
        pytest.skip(f"not supported here: {backend_name} does not implement {op}")
    return instance


def _store(config: pytest.Config, backend: str, op: str, config_id: str, verdict: Verdict) -> None:
    config.stash[_RESULTS].append((backend, op, config_id, verdict))


@pytest.fixture
def record(request: pytest.FixtureRequest, backend_name: str):
    """record(op, config_id, verdict, seed=None, profile=None): store, attach to JUnit, fail on 'fail'."""

    def _record(op: str, config_id: str, verdict: Verdict, seed: int | None = None, profile: str | None = None) -> Verdict:
        _store(request.config, backend_name, op, config_id, verdict)
        node = request.node
        node.user_properties.append(("verdict", f"{op}/{config_id}: {verdict.verdict}"))
        if seed is not None:
            node.user_properties.append(("seed", str(seed)))
        if profile is not None:
            node.user_properties.append(("profile", profile))
        if verdict.first_mismatch is not None:
            node.user_properties.append(("first_mismatch", str(verdict.first_mismatch)))
        if verdict.verdict == FAIL:
            seed_note = f" (seed {seed})" if seed is not None else ""
            pytest.fail(f"{backend_name} {op} {config_id}{seed_note}: {verdict.reason}", pytrace=False)
        return verdict

    return _record


def results(config: pytest.Config) -> list[tuple[str, str, str, Verdict]]:
    """Every recorded (backend, op, config_id, verdict) of this session."""
    return list(config.stash.get(_RESULTS, []))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    rows = results(config)
    if not rows:
        return
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for backend, op, _, verdict in rows:
        cell = counts.setdefault((backend, op), {})
        cell[verdict.verdict] = cell.get(verdict.verdict, 0) + 1
    terminalreporter.section("mxgate conformance matrix")
    for (backend, op), cell in sorted(counts.items()):
        summary = ", ".join(f"{k} {v}" for k, v in sorted(cell.items()))
        terminalreporter.write_line(f"{backend:<20} {op:<36} {summary}")
