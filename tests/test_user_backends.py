"""Bringing one's own kernel: backends from outside the package through every route
(``module:attr`` as a class, an instance-returning callable, plain functions; an installed
package's entry point), run as a kernel repository's CI would, and the docs' example as written."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mxgate import kernels
from mxgate.conformance import outcome
from mxgate.kernels.functions import backend_from_functions, kernel

HERE = Path(__file__).parent
USER_BACKENDS = HERE / "user_backends"
DOC = HERE.parent / "docs" / "your-kernel.md"


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in paths] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _check(cwd: Path, *args: str, paths: tuple[Path, ...] = (USER_BACKENDS,)) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxgate", "check", "--tier", "quick", *args], cwd=cwd,
                          env=_env(*paths), capture_output=True, text=True, timeout=600)


GOOD = ["user_kernels:GoodBackend", "user_kernels:make_good", "user_kernels:GoodFunctions"]
BAD = ["user_kernels:BadBackend", "user_kernels:BadFunctions"]


def _check_all(cwd: Path, specs: list[str]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One gate run over several backends (each in a worker of its own) and its JSON cells."""
    done = _check(cwd, *[arg for spec in specs for arg in ("--backend", spec)], "--json", "m.json")
    return done, json.loads((cwd / "m.json").read_text())["cells"]


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, list[dict]]:
    return _check_all(tmp_path_factory.mktemp("good-run"), GOOD)


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, list[dict]]:
    return _check_all(tmp_path_factory.mktemp("bad-run"), BAD)


@pytest.mark.xdist_group("user-backends-good-run")
@pytest.mark.parametrize("spec", GOOD)
def test_a_correct_backend_from_outside_passes(good_run, spec: str) -> None:
    done, cells = good_run
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-2000:]
    assert {c["backend"] for c in cells} == set(GOOD)
    mine = [c for c in cells if c["backend"] == spec]
    assert mine and all(c["verdict"] == "exact" for c in mine)


@pytest.mark.xdist_group("user-backends-bad-run")
@pytest.mark.parametrize("spec", BAD)
def test_a_broken_backend_fails_naming_the_first_mismatch(bad_run, spec: str) -> None:
    done, cells = bad_run
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:]
    cell = next(c for c in cells if c["backend"] == spec and c["op"] == "e2m1.encode")
    assert cell["verdict"] == "fail" and cell["failures"][0]["first_mismatch"] is not None
    assert "expected 0x03, got 0x02" in _failure_block(done.stdout, f"FAIL {spec} e2m1.encode"), done.stdout[-3000:]


def _failure_block(stdout: str, head: str) -> str:
    """The matrix's lines of one failing cell: its FAIL line and the indented lines under it."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(head))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        block.append(line)
    return "\n".join(block)


def test_function_declarations_are_checked_when_made() -> None:
    def encode(x):
        return x

    with pytest.raises(ValueError, match="op must be one of"):
        kernel("e2m1.encodee", encode, profile="gfx950")
    with pytest.raises(ValueError, match="profile must be one of"):
        kernel("e2m1.encode", encode, profile="nope")
    with pytest.raises(TypeError, match=r"e2m1.encode takes \(x\)"):
        kernel("e2m1.encode", lambda x, scale: x, profile="gfx950")
    with pytest.raises(TypeError, match=r"sglang-page68.store takes \(k_bf16, slots, cache\)"):
        kernel("sglang-page68.store", lambda k_bf16: k_bf16, profile="gfx950")
    with pytest.raises(ValueError, match="declared twice"):
        backend_from_functions("twice", kernel("e2m1.encode", encode, profile="gfx950"),
                               kernel("e2m1.encode", encode, profile="gfx950"))


def test_torch_functions_get_tensors_and_give_back_arrays() -> None:
    torch = pytest.importorskip("torch")
    seen = []

    def encode(x):
        seen.append(type(x))
        return x.to(torch.float8_e4m3fn).view(torch.uint8)

    made = backend_from_functions("t", kernel("e4m3fn.encode", encode, profile="torch-cpu", arrays="torch"))()
    out = made.op("e4m3fn.encode").run(np.float32([1.0, -0.5, 448.0]))
    assert seen == [torch.Tensor] and isinstance(out, np.ndarray)
    assert out.tolist() == [0x38, 0xB0, 0x7E]
    assert not backend_from_functions("c", kernel("e4m3fn.encode", encode, profile="torch-cpu"))(device="cuda").available()


def test_registry_resolves_every_form_and_names_the_origin() -> None:
    sys.path.insert(0, str(USER_BACKENDS))
    try:
        for spec in ("user_kernels:GoodBackend", "user_kernels:make_good", "user_kernels:GoodFunctions"):
            backend = kernels.get(spec)
            assert backend.name == spec and backend.implements("e2m1.encode")
            assert kernels.origin(spec).kind == "command line"
        with pytest.raises(TypeError, match="not a mxgate.kernels.Backend"):
            kernels.get("user_kernels:ABOVE_TIE")
    finally:
        sys.path.remove(str(USER_BACKENDS))
    assert kernels.origin("oracle").kind == "built-in"


def _doc_blocks() -> dict[str, str]:
    """The docs' Python blocks that start with '# <file>.py', by file name."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    return {m.group(1): b for b in blocks if (m := re.match(r"# (\w+\.py)\n", b))}


