"""The gate as its users run it: the installed ``mxgate`` command and ``pytest --pyargs
mxgate.conformance``, started from a scratch directory outside the checkout, judged by their
exit status and the report files they leave there."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from mxgate.conformance import outcome

USER_BACKENDS = Path(__file__).parent / "user_backends"
FAULTY = ("faulty_backends:Raising", "faulty_backends:Segfault", "faulty_backends:Hanging")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(USER_BACKENDS)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("MXGATE_TIMEOUT", None)
    return env


def mxgate(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxgate", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


def _junit_failures(path: Path) -> int:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)


def _cells(path: Path) -> dict[tuple[str, str], dict]:
    report = json.loads(path.read_text())
    return {(c["backend"], c["op"]): c for c in report["cells"]}


@dataclass(frozen=True)
class Run:
    """A finished gate run and the folder it was started in (its reports lie there)."""

    done: subprocess.CompletedProcess
    where: Path


# README 'Start here': `mxgate check` on every available CPU backend, and the same with
# --xfail-known. The tests below each assert their own property of these two runs.
in_readme_runs = pytest.mark.xdist_group("gate-readme-runs")


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("readme-run")
    return Run(mxgate(["check", "--tier", "quick", "--json", "m.json", "--junitxml", "j.xml"], where), where)


def _readme_failing_cells() -> list[tuple[str, str]]:
    """The cells of the README run that fail against their documented profiles (known findings)."""
    expected = [("torchao-mx-rceil", "mx.quantize"), ("triton-mxfp", "e2m1.encode")]
    if importlib.util.find_spec("onnx") is not None:
        expected[:0] = [("onnx-quantizelinear", "e2m1.encode"), ("onnx-reference", "e2m1.encode")]
    return expected


@pytest.fixture(scope="module")
def readme_run_xfail_known(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`mxgate check --xfail-known` on the backends whose cells fail in the README run (every other
    backend is exact or acceptable there, which test_the_readme_check_on_the_cpu_backends asserts),
    so this run and that one together say what the whole README run with --xfail-known would."""
    where = tmp_path_factory.mktemp("readme-run-xfail-known")
    backends = [arg for backend, _ in _readme_failing_cells() for arg in ("--backend", backend)]
    return Run(mxgate(["check", "--tier", "quick", "--xfail-known", "--json", "m.json", *backends], where), where)


def _last_summary(stdout: str) -> str:
    return [line for line in stdout.splitlines() if line.startswith("mxgate: ")][-2]


@in_readme_runs
def test_failing_kernel_exits_1_and_writes_both_reports_where_started(readme_run: Run) -> None:
    done, where = readme_run.done, readme_run.where
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-3000:]
    assert (where / "m.json").is_file() and (where / "j.xml").is_file()
    assert _junit_failures(where / "j.xml") > 0
    cells = _cells(where / "m.json")
    cell = cells[("triton-mxfp", "e2m1.encode")]
    assert cell["verdict"] == "fail" and cell["known_findings"] and not cell["expected_failure"]
    assert json.loads((where / "m.json").read_text())["exit_status"] == 1
    fails = sum(c["verdict"] == "fail" for c in cells.values())
    last = _last_summary(done.stdout)
    assert f"fail {fails}" in last and "exit status 1" in last, last
    # the oracle's NumPy work on signalling NaNs and Inf quotients warns nothing on the user's stderr
    assert not re.findall(r"mxgate[/\\]\S+\.py:\d+: \w*Warning", done.stderr), done.stderr[-3000:]


def test_pytest_route_exits_1_on_the_same_failure(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "mxgate.conformance", "--backend", "triton-mxfp",
                           "--tier", "quick", "--junitxml", "j.xml", "-p", "no:cacheprovider", "-q"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:]
    assert _junit_failures(tmp_path / "j.xml") > 0


