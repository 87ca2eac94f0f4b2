"""mxgate identify: built-in backends named by their declared profiles, planted rules named
field by field (the indexer op's, its K front end and FP8 mode included), inconsistency, exit
statuses, the evidence file and the revision it records, and docs/identify.md as written."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from mxgate import oracle
from mxgate.identify import candidates, report
from mxgate.kernels import isolation
from mxgate.identify.run import DIFFERS, INCONSISTENT, MATCH, UNEXPLAINED, identify
from mxgate.oracle import profiles

HERE = Path(__file__).parent
USER_BACKENDS = HERE / "user_backends"
DOC = HERE.parent / "docs" / "identify.md"
INDEXER = "indexer_qk_rope_quant_and_cache"

sys.path.insert(0, str(USER_BACKENDS))  # the workers (spawned) inherit sys.path
import identify_kernels  # noqa: E402
from identify_cli import cli_env, run_identify  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and Inf probes, in the oracle's threads

# backend -> the ops identified in this test (every op it implements that identify probes and
# that runs on the CPU, sglang's writers but one and vLLM's scorers left out for time)
BUILT_IN = {
    "oracle": None,
    "ml_dtypes": None,
    "torch": None,
    "torchao": None,
    "triton-dot-scaled": None,
    "triton-mxfp": None,
    "sglang-triton": ["fp4_indexer.quantize", "sglang-page68.store"],
    "sglang-triton-rne": ["fp4_indexer.quantize"],
    "vllm-triton": ["vllm.indexer_q_mxfp4", "vllm-fp4-indexer-k.store"],  # needs MXGATE_VLLM_SRC
}
_RESULTS: dict[str, object] = {}


def _identified(name: str, ops: list[str] | None = None):
    """identify's result for a built-in backend (its workers run Triton under the CPU
    interpreter, as the command sets it up; this process never imports triton)."""
    key = f"{name}|{ops}"
    if key not in _RESULTS:
        before = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1"
        try:
            _RESULTS[key] = identify(name, ops)
        finally:
            if before is None:
                os.environ.pop("TRITON_INTERPRET")
            else:
                os.environ["TRITON_INTERPRET"] = before
    result = _RESULTS[key]
    if any(op == "*" for op, _ in result.not_run):
        pytest.skip(f"not supported here: {result.not_run[0][1]}")
    return result


REPO = HERE.parent


_env, _cli = cli_env, run_identify


def _spec(name: str) -> str:
    return f"identify_kernels:{name}"


_PLANTED: dict[str, object] = {}


def _planted(name: str):
    """identify's result for a planted kernel, once per test session."""
    if name not in _PLANTED:
        _PLANTED[name] = identify(_spec(name))
    return _PLANTED[name]


# ---- candidates ----------------------------------------------------------------------------


def test_candidates_hold_every_registered_and_type_value() -> None:
    assert set(candidates.values("tie")) == {"even", "zero", "away", "down"}
    assert set(candidates.values("nan")) == set(profiles.Profile.__annotations__ and
                                                ("max_signed", "pos_max", "neg_max", "zero", "inverted_zero",
                                                 "torchao_bits"))
    for name in profiles.names():
        p = profiles.get(name)
        for f in candidates.semantic_fields():
            assert getattr(p, f) in candidates.values(f), (name, f)
    assert None in candidates.values("amax_floor") and None in candidates.values("exp_clamp")
    with pytest.raises(ValueError, match="field must be one of"):
        candidates.values("name")


# ---- built-in backends -----------------------------------------------------------------------


# the tests that read one identify result (a module cache) run on one xdist worker, so it is made once
_SHARED_RESULT = {"oracle": pytest.mark.xdist_group("identify-oracle"),
                  "triton-mxfp": pytest.mark.xdist_group("identify-triton-mxfp")}


@pytest.mark.parametrize("name", [pytest.param(n, marks=_SHARED_RESULT.get(n, ())) for n in BUILT_IN])
def test_built_in_backend_named_by_its_declared_profile(name: str) -> None:
    if name == "vllm-triton" and not os.environ.get("MXGATE_VLLM_SRC"):
        pytest.skip("MXGATE_VLLM_SRC is not set (no vLLM checkout)")
    result = _identified(name, BUILT_IN[name])
    assert result.ops, f"{name}: nothing identified ({result.not_run})"
    for op in result.ops:
        if (name, op.op) == ("triton-mxfp", "e2m1.encode"):
            continue  # its documented defect: test_triton_mxfp_encoder_is_unexplained
        assert op.status == MATCH, (name, op.op, op.status, op.cause, op.inference and op.inference.differs)
        assert op.declared in op.inference.matches, (name, op.op, op.inference.matches)


