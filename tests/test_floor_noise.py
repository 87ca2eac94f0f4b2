"""What a newcomer reads (issue 22 item 5): no foreign import noise from mxgate's adapters
unless MXGATE_DEBUG=1 (``mxgate --debug``), and a set-up that prints no pip resolver error."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mxgate.cli import main
from mxgate.kernels import quiet

ROOT = Path(__file__).resolve().parents[1]


def _noisy_import() -> None:
    """What torchao and torch do while being imported: a log warning, a warning, a stray print."""
    logging.getLogger("some.foreign.package").warning("Failed to load _C_mxfp8.so")
    warnings.warn("register_constant() on Enum subclasses is deprecated", DeprecationWarning)
    print("stray import-time print", file=sys.stderr)


def test_foreign_import_noise_is_dropped(monkeypatch, capsys, caplog) -> None:
    monkeypatch.delenv(quiet.DEBUG_ENV, raising=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet.foreign_imports():
            _noisy_import()
    assert seen == [] and caplog.records == []
    assert capsys.readouterr().err == ""
    logging.getLogger("some.foreign.package").warning("after the import")  # logging is back on
    assert [r.getMessage() for r in caplog.records] == ["after the import"]


def test_mxgate_debug_shows_foreign_noise(monkeypatch, capsys, caplog) -> None:
    monkeypatch.setenv(quiet.DEBUG_ENV, "1")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet.foreign_imports():
            _noisy_import()
    assert [str(w.message) for w in seen] == ["register_constant() on Enum subclasses is deprecated"]
    assert [r.getMessage() for r in caplog.records] == ["Failed to load _C_mxfp8.so"]
    assert "stray import-time print" in capsys.readouterr().err


def test_a_failing_import_keeps_what_it_printed(monkeypatch, capsys) -> None:
    monkeypatch.delenv(quiet.DEBUG_ENV, raising=False)
    with pytest.raises(ImportError, match="no such thing"):
        with quiet.foreign_imports():
            print("the reason it failed", file=sys.stderr)
            raise ImportError("no such thing")
    assert "the reason it failed" in capsys.readouterr().err


def test_the_debug_flag_sets_mxgate_debug(monkeypatch, capsys) -> None:
    monkeypatch.setenv(quiet.DEBUG_ENV, "0")  # so that monkeypatch restores the variable's absence
    monkeypatch.delenv(quiet.DEBUG_ENV)
    assert main(["profiles", "gfx950"]) == 0
    assert quiet.DEBUG_ENV not in os.environ
    assert main(["--debug", "profiles", "gfx950"]) == 0
    assert os.environ[quiet.DEBUG_ENV] == "1"
    capsys.readouterr()


def test_mxgate_backends_prints_nothing_on_stderr(tmp_path: Path) -> None:
    # torchao prints a "Failed to load ..._C_mxfp8...so" line per CUDA extension a CPU machine
    # lacks, and torch logs register_constant() deprecations, when the adapters import them
    env = {k: v for k, v in os.environ.items() if k != quiet.DEBUG_ENV}
    done = subprocess.run([sys.executable, "-m", "mxgate", "backends"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""
    listed = subprocess.run([sys.executable, "-c", "from mxgate import kernels; print(kernels.available())"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr[-2000:]


def _pip_installs(commands: list[str]) -> list[str]:
    return [c for c in commands if re.search(r"\bpip install\b", c)]


@pytest.mark.parametrize("where", ["README.md", ".ci/run"])
def test_sglang_without_its_dependencies_is_installed_last(where: str) -> None:
    # pip checks the whole environment after every install that resolves dependencies; once
    # sglang is there without its serving stack, each later install prints ~70 lines of
    # "sglang requires ..., which is not installed". --no-deps installs skip that check.
    text = (ROOT / where).read_text()
    if where == "README.md":
        setup = re.search(r"```bash\n(pip install .*?)\n```", text).group(1)
        commands = [c.strip() for c in setup.split("&&")]
    else:
        commands = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    installs = _pip_installs(commands)
    sglang = [i for i, c in enumerate(installs) if "sglang" in c]
    assert sglang, installs
    assert all("--no-deps" in installs[i] for i in sglang)
    assert all("--no-deps" in c for c in installs[sglang[0]:]), installs


def test_readme_and_ci_pin_the_same_packages() -> None:
    """One pin per package for the README's set-up and CI (ml_dtypes included: the bench's peer)."""
    def pins(text: str) -> dict[str, str]:
        return dict(re.findall(r'"([A-Za-z_][\w-]*)==([^"]+)"', text))

    readme = pins(re.search(r"```bash\n(pip install .*?)\n```", (ROOT / "README.md").read_text()).group(1))
    ci = pins((ROOT / ".ci/run").read_text())
    assert readme == ci and readme.get("ml_dtypes"), (readme, ci)
