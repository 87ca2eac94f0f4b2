"""``mxgate diff``: the sorting of differing units into explained / unexplained, the search
that finds and shrinks a planted bug, the case files it writes, and the command's statuses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mxgate import kernels, oracle
from mxgate.cli import diff_cmd
from mxgate.conformance import differential as d
from mxgate.vectors import schema

# the planted backends cast NaN with NumPy on purpose
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")

USER_BACKENDS = Path(__file__).parent / "user_backends"
ABOVE_TIE = 0x3FA00001  # 1.25 + 1 ulp: rounds to 1.5 (0x3) under every round-to-nearest profile


def f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(USER_BACKENDS)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def mxgate_diff(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxgate", "diff", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_every_op_with_an_input_strategy_has_a_reference_and_back() -> None:
    from mxgate.inputs import strategies

    assert list(d.SPECS) == list(strategies.COVERED_OPS)
    for op, spec in d.SPECS.items():
        assert len(spec.kinds) == len(spec.outputs) and strategies.strategy(op) is not None


# ---- sorting -----------------------------------------------------------------------------------


def test_a_difference_both_profiles_reproduce_is_explained_by_the_nan_field() -> None:
    spec = d.SPECS["e2m1.encode"]
    x = f32([0x7FC00000, 0x3F800000])  # +NaN, 1.0
    ml = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)  # ml_dtypes' own C++ cast: +NaN -> 0x8
    sorted_ = d.sort_differences(spec, (x,), np.array([0x7, 0x2], np.uint8), ml, "gfx950", "ml_dtypes")
    assert ml.tolist() == [0x8, 0x2]
    assert len(sorted_.differences) == 1 and sorted_.units == 2
    (diff,) = sorted_.differences
    assert diff.explained and diff.index == 0 and diff.fields == ("nan",)
    assert (diff.a, diff.b, diff.oracle_a, diff.oracle_b) == (0x7, 0x8, 0x7, 0x8)


def test_a_side_off_its_own_profile_is_unexplained_and_named_as_deviating() -> None:
    spec = d.SPECS["e2m1.encode"]
    x = f32([ABOVE_TIE])
    good, bad = np.array([0x3], np.uint8), np.array([0x2], np.uint8)  # 1.5 (correct) and 1.0
    (diff,) = d.sort_differences(spec, (x,), good, bad, "gfx950", "ml_dtypes").differences
    assert not diff.explained and diff.deviating == ("B",)
    assert (diff.oracle_a, diff.oracle_b) == (0x3, 0x3)
    (swapped,) = d.sort_differences(spec, (x,), bad, good, "ml_dtypes", "gfx950").differences
    assert swapped.deviating == ("A",)
    (both,) = d.sort_differences(spec, (x,), np.array([0x4], np.uint8), bad, "gfx950", "ml_dtypes").differences
    assert not both.explained and both.deviating == ("A", "B")


def test_under_one_profile_every_difference_is_unexplained() -> None:
    spec = d.SPECS["e2m1.encode"]
    x = f32([0x7FC00000])  # gfx950: +NaN -> +6 (0x7)
    (diff,) = d.sort_differences(spec, (x,), np.array([0x7], np.uint8), np.array([0x8], np.uint8),
                                 "gfx950", "gfx950").differences
    assert not diff.explained and diff.deviating == ("B",)


def test_equal_outputs_have_no_difference_even_where_both_are_off_the_oracle() -> None:
    spec = d.SPECS["e2m1.encode"]
    sorted_ = d.sort_differences(spec, (f32([ABOVE_TIE]),), np.array([0x2], np.uint8), np.array([0x2], np.uint8),
                                 "gfx950", "gfx950")
    assert sorted_.differences == [] and sorted_.units == 1


def test_decoders_compare_nan_as_any_nan_and_count_it() -> None:
    spec = d.SPECS["e4m3fn.decode"]
    codes = np.array([0x7F, 0x38], np.uint8)  # NaN, 1.0
    a = f32([0x7FC00000, 0x3F800000])
    b = f32([0x7FF00000, 0x3F800000])  # another NaN payload (torch's)
    sorted_ = d.sort_differences(spec, (codes,), a, b, "gfx950", "gfx950")
    assert sorted_.differences == [] and sorted_.nan_equal == 1
    wrong = f32([0x7FF00000, 0x40000000])  # 2.0 for code 0x38
    (diff,) = d.sort_differences(spec, (codes,), a, wrong, "gfx950", "gfx950").differences
    assert diff.index == 1 and diff.deviating == ("B",)


def test_a_wrong_dtype_is_one_difference_naming_it() -> None:
    spec = d.SPECS["e2m1.encode"]
    (diff,) = d.sort_differences(spec, (f32([0x3F800000]),), np.array([0x2], np.uint8), np.array([2], np.int32),
                                 "gfx950", "gfx950").differences
    assert diff.index == -1 and diff.deviating == ("B",) and "dtype int32" in diff.note


def test_a_wrong_number_of_outputs_is_a_difference_of_that_side() -> None:
    spec = d.SPECS["mx.quantize"]
    x = np.zeros((1, 32), np.float32)
    packed, scales = oracle.quantize_mx(x, "gfx950")
    (diff,) = d.sort_differences(spec, (x,), (packed, scales), packed, "gfx950", "gfx950").differences
    assert diff.deviating == ("B",) and "returned 1 output" in diff.note


def test_block_scale_difference_is_explained_by_the_amax_floor() -> None:
    # An all-zero block: gfx950 floors amax at 6*2^-126 (scale byte 1), ml_dtypes has no floor
    # (byte 0, SPEC 3); the codes are all zero on both sides.
    spec = d.SPECS["mx.quantize"]
    x = np.zeros((1, 32), np.float32)
    sorted_ = d.sort_differences(spec, (x,), (np.zeros((1, 16), np.uint8), np.array([[1]], np.uint8)),
                                 (np.zeros((1, 16), np.uint8), np.array([[0]], np.uint8)), "gfx950", "ml_dtypes")
    (diff,) = sorted_.differences
    assert diff.output == "e8m0" and diff.explained and diff.fields == ("amax_floor",)


def test_fields_needed_together_are_named_together() -> None:
    # threshold (sglang) clamps the scale exponent to [1, 254] and clamps a NaN amax with it:
    # 0xFF under gfx950 becomes 254 only with exp_clamp and special_scale both switched.
    spec = d.SPECS["e8m0.scale"]
    amax = f32([0x7FC00000])
    (diff,) = d.sort_differences(spec, (amax,), np.array([0xFF], np.uint8), np.array([0xFE], np.uint8),
                                 "gfx950", "threshold").differences
    assert diff.explained and diff.fields == ("exp_clamp", "special_scale")


# ---- the search --------------------------------------------------------------------------------


def _user(name: str) -> kernels.Backend:
    sys.path.insert(0, str(USER_BACKENDS))
    try:
        return kernels.get(f"user_kernels:{name}")
    finally:
        sys.path.remove(str(USER_BACKENDS))


@pytest.mark.parametrize("seed", range(5))
def test_the_default_budget_finds_and_shrinks_the_planted_bug_on_every_seed(seed: int) -> None:
    result = d.diff_op("e2m1.encode", kernels.get("oracle"), _user("BadBackend"), examples=diff_cmd.DEFAULT_EXAMPLES,
                       seed=seed, max_cases=diff_cmd.DEFAULT_MAX_CASES)
    shrunk = sorted(c.args[0].view(np.uint32).tolist() for c in result.cases)
    assert shrunk == [[ABOVE_TIE], [ABOVE_TIE | 0x80000000]], f"seed {seed}: {shrunk}"
    assert all(c.new[0].deviating == ("B",) for c in result.cases)
    assert result.unexplained and set(result.unexplained) == {("B",)}
    assert result.examples == diff_cmd.DEFAULT_EXAMPLES


def test_the_search_of_a_correct_backend_finds_only_explained_differences() -> None:
    result = d.diff_op("e2m1.encode", kernels.get("oracle"), _user("GoodBackend"), examples=100, seed=0, max_cases=8)
    assert result.clean and not result.cases
    assert result.explained and set(result.explained) == {("nan",)}


def test_inputs_depend_on_the_seed_only_not_on_the_modules_loaded(tmp_path: Path) -> None:
    # Hypothesis draws literals of loaded local modules into some inputs unless the search
    # keeps them out: a module full of integers must not change what a seed generates.
    def run() -> tuple:
        r = d.diff_op("e2m1.encode", kernels.get("oracle"), _user("BadBackend"), examples=60, seed=3, max_cases=8)
        return r.units, dict(r.explained), dict(r.unexplained), [c.args[0].tobytes() for c in r.cases]

    before = run()
    # integers of 100 and more, below Hypothesis' limit of 1024 literals a module
    (tmp_path / "many_literals.py").write_text("VALUES = [" + ", ".join(str(i) for i in range(100, 400)) + "]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import many_literals  # noqa: F401
        assert run() == before
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("many_literals", None)


def test_the_shrunk_case_is_classified_by_explain() -> None:
    result = d.diff_op("e2m1.encode", kernels.get("oracle"), _user("BadBackend"), examples=100, seed=0, max_cases=8)
    # x = 1.25 + 1 ulp is not a midpoint, so neither tie_direction nor any other class applies
    assert {cls for c in result.cases for cls, _ in c.classes} == {"unexplained"}
    nan = d.classify(d.SPECS["e2m1.encode"], (f32([0x7FC00000]),), (np.array([7], np.uint8),),
                     (np.array([8], np.uint8),), "gfx950",
                     [d.Difference("codes", 0, 7, 8, 7, 7, False, deviating=("B",))])
    tie = d.classify(d.SPECS["e2m1.encode"], (f32([0x3FA00000]),), (np.array([2], np.uint8),),
                     (np.array([3], np.uint8),), "gfx950",
                     [d.Difference("codes", 0, 2, 3, 2, 2, False, deviating=("B",))])
    assert nan[0][0] == "nan_inf" and tie[0][0] == "tie_direction"


def _gfx950_dropping_the_sign_of_zero(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    packed, scales = oracle.quantize_mx(x, "gfx950")
    codes = oracle.unpack_nibbles(packed)
    return oracle.pack_nibbles(np.where(codes == 0x8, 0x0, codes).astype(np.uint8)), scales


def test_block_differences_are_shrunk_and_classified_through_explain() -> None:
    from mxgate.kernels.functions import backend_from_functions, kernel

    planted = backend_from_functions("drops-minus-zero", kernel(
        "mx.quantize", _gfx950_dropping_the_sign_of_zero, profile="gfx950"))()
    result = d.diff_op("mx.quantize", kernels.get("oracle"), planted, examples=100, seed=0, max_cases=8)
    assert set(result.unexplained) == {("B",)} and len(result.cases) == 1
    (case,) = result.cases
    (diff,) = case.new
    assert diff.output == "packed" and (diff.a, diff.b) == (0x8, 0x0)
    assert [cls for cls, _ in case.classes] == ["sign_of_zero"]
    x = case.args[0].reshape(-1)
    assert np.signbit(x[diff.index]) and case.args[0].shape == (1, 32)  # shrunk to one group
    assert d.input_text(case.args) == "float32[1, 32], 0x00000000 except [0, 0] = 0x80000000"


# ---- the command -------------------------------------------------------------------------------


def _strip_times(text: str) -> str:
    return re.sub(r"\(\d+\.\d s\)", "", text)


def test_diff_against_the_broken_backend_exits_1_with_the_shrunk_case_and_its_files(tmp_path: Path) -> None:
    done = mxgate_diff(["oracle", "user_kernels:BadBackend", "--op", "e2m1.encode"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "seed 0" in out
    shrunk = [line for line in out.splitlines() if "shrunk to" in line]
    assert any("[0x3FA00001]" in line for line in shrunk), out
    assert "x[0] = 1.25000012 (0x3FA00001): codes A 0x3 (+1.5), B 0x2 (+1)" in out
    assert "deviates: B (user_kernels:BadBackend)" in out
    assert "explain: unexplained" in out
    folder = tmp_path / "mxgate-diff"
    assert [p.name for p in tmp_path.iterdir()] == ["mxgate-diff"]  # nothing else left behind (no .hypothesis)
    doc_path = folder / "diff-oracle-vs-user_kernels-BadBackend.json"
    npz_path = folder / "diff-oracle-vs-user_kernels-BadBackend.npz"
    doc = json.loads(doc_path.read_text())
    arrays = np.load(npz_path, allow_pickle=False)
    schema.validate(doc, set(arrays.files))
    (group,) = doc["groups"]
    assert group["op"] == "e2m1.encode" and group["inputs"] == ["x"] and group["outputs"] == ["codes"]
    inputs = {case["id"]: arrays[case["inputs"]["x"]].view(np.uint32).tolist() for case in group["cases"]}
    above = [cid for cid, x in inputs.items() if x == [ABOVE_TIE]]
    assert above, inputs
    case = next(c for c in group["cases"] if c["id"] == above[0])
    assert "midpoint-neighbour" in case["flags"] and case["params"]["deviating"] == ["B"]
    for profile in ("gfx950", "ml_dtypes"):  # what an implementation of either profile must give
        assert arrays[case["results"][profile]["outputs"]["codes"]].tolist() == [0x3]
    assert set(case["results"]) == set(oracle.profiles.vector_names())  # as the golden vectors


def test_diff_against_a_correct_backend_exits_0_and_names_the_nan_field(tmp_path: Path) -> None:
    done = mxgate_diff(["oracle", "user_kernels:GoodBackend", "--op", "e2m1.encode"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("[1/1] e2m1.encode"))
    assert re.search(r"(\d+) differ; \1 explained \(nan \1\)", line), line
    assert "unexplained" not in line
    assert "0 unexplained" in done.stdout.splitlines()[-1] and "exit status 0" in done.stdout.splitlines()[-1]
    assert not (tmp_path / "mxgate-diff").exists()


def test_the_same_seed_gives_the_same_report_and_cases(tmp_path: Path) -> None:
    runs = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        done = mxgate_diff(["oracle", "user_kernels:BadBackend", "--op", "e2m1.encode", "--seed", "11",
                            "--examples", "60"], tmp_path / name)
        assert done.returncode == 1, done.stdout + done.stderr
        runs.append((_strip_times(done.stdout),
                     (tmp_path / name / "mxgate-diff" / "diff-oracle-vs-user_kernels-BadBackend.json").read_bytes()))
    assert runs[0] == runs[1]
    assert "seed 11" in runs[0][0]


def test_faults_of_either_side_are_reported_and_exit_1(tmp_path: Path) -> None:
    done = mxgate_diff(["faulty_backends:Raising", "oracle", "--op", "e2m1.encode", "--examples", "5"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fault e2m1.encode: A (faulty_backends:Raising) raised ValueError: planted ValueError" in done.stdout
    done = mxgate_diff(["oracle", "faulty_backends:Segfault", "--op", "e2m1.encode", "--examples", "5"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "B (faulty_backends:Segfault) crashed: signal 11" in done.stdout
    done = mxgate_diff(["oracle", "faulty_backends:Hanging", "--op", "e2m1.encode", "--examples", "5",
                        "--timeout", "3"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "B (faulty_backends:Hanging) timeout after 3 s" in done.stdout


@pytest.mark.parametrize("side, backend, cause", [
    ("B", "raises_at_import:Backend", "failed to load: raised RuntimeError: planted error while importing"),
    ("A", "os_exit_at_import:Backend", "failed to load: crashed: the worker exited with status 0 while loading"),
    ("B", "segfault_at_import:Backend", "failed to load: crashed: signal 11 (SIGSEGV) while loading"),
])
def test_a_side_that_faults_while_loading_is_its_fault_and_exit_1(tmp_path: Path, side: str, backend: str,
                                                                  cause: str) -> None:
    """Each side is built in a worker of its own, never in the diff's process: a backend that
    raises, exits (status 0 included) or crashes while loading is that side's fault, status 1."""
    pair = [backend, "oracle"] if side == "A" else ["oracle", backend]
    done = mxgate_diff([*pair, "--op", "e2m1.encode", "--examples", "5"], tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"mxgate diff: fault: {side} ({backend}): {cause}") and last.endswith("exit status 1"), last
    assert "Traceback" not in done.stderr, done.stderr


