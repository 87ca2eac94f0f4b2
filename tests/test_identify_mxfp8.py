"""mxgate identify on MXFP8 (``mx.quantize_e4m3fn``): the oracle and the peers that run here
named by their declared profile (torchao-mx-rceil's NaN choice left open, as the gate leaves it)
or reported with their documented finding's bytes, and planted
kernels (tests/user_backends/identify_mxfp8_kernels.py): a floor scale named by exactly that
field, e4m3fn overflow to NaN (no profile field: the op saturates) unexplained, shrunk."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from mxgate import kernels
from mxgate.conformance import known_findings
from mxgate.identify import report
from mxgate.identify.run import DIFFERS, MATCH, UNEXPLAINED, identify
from mxgate.op_table import OpName
from mxgate.oracle import profiles

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "user_backends"))  # the workers (spawned) inherit sys.path

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MXFP8 = OpName.MX_QUANTIZE_E4M3FN
_QNAN, _NEG_QNAN = 0x7FC00000, 0xFFC00000


def _op(name: str):
    try:
        result = identify(name, [MXFP8])
    except ValueError:  # --op refused: a source backend without its source implements nothing
        status = kernels.get(name).available()  # asked only then: it imports the backend's packages here
        if not status:
            pytest.skip(f"not supported here: {status.reason}")
        raise
    if any(op == "*" for op, _ in result.not_run):
        pytest.skip(f"not supported here: {result.not_run[0][1]}")
    (op,) = result.ops
    return result, op


def _shrunk_block(op) -> np.ndarray:
    s = op.shrunk
    assert s is not None and s.cases.shape == (1, 32), s
    return s.cases[0].view(np.uint32)


@pytest.mark.parametrize("name", ["oracle", "torchao-mx-floor"])
def test_named_by_its_declared_profile(name: str) -> None:
    result, op = _op(name)
    assert op.status == MATCH and op.declared in op.inference.matches, (op.status, op.inference.differs)
    assert result.status == 0
    assert op.inference.fields["scale_policy"].decided


def test_torchao_rceil_nan_choice_in_a_nan_block_is_open() -> None:
    """docs/findings/peers.md: in a NaN block torchao RCEIL keeps the descale's NaN (sign clear),
    so a -qNaN element gives 0x7F where torchao-rceil keeps its sign (0xFF). Those are element
    codes of 0xFF-scale blocks, which SPEC 3 leaves open (the gate rates them acceptable): the
    op matches its declared profile, and nan_scale is left undecided."""
    result, op = _op("torchao-mx-rceil")
    assert op.status == MATCH and result.status == 0
    inf = op.inference
    assert op.declared in inf.matches and inf.unexplained == 0 and op.shrunk is None
    expected = op.driver.units(op.driver.reference(profiles.get(op.declared), op.cases), op.cases.shape[0])
    wrong = np.argwhere(expected != op.backend_units)
    assert inf.open_units == wrong.shape[0] > 0
    x = op.cases.view(np.uint32)
    for case, unit in wrong.tolist():
        assert unit < 32 and op.backend_units[case, 32] == expected[case, 32] == 0xFF
        assert (x[case, unit] & 0x7FFFFFFF) > 0x7F800000 and x[case, unit] & 0x80000000  # a negative NaN
        assert (op.backend_units[case, unit], expected[case, unit]) == (0x7F, 0xFF)
    assert not inf.fields["nan_scale"].decided and inf.fields["nan_scale"].opened


def test_triton_kernels_round_up_nan_amax_byte_0() -> None:
    result, op = _op("triton-kernels-round-up")
    assert op.status == UNEXPLAINED
    assert known_findings.finding("triton-kernels-round-up", MXFP8) is not None
    block, s = _shrunk_block(op), op.shrunk
    assert ((block & 0x7FFFFFFF) > 0x7F800000).any()
    assert op.driver.unit_name(s.unit) == "e8m0" and (s.backend, s.expected) == (0x00, 0xFF)
    assert op.inference.nearest == "triton-kernels-round-up" and not op.inference.differs


def test_triton_kernels_round_down_byte_1_for_amax_0x047fffff() -> None:
    """The finding: amax 0x047FFFFF / 256 rounds up to 2^-126, byte 0x01 (OCP 0x00); the shrunk
    unit is its element code 0x78 (256 = 0x047FFFFF / 2^-126), where OCP gives 0x00."""
    result, op = _op("triton-kernels-round-down")
    assert op.status == UNEXPLAINED
    assert known_findings.finding("triton-kernels-round-down", MXFP8) is not None
    block, s = _shrunk_block(op), op.shrunk
    assert block.max() == 0x047FFFFF and (s.backend, s.expected) == (0x78, 0x00)
    assert op.inference.fields["scale_policy"].consistent == ("floor",)


def test_planted_floor_scale_named_by_exactly_that_field() -> None:
    _, op = _op("identify_mxfp8_kernels:floor_scale")
    inf, declared = op.inference, profiles.get("gfx950")
    assert op.status == DIFFERS, (op.status, op.cause)
    assert inf.fields["scale_policy"].consistent == ("floor",)
    for f, d in inf.fields.items():
        if f != "scale_policy" and d.read:
            assert getattr(declared, f) in d.consistent, (f, d.consistent)
    target = dataclasses.replace(declared, scale_policy="floor")
    assert not [n for n in profiles.names() if all(getattr(profiles.get(n), f) == getattr(target, f)
                                                   for f, d in inf.fields.items() if d.read)]
    call = report.register_call("test-mxfp8-floor", inf)
    made = eval(call, {"profiles": types.SimpleNamespace(get=profiles.get, register=lambda made: made),
                       "dataclasses": dataclasses})
    assert made.scale_policy == "floor"
    assert all(getattr(made, f) in d.consistent for f, d in inf.fields.items() if d.read)


def test_planted_nan_overflow_is_unexplained_beside_the_declared_fields() -> None:
    """Overflow to NaN is no profile field on this op (it saturates, OCP MX 6.3): the bytes stay
    unexplained, every field identify decides is the declared ocp's, and the shrunk block holds
    an element beyond 448 times its scale giving NaN where the op gives 448."""
    result, op = _op("identify_mxfp8_kernels:nan_overflow")
    inf, declared = op.inference, profiles.get("ocp")
    assert op.status == UNEXPLAINED and result.status == 1
    assert inf.nearest == "ocp" and not inf.differs
    for f, d in inf.fields.items():
        if d.read:
            assert getattr(declared, f) in d.consistent, (f, d.consistent)
    s = op.shrunk
    assert (s.backend & 0x7F, s.expected & 0x7F) == (0x7F, 0x7E) and s.backend >> 7 == s.expected >> 7
    assert f"-> codes[{s.unit}] 0x{s.backend:02x} (nan)" in "\n".join(report.text(result))
