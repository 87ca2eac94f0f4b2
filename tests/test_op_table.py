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


def test_every_op_is_declared_once_with_typed_inputs_and_outputs() -> None:
    assert list(TABLE) == list(OpName)
    for spec in TABLE.values():
        assert spec.inputs and spec.outputs, spec.name
        names = [a.name for a in spec.inputs]
        assert all(names) and len(set(names)) == len(names), spec.name
        assert set(spec.inplace) <= set(names), spec.name
        assert all(isinstance(a, op_table.Arg) for a in spec.results()), spec.name
        # the positional call order: the leading required inputs, in declared order
        assert spec.positional == tuple(names[:len(spec.positional)]), spec.name
        assert not spec.keywords or spec.positional == (), spec.name


def test_the_signature_is_generated_from_the_declaration() -> None:
    mx = op_table.spec(OpName.MX_QUANTIZE)
    assert mx.signature == "(x: float32[..., N]) -> (packed uint8[..., N/2], e8m0 uint8[..., N/32]), groups of 32"
    store = op_table.spec(OpName.VLLM_FP4_INDEXER_K_STORE)
    assert store.positional == ("k_bf16", "slots", "cache") and store.inplace == ("cache",)
    assert store.signature.startswith("(k_bf16: uint16[T, 128], slots: int64[T], cache: uint8[num_blocks, page_bytes], "
                                      "*, block_size: int = 64) -> cache, ")
    assert op_table.spec(OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE).signature.startswith("(*, q: uint16[T, H, 128] bf16, ")
    for spec in TABLE.values():
        for a in spec.inputs:
            assert a.parameter() in spec.signature, (spec.name, a.name)


def test_a_declaration_that_writes_an_undeclared_input_is_refused() -> None:
    x = op_table.Arg("x", "float32", "[...]")
    with pytest.raises(ValueError, match=r"\['out'\] named as written in place but not inputs"):
        op_table.OpSpec(OpName.E2M1_ENCODE, (x,), ("out",), op_table.Compare.BITS, None, (), inplace=("out",))
    with pytest.raises(ValueError, match="must be listed in inplace"):
        op_table.OpSpec(OpName.E2M1_ENCODE, (x,), ("x",), op_table.Compare.BITS, None, ())


def test_e8m0_decode_reads_the_byte_rules_it_declares() -> None:
    """The declared profile fields of e8m0.decode are the ones its reference reads: changing
    byte0 or byte255 changes the decoded values, changing nan_scale (a quantizer's rule) does not."""
    import numpy as np

    decode = op_table.reference(OpName.E8M0_DECODE)
    codes = np.arange(256, dtype=np.uint8)
    base = oracle.profiles.get("gfx950")
    flipped = {"byte0": "zero" if base.byte0 != "zero" else "pow2", "byte255": "inf" if base.byte255 != "inf" else "nan",
               "nan_scale": "nan" if base.nan_scale != "nan" else "exponent"}
    reads = {f for f, v in flipped.items()
             if decode(codes, dataclasses.replace(base, **{f: v})).tobytes() != decode(codes, base).tobytes()}
    assert reads == set(op_table.spec(OpName.E8M0_DECODE).profile_fields) == {"byte0", "byte255"}


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


def test_the_device_reference_is_the_oracle_bit_for_bit() -> None:
    """conformance.reference.reference(op, device, twin=True) (what the gate uses on --device
    cuda) gives the oracle's bytes, run here on torch CPU tensors."""
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
        assert reference(op, "cpu", twin=True).__name__.endswith("_on_cpu"), op  # computed on tensors
        assert reference(op) is op_table.reference(op), op  # on the CPU the gate judges against the oracle itself
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert np.asarray(w).tobytes() == np.asarray(g).tobytes(), op
