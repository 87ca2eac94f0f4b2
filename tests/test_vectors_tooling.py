"""Golden-vector tooling: determinism, integrity, interrupted regeneration, drift detection,
and serial vs pytest-xdist verdict parity (acceptance criteria 1-4 and 6)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from mxgate import oracle
from mxgate.cli import vectors_cmd
from mxgate.vectors import generator, manifest
from mxgate.vectors.families import elements
from mxgate.vectors.loader import VectorSet

REPO = Path(__file__).resolve().parents[1]
DATA = generator.package_data_dir()


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _copy_data(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    shutil.copytree(DATA, out)
    return out


def _args(command: str, out: Path, check: bool = False, force: bool = False) -> argparse.Namespace:
    return argparse.Namespace(vectors_command=command, out=out, check=check, force=force)


# ---- 1. determinism ---------------------------------------------------------------------------


@pytest.mark.slow
def test_two_regenerations_are_byte_identical_and_match_the_committed_set(tmp_path: Path) -> None:
    # Two independent processes, run side by side (one per core), each a full regeneration.
    outs = [tmp_path / "first", tmp_path / "second"]
    procs = [subprocess.Popen([sys.executable, "-m", "mxgate.cli.vectors_cmd", "regen", "--out", str(out)],
                              cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for out in outs]
    for proc in procs:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output
    a, b = _files(outs[0]), _files(outs[1])
    assert a == b, f"files differ between two regenerations: {sorted(n for n in a if a[n] != b.get(n))}"
    committed = _files(DATA)
    stale = sorted(n for n in set(a) | set(committed) if a.get(n) != committed.get(n))
    assert not stale, f"committed vectors are out of date: {stale}; run 'mxgate vectors regen'"


def test_npz_bytes_do_not_depend_on_time_or_insertion_order() -> None:
    from mxgate.vectors.store import npz_bytes

    arrays = {"b/x": np.arange(7, dtype=np.float32), "a/y": np.ones((2, 3), np.uint8), "s": np.array(5, np.int64)}
    one = npz_bytes(arrays)
    time.sleep(1.1)  # a zip timestamp would move by its 2-second resolution or the clock's second
    two = npz_bytes(dict(reversed(list(arrays.items()))))
    assert one == two
    loaded = np.load(__import__("io").BytesIO(one), allow_pickle=False)
    assert sorted(loaded.files) == sorted(arrays)
    for key, value in arrays.items():
        assert loaded[key].dtype == value.dtype and np.array_equal(loaded[key], value)


# ---- 2. integrity -----------------------------------------------------------------------------


def _positions(size: int) -> list[int]:
    return sorted({0, 1, size // 3, size // 2, size - 2, size - 1})


def _assert_refused(directory: Path, name: str, capsys) -> None:
    bad = [s for s in manifest.verify_dir(directory) if not s.ok]
    assert [s.name for s in bad] == [name], f"{name}: verify reported {[(s.name, s.message) for s in bad]}"
    assert vectors_cmd.run(_args("verify", directory)) == 1
    assert name in capsys.readouterr().out
    vs = VectorSet(directory)
    with pytest.raises(manifest.IntegrityError) as caught:
        if name == manifest.MANIFEST:
            vs.families()
        elif name.endswith(".json"):
            vs.document(name[: -len(".json")])
        else:
            vs.arrays(name[: -len(".npz")])
    assert caught.value.file == name and name in str(caught.value)


def test_every_vector_file_refuses_a_flipped_bit_or_truncation(tmp_path: Path, capsys) -> None:
    directory = _copy_data(tmp_path)
    assert vectors_cmd.run(_args("verify", directory)) == 0
    names = sorted(_files(directory))
    assert {"manifest.json", "elements.json", "elements.npz", "scales.json", "scales.npz"} <= set(names)
    for name in names:
        path = directory / name
        original = path.read_bytes()
        for pos in _positions(len(original)):
            for bit in (0, 7):
                damaged = bytearray(original)
                damaged[pos] ^= 1 << bit
                path.write_bytes(bytes(damaged))
                _assert_refused(directory, name, capsys)
        for size in (0, len(original) // 2, len(original) - 1):
            path.write_bytes(original[:size])
            _assert_refused(directory, name, capsys)
        path.write_bytes(original)
    assert vectors_cmd.run(_args("verify", directory)) == 0


def test_every_single_bit_flip_of_the_manifest_is_caught() -> None:
    raw = (DATA / manifest.MANIFEST).read_bytes()
    manifest.parse(raw)
    for pos in range(len(raw)):
        for bit in range(8):
            damaged = bytearray(raw)
            damaged[pos] ^= 1 << bit
            with pytest.raises(manifest.IntegrityError):
                manifest.parse(bytes(damaged))


def test_loader_reads_arrays_without_pickle(tmp_path: Path) -> None:
    vs = VectorSet(DATA)
    case = next(vs.cases("elements", tier="quick"))
    assert case.inputs() and case.expected("gfx950")
    npz = vs.arrays("elements")
    assert npz.allow_pickle is False


# ---- 3. interrupted regeneration ----------------------------------------------------------------

_BLOCKING_REGEN = textwrap.dedent("""
    import sys, time, types
    from mxgate.vectors import generator
    from mxgate.vectors.families import elements

    blocker = types.SimpleNamespace(NAME="blocker", DESCRIPTION="blocks", SEED=1,
                                    available=lambda: None, build=lambda fb: time.sleep(600))
    generator.FAMILIES = [elements, blocker]
    sys.exit(generator.regen(sys.argv[1], force=True))