@_SHARED_RESULT["oracle"]
def test_oracle_indexer_op_decided_by_its_side_probes() -> None:
    """The oracle's indexer op: the Q blocks name gfx950's FP4 rules, the side calls its front
    end (rsqrt-rn+fma only) and FP8 fields; every match equals gfx950 in every decided field."""
    result = _identified("oracle", BUILT_IN["oracle"])
    (op,) = [o for o in result.ops if o.op == INDEXER]
    inf = op.inference
    gfx950 = profiles.get("gfx950")
    for f in ("tie", "zero_sign", "nan", "inf", "fma_contraction", "fp8_variant", "ue8m0_rounding"):
        assert inf.fields[f].decided and inf.fields[f].value == getattr(gfx950, f), (f, inf.fields[f])
    assert inf.fields["fp8_overflow"].consistent == ("nan", "saturate")  # no finite Q row overflows
    sides = {f.probe.name: f for f in inf.sides}
    assert set(sides) == {"fp4-f32", "k-front-end", "fp8-mode", "fp8-ue8m0-f32"}
    assert all(not f.cause and not f.unexplained for f in sides.values())
    assert sides["k-front-end"].explaining == ("rsqrt-rn+fma",)
    for name in inf.matches:
        p = profiles.get(name)
        assert all(getattr(p, f) in d.consistent for f, d in inf.fields.items() if d.read), name
    assert "fp8_overflow" in "\n".join(report.text(result))


@_SHARED_RESULT["triton-mxfp"]
def test_triton_mxfp_encoder_is_unexplained() -> None:
    """triton.tools.mxfp pulls values within ~1e-6 of a midpoint to the even neighbour in any
    tensor of more than one element (docs/permitted-variations.md): no field explains that."""
    result = _identified("triton-mxfp", BUILT_IN["triton-mxfp"])
    (op,) = [o for o in result.ops if o.op == "e2m1.encode"]
    assert op.status == UNEXPLAINED and op.inference.unexplained > 0
    s = op.shrunk
    assert s is not None and s.cases.ndim == 1 and 1 <= s.cases.shape[0] <= 4
    # the shrunk input, run again in a worker of its own, still disagrees with the declared profile
    backend = isolation.load("triton-mxfp")
    try:
        codes = np.asarray(backend.op("e2m1.encode").run(s.cases))
    finally:
        backend.close()
    assert codes[s.case] == s.backend
    assert oracle.encode_e2m1(s.cases, "ocp")[s.case] != s.backend
    assert result.status == 1


# ---- planted rules ---------------------------------------------------------------------------


@pytest.mark.parametrize("plant", list(identify_kernels.PLANTS))
def test_planted_rule_named_by_exactly_its_fields(plant: str) -> None:
    declared_name, planted, ops = identify_kernels.PLANTS[plant]
    declared = profiles.get(declared_name)
    result = _planted(plant)
    assert sorted(o.op for o in result.ops) == sorted(ops)
    for op in result.ops:
        inf = op.inference
        assert op.status in (MATCH, DIFFERS), (plant, op.op, op.status, op.cause)
        for f, value in planted.items():
            assert inf.fields[f].consistent == (value,), (plant, op.op, f, inf.fields[f].consistent)
        for f, d in inf.fields.items():
            if f in planted or not d.read:
                continue
            # every other field the op reads is the declared profile's (or undecidable beside it)
            assert getattr(declared, f) in d.consistent, (plant, op.op, f, d.consistent)
        target = dataclasses.replace(declared, **planted)
        equal = [n for n in profiles.names() if all(getattr(profiles.get(n), f) == getattr(target, f)
                                                    for f, d in inf.fields.items() if d.read)]
        if op.status == MATCH:
            assert set(equal) <= set(inf.matches) and equal, (plant, op.op, inf.matches)
        else:
            assert not equal
            call = report.register_call(f"test-{plant}-{op.op}", inf)
            # the ready-to-paste call, evaluated without registering (later ops must not see it)
            unregistered = types.SimpleNamespace(get=profiles.get, register=lambda made: made)
            made = eval(call, {"profiles": unregistered, "dataclasses": dataclasses})
            for f, value in planted.items():
                assert getattr(made, f) == value
            assert set(inf.differs) == set(made.differences(profiles.get(inf.nearest)))


