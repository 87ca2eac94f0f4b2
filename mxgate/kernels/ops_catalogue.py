"""Kept for backends written against it: the op table lives in ``mxgate.op_table``."""

from mxgate.op_table import OPS, POSITIONAL, OpName

__all__ = ["OPS", "POSITIONAL", "OpName"]