@in_readme_runs
def test_known_findings_are_expected_failures_only_when_asked(readme_run_xfail_known: Run) -> None:
    done, where = readme_run_xfail_known.done, readme_run_xfail_known.where
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:]
    cells = _cells(where / "m.json")
    cell = cells[("triton-mxfp", "e2m1.encode")]
    assert cell["verdict"] == "fail" and cell["expected_failure"]
    assert "fail (known finding, expected failure)" in done.stdout
    # an exit-0 run does not print its expected failures as FAILURES nor 'fail N' in its last line,
    # and names no flag the user did not give
    assert "FAILURES:" not in done.stdout.replace("EXPECTED FAILURES", "")
    expected = sum(c["verdict"] == "fail" and c["expected_failure"] for c in cells.values())
    last = _last_summary(done.stdout)
    assert f"fail 0, expected failure (known finding) {expected}" in last, last
    assert "--mxgate-xfail-known" not in done.stdout
    # mxgate check prints mxgate's lines only: no pytest progress dots, warnings summary or tail
    assert "PytestAssertRewriteWarning" not in done.stdout + done.stderr
    assert not any(line.strip() and set(line.strip()) <= set(".sxFE") for line in done.stdout.splitlines())
    assert "passed" not in done.stdout.splitlines()[-1]
    assert not (where / ".hypothesis").exists() and not (where / ".pytest_cache").exists()


def test_backend_that_cannot_run_here_has_its_own_status(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if getattr(torch.version, "hip", None):
        pytest.skip("this machine has ROCm: aiter may run here")
    done = mxgate(["check", "--backend", "aiter", "--tier", "quick"], tmp_path)
    assert done.returncode == outcome.EXIT_NOTHING_RAN, done.stdout[-2000:]
    assert "aiter: " in done.stdout and "exit status 5" in done.stdout
    allowed = mxgate(["check", "--backend", "aiter", "--tier", "quick", "--allow-unsupported"], tmp_path)
    assert allowed.returncode == outcome.EXIT_PASS, allowed.stdout[-2000:]


@pytest.mark.parametrize("args, says", [
    (["check", "--profile", "bogus"], "--profile must be one of"),
    (["check", "--backend", "nope"], "backend must be one of"),
    (["check", "--backend", "no_such_module:Backend"], "cannot import module 'no_such_module'"),
    (["check", "--backend", "faulty_backends:Missing"], "has no attribute 'Missing'"),
    (["check", "--json", "missing-folder/m.json"], "does not exist"),
    (["check", "--junitxml", "."], "is a directory"),
    (["check", "--timeout", "-1"], "--timeout must be a positive number"),
    (["check", "--tier", "huge"], "invalid choice"),
    (["check", "--device", "tpu"], "invalid choice"),
], ids=["profile", "backend", "module", "attr", "json-folder", "junit-dir", "timeout", "tier", "device"])
def test_usage_errors_are_one_line_before_anything_runs(tmp_path: Path, args: list[str], says: str) -> None:
    done = mxgate(args, tmp_path, timeout=60)
    assert done.returncode == outcome.EXIT_USAGE
    assert says in done.stderr and "Traceback" not in done.stderr
    assert "mxgate check: tier" not in done.stdout  # refused before the run started
    assert not list(tmp_path.iterdir())


def test_pytest_route_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "mxgate.conformance", "--backend", "nope",
                           "-p", "no:cacheprovider"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == outcome.EXIT_USAGE
    assert "backend must be one of" in done.stderr + done.stdout and "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("workers", [None, "2"], ids=["serial", "xdist-2"])
def test_raising_crashing_and_hanging_ops_are_fail_cells(tmp_path: Path, workers: str | None) -> None:
    args = ["check", "--tier", "quick", "--timeout", "5", "--json", "m.json", "--markdown", "m.md", "--junitxml", "j.xml",
            "--backend", "ml_dtypes"]
    for name in FAULTY:
        args += ["--backend", name]
    if workers:
        args += ["-n", workers]
    done = mxgate(args, tmp_path, timeout=900)
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-2000:]
    for report in ("m.json", "m.md", "j.xml"):
        assert (tmp_path / report).is_file(), report
    cells = _cells(tmp_path / "m.json")
    causes = {
        ("faulty_backends:Raising", "e2m1.encode"): "raised ValueError: planted ValueError from the kernel",
        ("faulty_backends:Raising", "e4m3fn.encode"): "raised RuntimeError: planted RuntimeError from the kernel",
        ("faulty_backends:Segfault", "e2m1.encode"): "crashed: signal 11 (SIGSEGV)",
        ("faulty_backends:Hanging", "e2m1.encode"): "timeout after 5 s",
    }
    for key, cause in causes.items():
        cell = cells[key]
        assert cell["verdict"] == "fail", key
        assert cause in cell["failures"][0]["reason"], (key, cell["failures"][0])
    # a hung op waits out its timeout once (per worker process), later calls fail at once
    hung = cells[("faulty_backends:Hanging", "e2m1.encode")]["failures"]
    assert sum("timeout after 5 s (running" in f["reason"] and not f["reason"].startswith("not run") for f in hung) <= 2
    assert any(f["reason"].startswith("not run: an earlier call of e2m1.encode hit the timeout") for f in hung)
    # the rest of the run completed: the faulty backends' other op, and every ml_dtypes cell
    for name in FAULTY:
        assert cells[(name, "e8m0.decode")]["verdict"] == "exact"
    ml = [c for (b, _), c in cells.items() if b == "ml_dtypes"]
    assert len(ml) >= 6 and all(c["verdict"] == "exact" for c in ml)
    assert _junit_failures(tmp_path / "j.xml") >= sum(c["failures_total"] for c in cells.values() if c["verdict"] == "fail")