def test_a_field_no_probe_decides_is_said_so() -> None:
    """Above gfx950's 6*2^-126 floor, amax * fl(1/6) and amax / 6 give the same byte for every amax."""
    result = identify(_spec("divide_with_floor"))
    (op,) = result.ops
    d = op.inference.fields["scale_arithmetic"]
    assert not d.decided and set(d.consistent) == {"reciprocal", "divide"}
    assert op.status == MATCH and "gfx950" in op.inference.matches
    text = "\n".join(report.text(result))
    assert re.search(r"no probe can decide: .*scale_arithmetic", text)


def test_indexer_rsqrt_member_is_named_and_not_a_field() -> None:
    """rsqrtf one ulp below, fused: no profile field differs (the op still matches gfx950), and
    the K bytes are explained by that envelope member alone, which the report says."""
    result = _planted("indexer_rsqrt_down")
    (op,) = result.ops
    assert op.status == MATCH and "gfx950" in op.inference.matches
    (k,) = [f for f in op.inference.sides if f.probe.name == "k-front-end"]
    assert k.explaining == ("rsqrt-down+fma",) and k.axes["variant"].decided
    assert op.inference.fields["fma_contraction"].consistent == (True,)
    text = "\n".join(report.text(result))
    assert "explained by envelope member(s) rsqrt-down+fma (not the default member rsqrt-rn+fma" in text


def test_indexer_refused_side_calls_leave_their_fields_not_decided() -> None:
    """A kernel that takes only bf16 refuses the float32 side calls: their fields are said to
    be not decided by these probes (never silently), the rest is decided as on the oracle."""
    result = _planted("indexer_bf16_only")
    (op,) = result.ops
    assert op.status == MATCH and "gfx950" in op.inference.matches
    sides = {f.probe.name: f for f in op.inference.sides}
    for name in ("fp4-f32", "fp8-ue8m0-f32"):
        assert "raised TypeError: q must be bf16" in sides[name].cause, sides[name].cause
    assert not sides["k-front-end"].cause and not sides["fp8-mode"].cause
    fields = op.inference.fields
    assert not fields["ue8m0_rounding"].read and fields["fp8_variant"].decided
    assert fields["scale_policy"].consistent == ("rceil", "rceil_log2f", "rceil_exact")  # the bf16 blocks' answer
    text = "\n".join(report.text(result))
    assert re.search(r"FP8 mode, float32 inputs .*: not run \(raised TypeError: q must be bf16.*\); not decided by "
                     r"these probes: ue8m0_rounding", text), text
    # not "no probe can decide" (that the output does not depend on it): the call did not run
    assert not re.search(r"no probe can decide: .*ue8m0_rounding", text)


def test_indexer_side_evidence_reproduces_under_the_oracle(tmp_path: Path) -> None:
    """The evidence file's side-probe rows, run through the oracle's op under the planted
    profile and under each rejected value, give the outputs the file states."""
    from mxgate.identify import indexer

    out = tmp_path / "evidence.json"
    run = _cli("--backend", _spec("indexer_mul_add_fnuz_bitwise"), "--json", str(out))
    assert run.returncode == 1, run.stdout + run.stderr
    (op,) = json.loads(out.read_text())["ops"]
    assert {s["probe"] for s in op["side_probes"]} == {"fp4-f32", "k-front-end", "fp8-mode", "fp8-ue8m0-f32"}
    assert op["differs"] == {"fma_contraction": {"inferred": False, "nearest": True},
                             "fp8_variant": {"inferred": "fnuz", "nearest": "fn"},
                             "ue8m0_rounding": {"inferred": "bitwise", "nearest": "log2f"}}
    planted = dataclasses.replace(profiles.get("gfx950"), fma_contraction=False, fp8_variant="fnuz",
                                  ue8m0_rounding="bitwise")
    probes = {p.name: p for p in indexer.driver().sides}
    checked = 0
    for f in ("fma_contraction", "fp8_variant", "ue8m0_rounding"):
        for e in op["fields"][f]["evidence"]:
            probe = probes[e["probe"]]
            args = probe.calls()[e["call"]]
            (_, unit_name, _, bits) = probe.label(e["call"], e["row"], 0)
            assert e["input"] == bits
            rejected = dataclasses.replace(planted, **{f: e["rejects"]})
            for p, key in ((planted, "output"), (rejected, "output_if_rejected")):
                units = probe.units(args, probe.reference(p, args, None))
                row = units[e["row"]]
                names = [probe.label(e["call"], e["row"], u)[1] for u in range(row.size)]
                assert row[names.index(e["unit"])] == int(e[key], 16), (f, e)
            checked += 1
    assert checked >= 3