""")


def test_killed_regeneration_leaves_the_previous_set_intact(tmp_path: Path) -> None:
    directory = _copy_data(tmp_path)
    before = _files(directory)
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKING_REGEN, str(directory)], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        seen = []
        for line in proc.stderr:  # wait until the first family is written to the temporary folder
            seen.append(line)
            if line.startswith("[2/2] blocker: building"):
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            pytest.fail("regeneration ended before it could be interrupted: " + "".join(seen))
        temp_dirs = list(tmp_path.glob(".data.tmp-*"))
        assert temp_dirs and (temp_dirs[0] / "elements.npz").is_file(), "regeneration had not started writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert _files(directory) == before
    assert all(s.ok for s in manifest.verify_dir(directory))
    assert VectorSet(directory).families()
    # The next regeneration removes the stale temporary folder before doing anything else
    # (a writing one: --check writes nothing beside the data).
    generator.FAMILIES, saved = [elements], generator.FAMILIES
    try:
        generator.regen(directory, echo=lambda _: None, progress=lambda _: None)
    finally:
        generator.FAMILIES = saved
    assert not list(tmp_path.glob(".data.tmp-*"))


def test_swap_interrupted_between_renames_is_repaired(tmp_path: Path) -> None:
    directory = _copy_data(tmp_path)
    before = _files(directory)
    previous = tmp_path / ".data.previous"
    directory.rename(previous)  # killed after the first rename: no data folder at all
    assert vectors_cmd.verify(directory) == 0
    assert _files(directory) == before and not previous.exists()
    shutil.copytree(directory, previous)  # killed after the second rename: old set left aside
    assert VectorSet(directory).families() and not previous.exists()


# ---- 4. drift: a changed oracle makes --check fail, naming cases ---------------------------------


def _elements_only(monkeypatch) -> None:
    monkeypatch.setattr(generator, "FAMILIES", [elements])


def test_oracle_change_fails_check_with_a_case_summary(tmp_path: Path, monkeypatch, capsys) -> None:
    _elements_only(monkeypatch)
    out = tmp_path / "vectors"
    assert generator.regen(out, progress=lambda _: None) == 0
    assert generator.regen(out, check=True, progress=lambda _: None) == 0
    original = _files(out)
    real = oracle.encode_e2m1

    def negative_zero_cleared(x, profile="gfx950", **kw):  # a deliberate change: -0 loses its sign
        codes = real(x, profile, **kw)
        return np.where(codes == 0x8, np.uint8(0), codes).astype(np.uint8)

    monkeypatch.setattr(oracle, "encode_e2m1", negative_zero_cleared)
    capsys.readouterr()
    assert vectors_cmd.run(_args("regen", out, check=True)) == 1
    text = capsys.readouterr().out
    assert "elements:" in text and "changed" in text
    assert "~ e2m1.encode/zero/signed:" in text and "gfx950 codes: 1 of 2 elements differ, first at (1,)" in text
    assert "~ e2m1.encode/underflow/negative:" in text
    assert "out of date" in text
    assert _files(out) == original  # --check never writes
    # Without --force the changed files are refused, with the same summary; with it they are replaced.
    assert vectors_cmd.run(_args("regen", out)) == 1
    text = capsys.readouterr().out
    assert "refusing to overwrite" in text and "e2m1.encode/zero/signed" in text
    assert _files(out) == original
    assert vectors_cmd.run(_args("regen", out, force=True)) == 0
    assert _files(out) != original
    assert vectors_cmd.run(_args("regen", out, check=True)) == 0
    assert vectors_cmd.run(_args("verify", out)) == 0


def test_regen_refuses_a_folder_holding_other_files(tmp_path: Path, monkeypatch, capsys) -> None:
    _elements_only(monkeypatch)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert generator.regen(out, force=True, progress=lambda _: None) == 1
    assert (out / "notes.txt").read_text() == "keep me"


def test_progress_names_every_family(tmp_path: Path, monkeypatch) -> None:
    _elements_only(monkeypatch)
    lines: list[str] = []
    generator.regen(tmp_path / "v", progress=lines.append, echo=lambda _: None)
    assert lines[0] == "[1/1] elements: building ..." and "cases" in lines[1]


# ---- 6. serial and pytest-xdist runs give the same verdicts -------------------------------------


def _pytest(tmp_path: Path, *extra: str, backends: tuple[str, ...] = ("oracle",)) -> subprocess.CompletedProcess:
    named = [arg for backend in backends for arg in ("--backend", backend)]
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "mxgate.conformance.test_vectors",
           "mxgate.conformance.test_elements", *named, "--tier", "quick", "-q",
           "-p", "no:cacheprovider", *extra]
    if not any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11")):
        cmd[3:3] = ["-p", "mxgate.conformance.plugin"]
    path = os.pathsep.join([str(REPO / "tests" / "user_backends"), str(REPO)])
    env = dict(os.environ, MXGATE_HYPOTHESIS_PROFILE="mxgate-ci", PYTHONPATH=path)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _verdicts(path: Path) -> list[tuple]:
    rows = json.loads(path.read_text())["results"]
    return sorted((r["backend"], r["op"], r["config"], r["verdict"], r["reason"], r["nodeid"]) for r in rows)


@pytest.mark.slow
def test_xdist_gives_the_same_verdicts_as_a_serial_run(tmp_path: Path) -> None:
    """Two backends, serial and under ``-n 2 --dist loadgroup``: the same verdicts and node ids,
    and each backend's cells on one worker (which then starts that backend once)."""
    backends = ("oracle", "user_kernels:GoodFunctions")
    serial = _pytest(tmp_path, "--mxgate-json", "serial.json", "--junitxml", "serial.xml", backends=backends)
    assert serial.returncode == 0, serial.stdout[-3000:] + serial.stderr[-3000:]
    parallel = _pytest(tmp_path, "-n", "2", "--dist", "loadgroup", "-vv", "--mxgate-json", "xdist.json",
                       "--mxgate-md", "xdist.md", backends=backends)
    assert parallel.returncode == 0, parallel.stdout[-3000:] + parallel.stderr[-3000:]
    a, b = _verdicts(tmp_path / "serial.json"), _verdicts(tmp_path / "xdist.json")
    assert a and a == b
    assert {row[0] for row in a} == set(backends)
    workers: dict[str, set[str]] = {}
    for line in parallel.stdout.splitlines():
        found = re.match(r"\[(gw\d+)\] .*(PASSED|XFAIL|SKIPPED) \S+@mxgate-backend-(\S+)$", line.rstrip())
        if found:
            workers.setdefault(found[3], set()).add(found[1])
    assert set(workers) == set(backends), parallel.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers
    assert "mxgate conformance matrix" in parallel.stdout
    md = (tmp_path / "xdist.md").read_text()
    assert md.startswith("# mxgate conformance matrix") and "| oracle | e2m1.encode |" in md
    xml = (tmp_path / "serial.xml").read_text()
    for prop in ('name="verdict"', 'name="seed"', 'name="profile"', 'name="hypothesis_profile" value="mxgate-ci"'):
        assert prop in xml


