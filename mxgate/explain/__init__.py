"""Mismatch classifier: name the root cause of every differing nibble between an expected
and an actual buffer (sign of zero, tie direction, scale off by one, saturation, NaN/Inf
rule, nibble swap, layout permutation, untouched bytes, index overflow, unexplained).

    from mxgate.explain import explain
    report = explain(expected, actual, layout="aiter-fp4-kv", profile="gfx950", input=k)
    report.counts        # {class name: differing units}
    report.rows[0]       # coordinates, both codes decoded, class, detail
    print(report.summary())
    report.to_json(); report.plot("mismatch.png")
"""

from mxgate.explain.api import explain
from mxgate.explain.classes import COUNT_KEYS, DEFINITIONS, PRECEDENCE
from mxgate.explain.report import Report

CLASSES = COUNT_KEYS

__all__ = ["CLASSES", "COUNT_KEYS", "DEFINITIONS", "PRECEDENCE", "Report", "explain"]
