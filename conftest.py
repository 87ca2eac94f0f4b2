"""Repository-level pytest setup: load the mxgate plugin when it is not installed as an entry point."""

from importlib.metadata import entry_points

if not any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["mxgate.conformance.plugin"]