def test_junit_carries_the_first_mismatch_of_a_failing_config(tmp_path: Path) -> None:
    # The oracle's gfx950 codes judged under 'threshold' differ (ties toward zero): a real 'fail'.
    run = _pytest(tmp_path, "-k", "test_e2m1_encode and not every", "--profile", "threshold",
                  "--junitxml", "fail.xml", "--mxgate-json", "fail.json")
    assert run.returncode == 1, run.stdout[-3000:]
    xml = (tmp_path / "fail.xml").read_text()
    assert 'name="first_mismatch"' in xml and 'name="profile" value="threshold"' in xml
    report = json.loads((tmp_path / "fail.json").read_text())
    cell = next(c for c in report["cells"] if c["op"] == "e2m1.encode")
    assert cell["verdict"] == "fail" and cell["failures"][0]["first_mismatch"] is not None
    assert cell["profiles"] == ["threshold"]
    assert report["backend_profiles"][cell["backend"]]["threshold"]["tie"] == ["zero", "even"]


# ---- schema, Hypothesis profiles, matrix rendering -----------------------------------------------


def test_every_case_validates_and_cites_known_flags() -> None:
    from mxgate.vectors import schema

    vs = VectorSet(DATA)
    vocab = schema.vocabulary()
    seen: set[str] = set()
    for family in vs.families():
        doc = vs.document(family)
        schema.validate(doc, set(vs.arrays(family).files))
        for case in vs.cases(family, tier="exhaustive"):
            assert set(case.flags) <= set(vocab)
            seen.update(case.flags)
    required = {"midpoint", "midpoint-neighbour", "signed-zero", "subnormal", "saturation", "nan", "inf",
                "binade-edge", "zero-block", "tiny-block", "double-rounding", "scale-byte", "all-codes",
                "BUGS-6", "BUGS-10", "BUGS-18", "BUGS-19", "BUGS-20"}
    assert required <= seen, sorted(required - seen)


