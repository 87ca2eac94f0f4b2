"""docs/your-kernel.md's CI recipe runs as written (issue 22 item 8): the script
docs/examples/kernel-ci/ci.sh installs mxgate from a wheel built from this repository into a
fresh virtual environment and certifies the example kernel, exit status 0 and both reports.

The environment borrows the running interpreter's installed packages (numpy, pytest,
hypothesis, ml_dtypes) through a .pth file, so pip needs no index (PIP_NO_INDEX=1): only mxgate
itself comes from the wheel."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "kernel-ci"
DOC = ROOT / "docs" / "your-kernel.md"


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _wheel(tmp_path: Path, env: dict[str, str]) -> Path:
    # from a copy: a build leaves build/ and egg-info folders behind
    src = tmp_path / "mxgate-src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                              ".pytest_cache", ".hypothesis", ".venv", ".whl"))
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
          "-w", str(tmp_path / "wheels")], cwd=tmp_path, env=env)
    (wheel,) = (tmp_path / "wheels").glob("mxgate-*.whl")
    return wheel


def _venv(tmp_path: Path) -> Path:
    """A venv whose own site-packages come first, then the running interpreter's (whatever venv
    that is: a nested venv's --system-site-packages would give the base interpreter's instead)."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(env_dir)
    python = env_dir / "bin" / "python3"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    outer = [p for p in site.getsitepackages() + [site.getusersitepackages()] if Path(p).is_dir()]
    (Path(purelib) / "outer-site-packages.pth").write_text("\n".join(outer) + "\n")
    return env_dir


def test_the_docs_show_the_files_the_test_runs() -> None:
    text = DOC.read_text()
    blocks = re.findall(r"```(?:python|bash)\n(.*?)```", text, flags=re.S)
    assert (EXAMPLE / "ci.sh").read_text() in blocks
    assert (EXAMPLE / "my_kernel.py").read_text() in blocks
    assert "not published on a package index" in text and 'pip install "mxgate==' not in text


@pytest.mark.slow
def test_the_kernel_ci_recipe_runs_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    wheel = _wheel(tmp_path, env)
    env_dir = _venv(tmp_path)
    kernel_repo = tmp_path / "my-kernel-repo"
    kernel_repo.mkdir()
    shutil.copy(EXAMPLE / "my_kernel.py", kernel_repo)
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}", MXGATE=str(wheel))
    done = subprocess.run(["bash", str(EXAMPLE / "ci.sh")], cwd=kernel_repo, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed = _run([str(env_dir / "bin" / "python3"), "-c", "import mxgate; print(mxgate.__file__)"],
                     cwd=kernel_repo, env=env).stdout
    assert installed.startswith(str(env_dir)), installed  # the wheel's mxgate ran, not the checkout's
    assert (env_dir / "bin" / "mxgate").is_file()
    cells = json.loads((kernel_repo / "mxgate.json").read_text())["cells"]
    assert cells and all(c["backend"] == "my_kernel:Backend" and c["verdict"] == "exact" for c in cells)
    assert "<testsuite" in (kernel_repo / "mxgate.xml").read_text()


def test_the_recipe_without_mxgate_says_what_to_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MXGATE"}
    done = subprocess.run(["bash", str(EXAMPLE / "ci.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "set MXGATE to an mxgate wheel or checkout" in done.stderr
