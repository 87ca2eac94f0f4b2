"""`mxgate identify` as its users run it, for the identify tests: a subprocess with the planted
kernels of tests/user_backends and this checkout on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
USER_BACKENDS = HERE / "user_backends"
REPO = HERE.parent


def cli_env(*first: Path) -> dict[str, str]:
    """The environment of a CLI run: ``first`` and the user backends on the path, then this
    checkout (mxgate itself, wherever the command runs), then what was there."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in first] + [str(USER_BACKENDS), str(REPO)]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_identify(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxgate", "identify", *args], cwd=cwd, env=env or cli_env(),
                          capture_output=True, text=True, timeout=600)