def test_the_documented_examples_run_as_written(tmp_path: Path) -> None:
    blocks = _doc_blocks()
    assert set(blocks) == {"my_kernel.py", "my_torch_kernel.py"}
    for name, code in blocks.items():
        (tmp_path / name).write_text(code)
    commands = re.findall(r"^PYTHONPATH=\. mxgate check (.*?)(?:\s+#.*)?$", DOC.read_text(), flags=re.M)
    assert len(commands) == 4  # sections 1 and 2, and the CI recipe's (tests/test_floor_kernel_ci.py runs it whole)
    import torch

    for command in commands:
        args = command.split()
        if "cuda" in args and not torch.cuda.is_available():
            continue
        done = subprocess.run([sys.executable, "-m", "mxgate", "check", *args], cwd=tmp_path, env=_env(tmp_path),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == outcome.EXIT_PASS, (command, done.stdout[-3000:], done.stderr[-2000:])
    assert (tmp_path / "gate.xml").is_file()
    profile_block = next(b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
                         if "profiles.register" in b)
    script = profile_block + textwrap.dedent("""
        from mxgate import oracle
        assert oracle.encode_e2m1(np.float32([0.75]), "my-kernel").tolist() == [1]  # toward zero
        """)
    done = subprocess.run([sys.executable, "-c", "import numpy as np\n" + script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


_PLUGIN_CODE = textwrap.dedent("""
    import ml_dtypes
    import numpy as np
    from mxgate.kernels import Backend, Op

    class Plugged(Backend):
        description = "an installed package's backend"

        def ops(self):
            cast = lambda x: np.asarray(x, np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
            return {"e2m1.encode": Op("e2m1.encode", "ml_dtypes", cast)}
    """)


def _plugin_wheel(root: Path, entry_name: str) -> Path:
    """A pure-Python wheel of a package declaring a ``mxgate.backends`` entry point.

    Written directly (a wheel is a zip of the files and a dist-info folder) rather than built:
    building needs a build backend in the running interpreter, and a fresh virtual environment
    may have none (or an old setuptools without bdist_wheel)."""
    dist_info = "mxgate_user_plugin-0.0.1.dist-info"
    files = {
        "mxgate_user_plugin/__init__.py": _PLUGIN_CODE,
        f"{dist_info}/METADATA": "Metadata-Version: 2.1\nName: mxgate-user-plugin\nVersion: 0.0.1\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: mxgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/entry_points.txt": f"[mxgate.backends]\n{entry_name} = mxgate_user_plugin:Plugged\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{dist_info}/RECORD"] = "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n"
    wheel = root / "mxgate_user_plugin-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def _installed_plugin(tmp_path: Path, entry_name: str) -> dict[str, str]:
    """The environment of a run that sees the plugin as an installed package: pip installs its
    wheel into a folder on PYTHONPATH, for the interpreter running the tests (whatever venv it
    is), so mxgate and its dependencies are the ones under test, not a nested venv's base."""
    target = tmp_path / "site"
    wheel = _plugin_wheel(tmp_path, entry_name)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return _env(target)


@pytest.mark.slow
def test_an_installed_packages_entry_point_is_picked_up(tmp_path: Path) -> None:
    env = _installed_plugin(tmp_path, "plugged-ml-dtypes")
    listed = subprocess.run([sys.executable, "-m", "mxgate", "backends", "--json"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    entry = next(e for e in json.loads(listed.stdout) if e["name"] == "plugged-ml-dtypes")
    assert entry["origin"].startswith("entry point of mxgate-user-plugin") and entry["available"]
    assert entry["ops"] == {"e2m1.encode": "ml_dtypes"}
    done = subprocess.run([sys.executable, "-m", "mxgate", "check", "--backend", "plugged-ml-dtypes", "--tier", "quick",
                           "--json", "m.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:]
    cells = json.loads((tmp_path / "m.json").read_text())["cells"]
    assert [c["backend"] for c in cells] == ["plugged-ml-dtypes"] and cells[0]["verdict"] == "exact"


@pytest.mark.slow
def test_an_entry_point_clashing_with_a_built_in_is_a_usage_error(tmp_path: Path) -> None:
    env = _installed_plugin(tmp_path, "oracle")
    done = subprocess.run([sys.executable, "-m", "mxgate", "check", "--backend", "oracle", "--tier", "quick"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == outcome.EXIT_USAGE
    assert "clashes with the built-in backend" in done.stderr and "Traceback" not in done.stderr
