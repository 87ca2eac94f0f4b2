"""The conformance gate: run any backend against the oracle and the golden vectors.

Run it as ``pytest --pyargs mxgate.conformance --backend NAME`` or ``mxgate check``.
"""
