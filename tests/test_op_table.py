"""The op table is the one declaration of every op: its names, references, fields and docs agree."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mxgate import kernels, op_table, oracle
from mxgate.op_table import TABLE, OpName

ROOT = Path(__file__).resolve().parents[1]


def test_every_op_is_declared_once_with_a_signature() -> None:
    assert set(TABLE) == set(OpName) == set(op_table.OPS)
    for spec in TABLE.values():
        assert spec.outputs or "see" in spec.signature or "keyword" in spec.signature, spec.name
        assert len(set(spec.positional)) == len(spec.positional), spec.name
        assert all(name in {a.name for a in spec.inputs} for name in spec.positional), spec.name


def test_references_resolve_and_profile_fields_exist() -> None:
    fields = {f.name for f in dataclasses.fields(oracle.profiles.Profile)}
    for spec in TABLE.values():
        assert set(spec.profile_fields) <= fields, (spec.name, set(spec.profile_fields) - fields)
        if spec.reference is not None:
            assert callable(op_table.reference(spec.name)), spec.name


def test_the_oracle_backend_implements_the_ops_the_oracle_references() -> None:
    """Every op whose reference lies in mxgate.oracle is one the oracle backend offers (aiter's
    scale modes and the multi-row quantize aside: their oracle is the same function under another
    op's name), and the backend offers nothing undeclared."""
    implemented = set(kernels.get("oracle").ops())
    assert implemented <= set(OpName)
    referenced = {s.name for s in TABLE.values() if s.reference and not s.name.startswith("aiter.")}
    assert referenced - implemented == {OpName.FP4_INDEXER_QUANTIZE_ROWS}


def test_unknown_op_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^unknown op 'e2m1.encod'; the ops are: e2m1.encode, "):
        op_table.spec("e2m1.encod")


def test_docs_table_is_current() -> None:
    done = subprocess.run([sys.executable, "-m", "mxgate", "backends", "--ops"], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert (ROOT / "docs" / "ops" / "table.md").read_text() == done.stdout, \
        "docs/ops/table.md is stale: mxgate backends --ops > docs/ops/table.md"


def test_no_op_name_literal_outside_the_op_table() -> None:
    names = sorted((op.value for op in OpName), key=len, reverse=True)
    literal = re.compile(r"""(["'])(""" + "|".join(map(re.escape, names)) + r""")\1""")
    offenders = []
    for path in sorted((ROOT / "mxgate").rglob("*.py")):
        if path.name == "op_table.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if literal.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "op names spelled outside mxgate/op_table.py:\n" + "\n".join(offenders)


def test_the_twin_reference_is_the_oracle_bit_for_bit() -> None:
    """conformance.reference.reference(op, device, twin=True) (what the gate uses on --device
    cuda) gives the oracle's bytes, run here through the twin on the CPU."""
    import numpy as np

    pytest.importorskip("torch")
    from mxgate.conformance.reference import reference
    rng = np.random.default_rng(20261201)
    x = (rng.standard_normal((32, 128)) * np.exp2(rng.integers(-8, 8, (32, 1)))).astype(np.float32)
    x[0, :8] = [np.nan, -np.inf, np.inf, -0.0, 0.25, 0.75, 6.5, 1e-40]
    calls = {
        OpName.E2M1_ENCODE: (x, "gfx950"), OpName.MX_QUANTIZE: (x, "ocp"), OpName.E4M3FN_ENCODE: (x, "fn"),
        OpName.E4M3FNUZ_ENCODE: (x, "fnuz"), OpName.E8M0_SCALE: (np.abs(x), "aiter-gfx942"), OpName.BF16_ROUND: (x,),
        OpName.E2M1_DECODE: (np.arange(16, dtype=np.uint8),), OpName.E8M0_DECODE: (np.arange(256, dtype=np.uint8), "ocp"),
    }
    for op, args in calls.items():
        want, got = op_table.reference(op)(*args), reference(op, "cpu", twin=True)(*args)
        assert reference(op, "cpu", twin=True).__name__.startswith("twin_"), op
        assert reference(op) is op_table.reference(op), op  # on the CPU the gate judges against the oracle itself
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert np.asarray(w).tobytes() == np.asarray(g).tobytes(), op
