"""A backend that did not load cleanly (its import, ``available()`` or ``ops()`` raised, exited,
crashed or hung in its worker) is a fail of that backend, with every report still written."""

from __future__ import annotations


def test_backend_loads(unloaded_backend: str, record_load_failure) -> None:
    record_load_failure()
