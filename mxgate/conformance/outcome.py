"""The gate's exit status: one contract for ``mxgate check`` and ``pytest --pyargs mxgate.conformance``.

=====  =========================================================================================
0      every recorded verdict is exact or acceptable, and every backend named with ``--backend``
       ran at least one op here
1      at least one verdict is fail (known findings included, unless the run passes
       ``--mxgate-xfail-known``), or a test of the session failed or errored
2      usage error (unknown backend, profile, tier or device; an output path that cannot be
       written; ...), said in one line before anything runs
3      internal error of mxgate or pytest, or a test module that could not be collected
       (pytest's "Interrupted: N errors during collection" without a signal)
5      nothing failed, but a backend named with ``--backend`` could run nothing here (package
       absent, no GPU, ...) or no verdict was recorded at all; ``--mxgate-allow-unsupported``
       (``mxgate check --allow-unsupported``) turns this into 0
130    interrupted (SIGINT); the reports written so far are marked interrupted
143    terminated (SIGTERM); likewise
=====  =========================================================================================
"""

from __future__ import annotations

from typing import Any, Iterable

from mxgate.conformance.judge import ACCEPTABLE, EXACT, FAIL

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_NOTHING_RAN = 5
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

MEANING = {
    EXIT_PASS: "every verdict exact or acceptable",
    EXIT_FAIL: "at least one fail",
    EXIT_USAGE: "usage error",
    EXIT_INTERNAL: "internal error",
    EXIT_NOTHING_RAN: "a named backend ran nothing here",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_TERMINATED: "terminated (SIGTERM)",
}

# pytest's own ExitCode values -> this contract. pytest's INTERRUPTED (2) without a signal that
# the gate recorded (interruption.install) is "errors during collection": an internal error.
_FROM_PYTEST = {0: EXIT_PASS, 1: EXIT_FAIL, 2: EXIT_INTERNAL, 3: EXIT_INTERNAL, 4: EXIT_USAGE, 5: EXIT_NOTHING_RAN}


def counts_as_failure(row: dict[str, Any]) -> bool:
    """A fail verdict, unless it is a known finding the run asked to expect."""
    return row["verdict"] == FAIL and not row.get("expected_failure")


def backends_that_ran(rows: Iterable[dict[str, Any]]) -> set[str]:
    return {r["backend"] for r in rows if r["verdict"] in (EXACT, ACCEPTABLE, FAIL)}


def exit_status(pytest_status: int, rows: list[dict[str, Any]], named: list[str], *, allow_unsupported: bool,
                interrupted_by: str | None = None) -> int:
    """The contract's status for one run (see the module docstring)."""
    if interrupted_by == "SIGTERM":
        return EXIT_TERMINATED
    if interrupted_by == "SIGINT":
        return EXIT_INTERRUPTED
    status = _FROM_PYTEST.get(int(pytest_status), EXIT_INTERNAL)
    if status in (EXIT_USAGE, EXIT_INTERNAL):
        return status
    if any(counts_as_failure(r) for r in rows):
        return EXIT_FAIL
    if status == EXIT_FAIL:
        return EXIT_FAIL
    ran = backends_that_ran(rows)
    if any(name not in ran for name in named) or (status == EXIT_NOTHING_RAN or not ran):
        return EXIT_PASS if allow_unsupported else EXIT_NOTHING_RAN
    return EXIT_PASS