def test_the_diffs_own_process_never_imports_a_side(tmp_path: Path) -> None:
    """Each side is imported in its worker only: the backend module notes every process that
    imports it, and the diff's own process is not among them."""
    env = dict(_env(), DISHONEST_MARKERS=str(tmp_path))
    run = subprocess.Popen([sys.executable, "-m", "mxgate", "diff", "oracle", "counted_import:Backend", "--op",
                            "e2m1.encode", "--examples", "5"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    importers = {int(line) for line in (tmp_path / "imports").read_text().split()}
    assert importers and run.pid not in importers, (run.pid, importers)


def test_a_side_that_writes_into_its_input_is_its_fault_and_exit_1(tmp_path: Path) -> None:
    """A kernel that writes into an input it does not own is a fault of its side (the other side
    ran on its own copy), reported like any other fault, status 1, not an internal error."""
    done = mxgate_diff(["oracle", "dishonest_backends:zeroes_input", "--op", "e2m1.encode", "--examples", "5"],
                       tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fault e2m1.encode: B (dishonest_backends:zeroes_input) wrote into its input x" in done.stdout, done.stdout
    assert done.stdout.strip().splitlines()[-1].endswith("exit status 1") and "Traceback" not in done.stderr


def test_ops_the_diff_cannot_generate_inputs_for_are_listed(tmp_path: Path) -> None:
    done = mxgate_diff(["oracle", "oracle", "--examples", "5"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = next(line for line in done.stdout.splitlines() if line.startswith("not covered by diff"))
    for op in ("sglang-page68.store", "aiter-fp4-kv.store", "indexer_qk_rope_quant_and_cache"):
        assert op in listed
    searched = [line.split()[1] for line in done.stdout.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert set(searched) >= {"e2m1.encode", "e2m1.decode", "e4m3fn.encode", "e4m3fnuz.encode", "e4m3fn.decode",
                             "e4m3fnuz.decode", "bf16.round", "e8m0.decode", "e8m0.scale", "ue8m0.round",
                             "mx.quantize", "fp4_indexer.quantize"}


@pytest.mark.parametrize("args, message", [
    (["oracle", "no-such-backend"], "backend must be one of"),
    (["oracle", "user_kernels:Missing"], "has no attribute"),
    (["oracle", "user_kernels:BadBackend", "--op", "mx.quantize"],
     "--op mx.quantize: B (user_kernels:BadBackend) does not implement it"),
    (["oracle", "oracle", "--op", "sglang-page68.store"], "--op sglang-page68.store: not covered by diff"),
    (["oracle", "oracle", "--op", "no.such.op"], "--op must be one of"),
    (["oracle", "oracle", "--examples", "0"], "--examples must be at least 1"),
    (["oracle", "oracle", "--seed", "-1"], "--seed must be a non-negative integer"),
    (["oracle", "oracle", "--timeout", "0"], "--timeout must be a positive number"),
    (["oracle", "oracle", "--out", "mxgate-diff.txt"], "is not a folder"),
    (["user_kernels:BadFunctions", "torch"], "implement no op in common"),
])
def test_usage_errors_are_one_line_with_status_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "mxgate-diff.txt").write_text("a file\n")
    done = mxgate_diff(args, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mxgate diff: error: ") and message in lines[0], done.stderr
    assert done.stdout == ""


def test_a_reader_gone_before_the_first_line_is_status_141(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "mxgate", "diff", "oracle", "user_kernels:GoodBackend", "--op",
                               "e2m1.encode", "--examples", "5"], cwd=tmp_path, env=_env(), text=True,
                              stdout=write_end, stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == "", (done.returncode, done.stderr)


def test_help_documents_the_exit_statuses() -> None:
    done = subprocess.run([sys.executable, "-m", "mxgate", "diff", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for status in ("0    no unexplained difference", "1    at least one unexplained difference", "2    usage error",
                   "3    internal error", "141  standard output was closed"):
        assert status in done.stdout
    assert f"default {diff_cmd.DEFAULT_EXAMPLES}" in done.stdout