def test_schema_rejects_an_unknown_flag() -> None:
    from mxgate.vectors import schema

    doc = json.loads((DATA / "scales.json").read_bytes())
    doc["groups"][0]["cases"][0]["flags"].append("no-such-class")
    with pytest.raises(schema.SchemaError, match="unknown flag 'no-such-class'"):
        schema.validate(doc)


def test_hypothesis_profile_selection_order() -> None:
    from mxgate.conformance import hypothesis_settings as hp

    assert hp.choose(None, None, "default", {}) == hp.DEV
    assert hp.choose(None, None, "default", {"CI": "true"}) == hp.CI
    assert hp.choose(None, None, "exhaustive", {}) == hp.THOROUGH
    assert hp.choose(None, None, "default", {hp.ENV: hp.THOROUGH, "CI": "1"}) == hp.THOROUGH
    assert hp.choose(None, hp.DEV, "default", {"CI": "1"}) == hp.DEV
    assert hp.choose(hp.CI, hp.DEV, "default", {}) == hp.CI
    from hypothesis import settings

    ci = settings.get_profile(hp.CI)
    assert ci.derandomize and ci.database is None and ci.deadline is None and ci.print_blob


def test_matrix_renders_verdicts_reasons_and_profile_differences() -> None:
    from mxgate.conformance import matrix

    rows = [
        {"backend": "b", "op": "e2m1.encode", "config": "c1", "verdict": "exact", "reason": "", "first_mismatch": None,
         "seed": 1, "profile": "threshold", "nodeid": "n1", "index": 0},
        {"backend": "b", "op": "e2m1.encode", "config": "c2", "verdict": "acceptable", "reason": "NaN rule unverified",
         "first_mismatch": None, "seed": 1, "profile": "threshold", "nodeid": "n2", "index": 0},
        {"backend": "b", "op": "mx.quantize", "config": "c3", "verdict": "fail", "reason": "codes differ",
         "first_mismatch": [3, 1], "seed": 7, "profile": "gfx950", "nodeid": "n3", "index": 0},
        {"backend": "b", "op": "mx.quantize", "config": "c4", "verdict": "unsupported", "reason": "outside contract",
         "first_mismatch": None, "seed": None, "profile": "gfx950", "nodeid": "n4", "index": 0},
    ]
    m = matrix.build(rows, {"gone": "package absent"}, tier="quick", hypothesis_profile="mxgate-ci", exit_status=1)
    lines = matrix.text_lines(m)
    text = "\n".join(lines)
    assert "acceptable x1: NaN rule unverified" in text and "c3: seed 7 first mismatch (3, 1) codes differ" in text
    # each profile's difference from gfx950 is said once per backend, not on every row
    assert text.count("tie 'zero' not 'even'") == 1 and text.count("gfx950 (= gfx950)") == 1
    assert "  gone: package absent" in text
    # a cell with a fail and an unsupported config is a fail; the failure is listed again at the end
    assert "FAILURES: 1 failing config(s) in 1 cell(s)" in text and "FAIL b mx.quantize" in text
    assert lines[-1] == ("mxgate: 2 cells: exact 0, acceptable 1, fail 1, not supported here 0; "
                         "1 backend(s) not supported here; exit status 1 (at least one fail)")
    md = matrix.to_markdown(m)
    # a cell some of whose configs did not run says how many were judged, never a bare verdict
    assert "| b | mx.quantize | fail (1 of 2 configs judged) |" in md and "- gone: package absent" in md
    assert "fail (1 of 2 configs judged)" in text
    # the terminal matrix has column headers; profile notes are said to be information
    assert any(line.split()[:2] == ["op", "verdict"] for line in lines)
    assert "profiles judged under (information, not verdicts):" in text
    cells = json.loads(matrix.to_json(m))["cells"]
    assert cells[0]["counts"] == {"exact": 1, "acceptable": 1, "fail": 0, "unsupported": 0}
    assert cells[1]["verdict"] == "fail" and cells[1]["counts"]["unsupported"] == 1


