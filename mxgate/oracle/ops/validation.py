"""The former name of :mod:`mxgate.oracle.ops.indexer_checks` (the indexer op's host checks),
kept for callers that import it from here."""

from mxgate.oracle.ops.indexer_checks import Call, check_call, fresh_outputs  # noqa: F401