def test_inconsistent_indexer_is_reported_and_matched_to_nothing(tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    run = _cli("--backend", _spec("inconsistent_indexer"), "--json", str(out))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "INCONSISTENT" in run.stdout and "matches:" not in run.stdout
    (op,) = json.loads(out.read_text())["ops"]
    assert op["op"] == INDEXER and op["status"] == "inconsistent" and "matches" not in op


def test_inconsistent_backend_is_reported_and_matched_to_nothing() -> None:
    result = identify(_spec("inconsistent"))
    (op,) = result.ops
    assert op.status == INCONSISTENT and op.inference is None
    assert "differs from call 1" in op.cause
    assert result.status == 1
    run = _cli("--backend", _spec("inconsistent"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "INCONSISTENT" in run.stdout and "matches:" not in run.stdout


# ---- command line ----------------------------------------------------------------------------


def test_usage_errors_are_one_line_status_2() -> None:
    for args, needle in ((["--backend", "no-such-backend"], "backend must be one of"),
                         (["--backend", "oracle", "--op", "no.such.op"], "--op must be one of"),
                         (["--backend", "ml_dtypes", "--op", "mx.quantize"], "does not implement"),
                         (["--backend", "oracle", "--json", "/no/such/folder/x.json"], "--json")):
        run = _cli(*args)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert needle in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_nothing_to_run_is_status_5() -> None:
    run = _cli("--backend", "aiter")  # its HIP ops need a ROCm GPU (--device cuda on ROCm)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "nothing ran here" in run.stdout and "not available here:" in run.stdout and "ROCm" in run.stdout


def test_evidence_file_reproduces_under_the_oracle(tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    run = _cli("--backend", _spec("ties_zero"), "--op", "e2m1.encode", "--json", str(out))
    assert run.returncode == 1, run.stdout + run.stderr  # tie differs from every registered profile
    assert "tie='zero'" in run.stdout and "register: profiles.register(dataclasses.replace(" in run.stdout
    doc = json.loads(out.read_text())
    assert doc["backend"] == _spec("ties_zero") and doc["device"] == "cpu" and doc["seed"] == 0x1D25
    (op,) = doc["ops"]
    assert op["status"] == "differs" and op["differs"]["tie"]["inferred"] == "zero"
    planted = dataclasses.replace(profiles.get("gfx950"), tie="zero")
    evidence = op["fields"]["tie"]["evidence"]
    assert {e["rejects"] for e in evidence} == {"even", "away", "down"}
    for e in evidence:
        x = np.array([int(h, 16) for h in e["input"]], np.uint32).view(np.float32)
        rejected = dataclasses.replace(planted, tie=e["rejects"])
        assert oracle.encode_e2m1(x, planted)[0] == int(e["output"], 16)
        assert oracle.encode_e2m1(x, rejected)[0] == int(e["output_if_rejected"], 16)


# ---- the revision in the evidence file ------------------------------------------------------


def _fake_vllm_checkout(root: Path) -> None:
    """A tree holding the files vLLM's loader requires (stand-ins: they define nothing)."""
    from mxgate.kernels import vllm_loader

    for short in vllm_loader.SPEC.required:
        path = root / vllm_loader.SPEC.relpath(short)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# stand-in for a vLLM kernel file\n")


def test_revision_of_source_backend_descriptions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """revision_of reads what the built-in backends' descriptions say: a checkout's commit
    (+modified), a plain tree's declared revision, an installed version, sglang's version; an
    unrecorded revision is None, not a number found elsewhere in the text."""
    from mxgate.identify.run import revision_of
    from mxgate.kernels import sglang_loader
    from mxgate.kernels.sglang_triton import SglangTritonBackend
    from mxgate.kernels.vllm_triton import VllmTritonBackend

    _fake_vllm_checkout(tmp_path)
    monkeypatch.setenv("MXGATE_VLLM_SRC", str(tmp_path))
    monkeypatch.delenv("MXGATE_VLLM_REV", raising=False)
    unrecorded = VllmTritonBackend("cpu").description
    assert "unrecorded revision" in unrecorded and revision_of(unrecorded) is None
    monkeypatch.setenv("MXGATE_VLLM_REV", "v0.11.0-rc2")
    assert revision_of(VllmTritonBackend("cpu").description) == "v0.11.0-rc2"
    assert revision_of("vLLM PR #42908 ROCm Triton kernels, installed vllm 0.11.1, platform FP8 e4m3fn (gfx950), "
                       "CPU interpreter") == "0.11.1"
    assert revision_of("vLLM PR #42908 ROCm Triton kernels, checkout $MXGATE_VLLM_SRC at "
                       "0123456789abcdef0123456789abcdef01234567+modified, platform FP8 e4m3fnuz (gfx942), "
                       "CPU interpreter") == "0123456789abcdef0123456789abcdef01234567+modified"
    assert revision_of("x, installed vllm (version unknown), platform 2.5") is None
    assert revision_of(SglangTritonBackend("cpu").description) == sglang_loader.sglang_version()


def test_evidence_file_records_a_checkout_commit(tmp_path: Path) -> None:
    """--json of a built-in source backend run from a git checkout holds that commit (the
    stand-in files make the backend load; its scorers fault on them: exit 1)."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "vllm-src"
    _fake_vllm_checkout(root)
    git = ["git", "-C", str(root), "-c", "user.name=mxgate", "-c", "user.email=mxgate@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(git + args, check=True, capture_output=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    env = _env()
    env["MXGATE_VLLM_SRC"] = str(root)
    env.pop("MXGATE_VLLM_REV", None)
    out = tmp_path / "evidence.json"
    # one scorer op: the stand-ins fault at its first call (the block ops would first spend
    # seconds choosing their separating cases)
    run = _cli("--backend", "vllm-triton", "--op", "vllm.fp4_mqa_logits", "--json", str(out), env=env)
    assert run.returncode == 1 and "fault: raised AttributeError" in run.stdout, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert doc["revision"] == commit and f"at {commit}" in doc["description"]
    assert f"(revision {commit})" in run.stdout


# ---- docs/identify.md as written -------------------------------------------------------------


def _doc_examples(text: str) -> list[tuple[str, str, str, str]]:
    """(module name, module source, command, the output shown) of every worked example: a
    ```python block starting '# name.py', then the first '$ PYTHONPATH=. mxgate identify'
    command after it and the ```text block after that."""
    examples = []
    for module in re.finditer(r"```python\n# (\w+\.py)\n(.*?)```", text, flags=re.S):
        rest = text[module.end():]
        command = re.search(r"^\$ (PYTHONPATH=\. mxgate identify .*)$", rest, flags=re.M)
        assert command, f"docs/identify.md: no command after {module.group(1)}"
        shown = re.search(r"```text\n(.*?)```", rest[command.end():], flags=re.S)
        examples.append((module.group(1), module.group(2), command.group(1), shown.group(1)))
    return examples


def test_doc_worked_examples_run_as_written(tmp_path: Path) -> None:
    examples = _doc_examples(DOC.read_text())
    assert [m for m, *_ in examples] == ["my_kernel.py", "my_indexer.py"], "the doc's worked examples"
    for name, source, command, shown in examples:
        folder = tmp_path / name[:-3]
        folder.mkdir()
        (folder / name).write_text(source)
        args = command.split("mxgate identify ", 1)[1].split()
        run = _cli(*args, cwd=folder, env=_env(folder))
        expected_status = int(re.search(r"exit status (\d+)", shown).group(1))
        assert run.returncode == expected_status, run.stdout + run.stderr
        # every line the doc shows, timings aside, is in the output as printed
        for line in shown.splitlines():
            line = re.sub(r"; \d+\.\d s$", "", line)
            assert line.rstrip() in run.stdout, (name, line)
        if "--json" in args:
            doc = json.loads((folder / args[args.index("--json") + 1]).read_text())
            assert doc["status"] == expected_status