def test_matrix_keeps_information_rows_and_expected_failures_apart() -> None:
    """A relation to another profile is no verdict cell; a run that expects its known findings
    does not print them as FAILURES, and its last line does not say 'fail 1'."""
    from mxgate.conformance import matrix

    base = {"first_mismatch": None, "seed": None, "profile": "gfx950", "index": 0, "known": None}
    rows = [
        dict(base, backend="b", op="e2m1.encode", config="c1", verdict="exact", reason="", nodeid="n1"),
        dict(base, backend="b", op="w.store vs gfx950", config="t", verdict="acceptable", reason="relation: {'x': 1}",
             nodeid="n2", information=True),
        dict(base, backend="b", op="mx.quantize", config="c2", verdict="fail", reason="codes differ", nodeid="n3",
             known="a documented finding", expected_failure=True),
    ]
    m = matrix.build(rows, {}, tier="quick", hypothesis_profile="mxgate-ci", exit_status=0)
    text = "\n".join(matrix.text_lines(m))
    assert [c["op"] for c in m["cells"]] == ["e2m1.encode", "mx.quantize"]
    assert "relations to other profiles (information, not verdicts):" in text and "w.store vs gfx950 t" in text
    assert "FAILURES:" not in text and "EXPECTED FAILURES (known findings this run was asked to expect)" in text
    assert "--mxgate-xfail-known" not in text
    last = matrix.text_lines(m)[-1]
    assert "fail 0, expected failure (known finding) 1" in last and "exit status 0" in last
    interrupted = matrix.build(rows, {}, tier="quick", hypothesis_profile="mxgate-ci", exit_status=143,
                               interrupted="SIGTERM")
    assert "INTERRUPTED by SIGTERM" in matrix.text_lines(interrupted)[1]
    assert "Interrupted by SIGTERM" in matrix.to_markdown(interrupted)


def test_judging_vector_results_exact_acceptable_and_fail() -> None:
    from mxgate.conformance.judge import judge_outputs

    vs = VectorSet(DATA)
    logits = next(c for c in vs.cases("logits") if c.op == "pa_mqa_logits_fp4.decode")
    exp = logits.expected("gfx950")
    rules = logits.group["compare"]
    same = judge_outputs(exp, dict(exp), rules)
    assert same.verdict == "exact"
    nudged = dict(exp, logits=np.where(np.isfinite(exp["logits"]), np.nextafter(exp["logits"], np.float32(np.inf)),
                                       exp["logits"]).astype(np.float32))
    inside = judge_outputs(exp, nudged, rules)
    assert inside.verdict == "acceptable" and "error bound" in inside.reason
    far = dict(exp, logits=np.where(np.isfinite(exp["logits"]), exp["logits"] + 1.0, exp["logits"]).astype(np.float32))
    assert judge_outputs(exp, far, rules).verdict == "fail"

    nan_case = next(c for c in vs.cases("elements") if c.id == "e2m1.encode/nan/payloads")
    result = nan_case.result("gfx950")
    assert result["result"] == "acceptable" and "not measured" in result["reason"]
    alternatives = nan_case.alternatives("gfx950")
    label, alt = alternatives[0]
    v = judge_outputs(nan_case.expected("gfx950"), alt, nan_case.group["compare"], result="acceptable",
                      reason=result["reason"], alternatives=alternatives)
    assert v.verdict == "acceptable" and label in v.reason
    wrong = {"codes": (nan_case.expected("gfx950")["codes"] ^ 0x3).astype(np.uint8)}
    assert judge_outputs(nan_case.expected("gfx950"), wrong, nan_case.group["compare"], result="acceptable",
                         reason=result["reason"], alternatives=alternatives).verdict == "fail"