def test_plugin_leaves_other_pytest_runs_alone(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text(
        "import os\n\ndef test_untouched():\n    assert 'TRITON_INTERPRET' not in os.environ\n")
    env = _env()
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_other.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
    assert "mxgate conformance matrix" not in done.stdout


@pytest.mark.parametrize("pytest_status, rows, named, allow, expected", [
    (0, [{"backend": "a", "verdict": "exact"}], ["a"], False, 0),
    (0, [{"backend": "a", "verdict": "exact"}, {"backend": "a", "verdict": "fail"}], [], False, 1),
    (0, [{"backend": "a", "verdict": "fail", "expected_failure": True}], [], False, 0),
    (1, [{"backend": "a", "verdict": "exact"}], [], False, 1),  # another test of the session failed
    (0, [{"backend": "a", "verdict": "exact"}], ["a", "b"], False, 5),
    (0, [{"backend": "a", "verdict": "exact"}], ["a", "b"], True, 0),
    (0, [{"backend": "b", "verdict": "unsupported"}], ["b"], False, 5),
    (5, [], [], False, 5),
    (1, [{"backend": "a", "verdict": "fail"}], ["a", "b"], True, 1),
    (4, [], [], False, 2),
    (2, [{"backend": "a", "verdict": "exact"}], [], False, 3),  # pytest INTERRUPTED without a signal: collection errors
    (3, [], [], False, 3),
])
def test_exit_status_contract(pytest_status: int, rows: list[dict], named: list[str], allow: bool, expected: int) -> None:
    assert outcome.exit_status(pytest_status, rows, named, allow_unsupported=allow) == expected


def test_known_findings_can_be_device_specific() -> None:
    from mxgate.conformance import known_findings

    cpu = known_findings.finding("aiter-triton", "mx.quantize", "cpu")
    cuda = known_findings.finding("aiter-triton", "mx.quantize", "cuda")
    assert "TRITON_INTERPRET" in cpu and "saturates" in cuda
    assert known_findings.finding("triton-mxfp", "e2m1.encode", "cuda") == known_findings.finding("triton-mxfp", "e2m1.encode")
    assert known_findings.finding("oracle", "e2m1.encode") is None


def test_ops_a_platform_cannot_run_are_not_supported_here(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from mxgate.kernels import codecs, vllm_triton

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert "AMD gfx942 only" in vllm_triton._cuda_problem("fnuz")
    assert vllm_triton._cuda_problem("fn") is None
    import triton.tools.mxfp as mxfp

    backend = codecs.TritonMxfpBackend("cpu")
    assert backend.available_for("e8m0.decode")
    monkeypatch.delattr(mxfp, "fp8e8m0_to_float32")
    status = backend.available_for("e8m0.decode")
    assert not status and "has no fp8e8m0_to_float32" in status.reason
    assert backend.available_for("e2m1.encode")


@in_readme_runs
def test_the_readme_check_on_the_cpu_backends(readme_run: Run, readme_run_xfail_known: Run) -> None:
    """README 'Start here': every available CPU backend; the fails are the documented findings of
    triton-mxfp, torchao RCEIL and (where onnx is installed) ONNX's reference Cast and QuantizeLinear."""
    assert readme_run.done.returncode == outcome.EXIT_FAIL, readme_run.done.stdout[-3000:]
    cells = _cells(readme_run.where / "m.json")
    failing = sorted(key for key, c in cells.items() if c["verdict"] == "fail")
    assert failing == _readme_failing_cells()
    assert all(cells[key]["known_findings"] for key in failing)
    # every other cell passes, so only the failing backends' run with --xfail-known is needed
    assert all(c["verdict"] in ("exact", "acceptable", "unsupported") for key, c in cells.items()
               if key not in failing), sorted({c["verdict"] for c in cells.values()})
    assert readme_run_xfail_known.done.returncode == outcome.EXIT_PASS, readme_run_xfail_known.done.stdout[-3000:]
    known = _cells(readme_run_xfail_known.where / "m.json")
    assert sorted(key for key, c in known.items() if c["expected_failure"]) == failing


SOURCE_BACKENDS = {"vllm-triton": "MXGATE_VLLM_SRC", "vllm-triton-fnuz": "MXGATE_VLLM_SRC",
                   "aiter-triton": "MXGATE_AITER_SRC", "aiter-reference": "MXGATE_AITER_SRC",
                   "microxcaling": "MXGATE_MICROXCALING_SRC",
                   "triton-kernels-round-up": "MXGATE_TRITON_KERNELS_SRC",
                   "triton-kernels-round-down": "MXGATE_TRITON_KERNELS_SRC",
                   "deepgemm-reference": "MXGATE_DEEPGEMM_SRC"}
# the installed package that would stand in for each source (the backend then needs no variable)
_PACKAGE = {"vllm-triton": "vllm", "vllm-triton-fnuz": "vllm", "aiter-triton": "aiter", "aiter-reference": "aiter",
            "microxcaling": "mx", "triton-kernels-round-up": "triton_kernels.numerics_details",
            "triton-kernels-round-down": "triton_kernels.numerics_details", "deepgemm-reference": "deep_gemm"}


def _package_installed(backend: str) -> bool:
    try:
        return importlib.util.find_spec(_PACKAGE[backend]) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is not installed
        return False


@pytest.fixture(scope="module")
def run_without_sources(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One run naming every source backend whose package is not installed here, with neither
    source variable set."""
    where = tmp_path_factory.mktemp("without-sources")
    env = _env()
    for name in set(SOURCE_BACKENDS.values()):
        env.pop(name, None)
    named = [arg for backend in SOURCE_BACKENDS if not _package_installed(backend) for arg in ("--backend", backend)]
    done = subprocess.run([sys.executable, "-m", "mxgate", "check", *named, "--tier", "quick"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=600)
    return Run(done, where)


@pytest.mark.xdist_group("gate-run-without-sources")
@pytest.mark.parametrize("backend, variable", SOURCE_BACKENDS.items(), ids=list(SOURCE_BACKENDS))
def test_a_source_backend_without_its_source_is_one_line_naming_the_variable(request: pytest.FixtureRequest,
                                                                             backend: str, variable: str) -> None:
    if _package_installed(backend):
        pytest.skip(f"the {_PACKAGE[backend]} package is installed here")
    done = request.getfixturevalue("run_without_sources").done
    assert done.returncode == outcome.EXIT_NOTHING_RAN, done.stdout[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"  {backend}: ")]
    assert len(lines) == 1 and f"set {variable}" in lines[0]


def test_a_lone_worker_imports_torch_only_if_its_backend_does(tmp_path: Path) -> None:
    """A start of one worker leaves torch out of the fork server (over a second of CPU that most
    lone backends never use); its worker imports torch itself when its backend needs it."""
    script = ("import sys\n"
              "from multiprocessing import forkserver\n"
              "import numpy as np\n"
              "from mxgate.kernels import isolation\n"
              "for name in sys.argv[1:]:\n"
              "    backend = isolation.load(name, 'cpu')\n"
              "    print(name, backend.op('e4m3fn.encode').run(np.float32([1.0, 2.0])).tolist())\n"
              "    backend.close()\n"
              "print('torch' in forkserver._forkserver._preload_modules, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script, "oracle", "torch"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["oracle [56, 64]", "torch [56, 64]", "False False"], done.stdout


_TOGETHER = """\
import sys
from multiprocessing import forkserver
import numpy as np
from mxgate.kernels import isolation
loaded = isolation.start_all(['torchao', 'torchao-mx-floor'], 'cpu')
for name, backend in loaded.items():
    print(name, backend.available().reason if not backend.available() else
          backend.op('e2m1.encode').run(np.float32([1.0, -6.0])).tolist() if name == 'torchao' else 'loaded')
print(type(loaded['torchao']._worker.process._popen).__module__)
isolation.close_all(list(loaded.values()))
print(forkserver._forkserver._preload_modules[2:], 'torch' in sys.modules)
"""


def test_two_torchao_workers_share_one_quiet_torchao_import(tmp_path: Path) -> None:
    """The first start of a fresh process starting two torchao workers together preloads torch
    and torchao once for both, printing nothing; the workers still run their ops."""
    pytest.importorskip("torchao")
    done = subprocess.run([sys.executable, "-c", _TOGETHER], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.split("\n")[:4] == ["torchao [2, 15]", "torchao-mx-floor loaded", "multiprocessing.popen_forkserver",
                                           "['torch', 'mxgate.kernels.torchao_preload'] False"], done.stdout
    assert done.stderr == "", done.stderr[-2000:]  # torchao's import-time lines stay in the server, unprinted


def test_a_torchao_that_fails_to_import_ends_the_preloading_server_quietly(tmp_path: Path) -> None:
    """A torchao whose import raises: the server that preloaded it ends without a word, and each
    worker is spawned instead and says why torchao cannot be imported, as it would unpreloaded."""
    fake = tmp_path / "fake" / "torchao"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import sys\nprint('torchao noise', file=sys.stderr)\n"
                                      "raise RuntimeError('planted: this torchao is broken')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "fake"), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-c", _TOGETHER], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.split("\n")
    assert lines[0].startswith("torchao torchao MX helpers not importable: planted: this torchao is broken"), lines
    assert "planted: this torchao is broken" in lines[1] and lines[2] == "multiprocessing.popen_spawn_posix", lines
    # each worker's failed import shows what torchao printed (quiet.foreign_imports); the server's shows nothing
    assert done.stderr == "torchao noise\n" * 2, done.stderr[-2000:]


def test_the_fork_server_preloads_what_several_of_its_backends_import(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """torch and torchao are preloaded only where at least two of the backends import them:
    declared for built-ins, read from a user module's own import lines without running its
    package (whose __init__ here would raise)."""
    from mxgate import kernels
    from mxgate.kernels import isolation

    (tmp_path / "uses_torch.py").write_text("import numpy\nfrom torch import nn  # a kernel on torch\n")
    (tmp_path / "uses_torchao.py").write_text("import torchao.prototype.mx_formats\n")
    (tmp_path / "plain.py").write_text("import numpy as np\n# torch is only mentioned here\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('package code ran')\n")
    (tmp_path / "pkg" / "mod.py").write_text("    import torch\n")
    (tmp_path / "nsp" / "sub").mkdir(parents=True)  # namespace packages: no __init__.py
    (tmp_path / "nsp" / "sub" / "m.py").write_text("import torch\n")
    (tmp_path / "other.py").write_text("import torch\n")  # not plain.other, which does not exist
    monkeypatch.syspath_prepend(str(tmp_path))
    assert kernels.heavy_imports("uses_torch:B") == ("torch",)
    assert kernels.heavy_imports("uses_torchao:B") == ("torch", "torchao")
    assert kernels.heavy_imports("plain:B") == ()
    assert kernels.heavy_imports("pkg.mod:B") == ("torch",)
    assert kernels.heavy_imports("no_such_module:B") == ()
    assert kernels.heavy_imports("plain.other:B") == ()
    assert kernels.heavy_imports("nsp.sub.m:B") in ((), ("torch",))  # a guess, never an error
    assert "pkg" not in sys.modules and "nsp" not in sys.modules
    assert kernels.heavy_imports("oracle") == () and kernels.heavy_imports("sglang-triton") == ("torch",)
    assert set(kernels._HEAVY) <= set(kernels.names())  # declarations of built-ins that exist
    torchao = ["torch", "mxgate.kernels.torchao_preload"]
    assert isolation.shared_preloads(["oracle", "ml_dtypes", "plain:B"]) == []
    assert isolation.shared_preloads(["torch", "oracle", "plain:B"]) == []
    assert isolation.shared_preloads(["torch", "uses_torch:B"]) == ["torch"]
    assert isolation.shared_preloads(["torch", "torch"]) == []  # one backend named twice starts once
    assert isolation.shared_preloads(["torchao", "uses_torchao:B"]) == torchao
    assert isolation.shared_preloads(kernels.names()) == torchao


_PRELOAD_PROBE = """\
def pytest_sessionfinish(session):
    # an xdist worker of this run (PYTEST_XDIST_WORKER may be inherited from the run that started it)
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker:
        from multiprocessing import forkserver

        from mxgate.kernels import isolation

        started = bool(isolation._SERVER.get("environment"))
        preloaded = "torch" in (forkserver._forkserver._preload_modules or ())
        with open(f"probe-{worker}.txt", "w") as f:
            f.write(f"{started} {preloaded}")
"""


# A second backend that imports torch, told apart by its source's import line (heavy_imports);
# torch's own backend is the first. torchao's backends would do as well, at twice the imports.
_TORCH_SPEC_BACKEND = """\
import torch  # noqa: F401 - what makes the fork server preload it

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel

Backend = backend_from_functions(
    "imports-torch", kernel("e2m1.encode", lambda x: oracle.encode_e2m1(x, "gfx950"), profile="gfx950"))
"""


def test_an_xdist_worker_of_several_backends_preloads_torch_at_its_first_start(tmp_path: Path) -> None:
    """An xdist worker starts its backends one by one at their first calls: whichever start
    comes first, the fork server preloads torch for the rest where two of the run's backends
    import it, so that each of them does not import it again (docs/results/cpu-2026-12-06-speed.md)."""
    pytest.importorskip("torch")
    (tmp_path / "preload_probe.py").write_text(_PRELOAD_PROBE)
    (tmp_path / "imports_torch.py").write_text(_TORCH_SPEC_BACKEND)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "preload_probe", "-p", "no:cacheprovider", "-q",
                           "--pyargs", "mxgate.conformance.test_elements", "--backend", "ml_dtypes",
                           "--backend", "torch", "--backend", "imports_torch:Backend", "--tier", "quick", "-n", "1",
                           "-k", "test_e4m3_decode or test_e2m1_encode"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-2000:]
    assert "\nimports_torch:Backend\n  e2m1.encode " in done.stdout, done.stdout[-3000:]  # its cells ran
    # one worker, whose first start is ml_dtypes' (no torch): torch is preloaded all the same
    probes = sorted(p.read_text() for p in tmp_path.glob("probe-gw*.txt"))
    assert probes == ["True True"], probes


def test_debug_is_accepted_anywhere_and_shows_the_traceback(tmp_path: Path) -> None:
    plain = mxgate(["vectors", "verify", "--dir", "no-such-folder"], tmp_path, timeout=60)
    assert plain.returncode == outcome.EXIT_USAGE and "Traceback" not in plain.stderr
    debug = mxgate(["vectors", "verify", "--dir", "no-such-folder", "--debug"], tmp_path, timeout=60)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie does not)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def test_an_interrupted_start_leaves_no_worker_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt while backends start side by side (after the first has loaded) ends every
    worker of that start: the caller gets none of them, so none may outlive the call."""
    from mxgate.kernels import isolation

    pids: list[int] = []
    finish = isolation._Worker.finish_start

    def interrupted_at_the_second(worker):
        pids.append(worker.process.pid)
        if len(pids) == 2:
            raise KeyboardInterrupt
        return finish(worker)

    monkeypatch.setattr(isolation._Worker, "finish_start", interrupted_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        isolation.start_all(["oracle", "ml_dtypes"], "cpu")
    assert len(pids) == 2
    assert not [pid for pid in pids if _running(pid)], pids


def test_a_worker_that_cannot_start_gives_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that fails to start (no pid) is stopped with the others: the caller sees that
    failure, not an error of the clean-up (a TypeError from killing pid None hid it)."""
    import multiprocessing

    from mxgate.kernels import isolation

    class NoProcess(multiprocessing.get_context("spawn").Process):
        def start(self) -> None:
            raise OSError("planted: no process for this worker")

    class Context:
        Pipe = staticmethod(isolation._CONTEXT.Pipe)
        Process = NoProcess

    monkeypatch.setattr(isolation, "_fork_server", lambda *args: None)
    monkeypatch.setattr(isolation, "_CONTEXT", Context)
    with pytest.raises(OSError, match="planted: no process"):
        isolation.start_all(["oracle", "ml_dtypes"], "cpu")


def test_workers_start_from_the_fork_server_and_end_side_by_side() -> None:
    """Issue #26: workers fork from a preloaded fork server (never from the gate's process), in
    the environment the gate gives them, and close_all ends them together."""
    import multiprocessing

    from mxgate.kernels import isolation

    loaded = isolation.start_all(["oracle", "ml_dtypes"], "cpu")
    backends = list(loaded.values())
    try:
        assert all(isinstance(b, isolation.IsolatedBackend) for b in backends), loaded
        import numpy as np

        x = np.array([1.0, 2.0], dtype=np.float32)
        for backend in backends:
            assert backend.op("e2m1.encode").run(x).tolist() == [2, 4]
        if "forkserver" in multiprocessing.get_all_start_methods() and isolation._SERVER.get("environment"):
            kinds = {type(b._worker.process._popen).__module__ for b in backends}
            assert kinds == {"multiprocessing.popen_forkserver"}, kinds
            assert isolation._fork_server({"ANOTHER": "environment"}, ["oracle"]) is None  # spawned instead
            known = isolation._SERVER["environment"]
            # a source variable is read after the fork (the worker sets its environment first)
            assert isolation._fork_server({**known, "MXGATE_VLLM_SRC": "elsewhere"}, ["oracle"]) is not None
            # inductor reads its cache folder at each compile; importing torchao in the gate's process sets it
            assert isolation._fork_server({**known, "TORCHINDUCTOR_CACHE_DIR": "elsewhere"}, ["oracle"]) is not None
            assert isolation._fork_server({**known, "PYTHONPATH": "elsewhere"}, ["oracle"]) is None  # the server's sys.path
    finally:
        isolation.close_all(backends)
    assert all(b._worker.process is None for b in backends)
