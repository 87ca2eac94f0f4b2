"""Acceptance 5: a wheel built from the repository, installed in a fresh virtual environment,
runs ``pytest --pyargs mxgate.conformance --backend oracle --tier quick`` green.

The venv uses --system-site-packages so numpy, pytest and hypothesis need no download; the
wheel is installed with --no-deps and the check runs from an empty folder, so nothing of the
source tree is on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} exited {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_passes_the_quick_tier(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # Build from a copy: the build must not leave build/ or egg-info folders in the work tree.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                              ".pytest_cache", ".hypothesis", ".venv", ".whl"))
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(wheels), "-q"],
         tmp_path, env)
    (wheel,) = wheels.glob("mxgate-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)]
         if _pip_has_python_flag() else
         [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], tmp_path, env)

    work = tmp_path / "elsewhere"
    work.mkdir()
    where = _run([str(python), "-c", "import mxgate, mxgate.vectors as v; print(mxgate.__file__); "
                  "print(sorted(p.name for p in v.package_data_dir().iterdir()))"], work, env).stdout
    assert str(env_dir) in where.splitlines()[0], f"mxgate was not imported from the wheel: {where}"
    assert "manifest.json" in where and "elements.npz" in where

    result = _run([str(python), "-m", "pytest", "--pyargs", "mxgate.conformance", "--backend", "oracle",
                   "--tier", "quick", "-p", "no:cacheprovider", "-q"], work, dict(env, CI="1"), timeout=600)
    assert "mxgate conformance matrix" in result.stdout
    assert " passed" in result.stdout and " failed" not in result.stdout
    verify = _run([str(python), "-c", "from mxgate.cli.vectors_cmd import verify; raise SystemExit(verify())"], work, env)
    assert "vector files verified" in verify.stdout


def _pip_has_python_flag() -> bool:
    """pip >= 22.3 can install into another interpreter with --python."""
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    try:
        major, minor = (int(p) for p in out.split()[1].split(".")[:2])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= (22, 3)
