"""The Hypothesis settings of the conformance suite: three named sets (registered with
Hypothesis, which calls them settings profiles), and which one a run uses.

mxgate-ci        derandomised, no example database, no deadline, failure blob printed
mxgate-dev       few examples, local database, no deadline, failure blob printed
mxgate-thorough  many examples, no deadline, failure blob printed (the exhaustive tier's default)

Selection, first match wins: hypothesis' own ``--hypothesis-profile``; ``--mxgate-hypothesis-profile``;
the environment variable ``MXGATE_HYPOTHESIS_PROFILE``; ``mxgate-ci`` when ``CI`` is set;
``mxgate-thorough`` under ``--tier exhaustive``; else ``mxgate-dev``. The choice applies to the
mxgate tests only (through ``suite_settings``), never to other tests of the same session.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI = "mxgate-ci"
DEV = "mxgate-dev"
THOROUGH = "mxgate-thorough"
NAMES = (CI, DEV, THOROUGH)
ENV = "MXGATE_HYPOTHESIS_PROFILE"

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(CI, derandomize=True, database=None, deadline=None, print_blob=True,
                          max_examples=40, suppress_health_check=_SLOW_OK)
settings.register_profile(DEV, deadline=None, print_blob=True, max_examples=20, suppress_health_check=_SLOW_OK)
settings.register_profile(THOROUGH, deadline=None, print_blob=True, max_examples=1000, suppress_health_check=_SLOW_OK)

_selected: str | None = None


def choose(explicit_hypothesis: str | None, explicit_mxgate: str | None, tier: str,
           environ: dict[str, str] | None = None) -> str:
    """The name of the settings a run uses (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    for name in (explicit_hypothesis, explicit_mxgate, env.get(ENV)):
        if name:
            settings.get_profile(name)  # raises InvalidArgument naming unknown settings
            return name
    if env.get("CI"):
        return CI
    return THOROUGH if tier == "exhaustive" else DEV


def select(name: str) -> None:
    global _selected
    settings.get_profile(name)
    _selected = name


def current() -> str:
    """The name of the selected settings (mxgate-dev when no pytest session selected one)."""
    return _selected or os.environ.get(ENV) or (CI if os.environ.get("CI") else DEV)


def suite_settings(**overrides) -> settings:
    """Settings for a conformance test: the selected ones, with per-test overrides."""
    return settings(settings.get_profile(current()), **overrides)


def search(strategy, judge, failed) -> tuple[list, bool]:
    """Run ``judge(example)`` on Hypothesis examples under the suite's settings. Returns every
    result, in order, and whether the search failed (``failed(result)`` on some example); then
    the last result is the shrunk failing example's, which Hypothesis replays last."""
    from hypothesis import given

    seen: list = []

    @suite_settings()
    @given(strategy)
    def check(example) -> None:
        seen.append(judge(example))
        if failed(seen[-1]):
            raise AssertionError("failing example")

    try:
        check()
    except AssertionError:
        return seen, True
    return seen, False