# ---- live results for a profile the files hold none for -------------------------------------------


def test_a_live_rebuild_is_what_regen_stores_and_covers_registered_profiles() -> None:
    from mxgate.conformance.test_vectors import live_case
    from mxgate.oracle import profiles

    vs = VectorSet(DATA)
    zero = next(c for c in vs.cases("scales") if c.id == "mx.quantize/zero-block")
    assert zero.result("aiter-ref-rceil") is None and "aiter-ref-rceil" not in profiles.vector_names()
    # a stored profile: the rebuild's result and alternatives are the stored ones, byte for byte
    for case in (zero, next(c for c in vs.cases("scales") if c.id == "mx.quantize/nonfinite-block")):
        rebuilt = live_case(case, "torchao-rceil")
        assert rebuilt.result("torchao-rceil")["result"] == case.result("torchao-rceil")["result"]
        for name, array in case.expected("torchao-rceil").items():
            assert np.array_equal(rebuilt.expected("torchao-rceil")[name], array), (case.id, name)
        assert len(rebuilt.alternatives("torchao-rceil")) == len(case.alternatives("torchao-rceil"))
    # a derived profile: the oracle's bytes under it, on the stored inputs
    rebuilt = live_case(zero, "aiter-ref-rceil")
    packed, e8m0 = oracle.quantize_mx(zero.inputs()["x"], "aiter-ref-rceil")
    assert np.array_equal(rebuilt.expected("aiter-ref-rceil")["e8m0"], e8m0)
    assert np.array_equal(rebuilt.expected("aiter-ref-rceil")["packed"], packed)
    # families generated for named profiles only, and unregistered names, keep "no stored result"
    logits = next(vs.cases("logits"))
    assert live_case(logits, "aiter-ref-rceil") is None
    assert live_case(zero, "no-such-profile") is None


def test_a_live_rebuild_refuses_stale_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    from mxgate.conformance import test_vectors
    from mxgate.vectors.loader import Case

    class Stale(Case):
        def inputs(self) -> dict[str, np.ndarray]:
            return {"x": super().inputs()["x"] + np.float32(1)}

    case = next(c for c in VectorSet(DATA).cases("scales") if c.id == "mx.quantize/tiny-block")
    monkeypatch.setattr(test_vectors, "_LIVE", {})
    with pytest.raises(ValueError, match="input x differs from today's generator"):
        test_vectors.live_case(Stale(case.vectors, case.family, case.group, case.case), "aiter-ref-rceil")


def test_the_gate_judges_a_derived_profile_on_the_vectors(tmp_path: Path) -> None:
    """A backend declaring aiter-ref-rceil: the tiny and zero blocks are judged (no longer 'not
    supported here'); AITER's zero-quotient byte planted is a fail naming the case and bytes."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "user_backends"), str(REPO)]))
    cmd = [sys.executable, "-m", "mxgate", "check", "--backend", "derived_profile_quantizers:right",
           "--backend", "derived_profile_quantizers:zero_quotient", "--json", "m.json"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((tmp_path / "m.json").read_text())["results"]
    vector_rows = {(r["backend"], r["config"]): r for r in rows if r["config"].startswith("scales:mx.quantize/")}
    right = {config: r["verdict"] for (backend, config), r in vector_rows.items() if backend.endswith(":right")}
    assert right and set(right.values()) <= {"exact", "acceptable"}, right
    assert right["scales:mx.quantize/zero-block"] == right["scales:mx.quantize/tiny-block"] == "exact"
    planted = {config: r for (backend, config), r in vector_rows.items() if backend.endswith(":zero_quotient")}
    failed = {config: r["reason"] for config, r in planted.items() if r["verdict"] == "fail"}
    assert list(failed) == ["scales:mx.quantize/binades/-149..-110"], failed
    assert "e8m0: 4 of 232 elements differ" in failed["scales:mx.quantize/binades/-149..-110"]
    assert "(expected 0x01, got 0x00)" in failed["scales:mx.quantize/binades/-149..-110"]
