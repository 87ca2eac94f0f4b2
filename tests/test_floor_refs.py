"""Stale references and small facts a newcomer checks first (issue 22 item 9): no citation of
files this repository does not have, the signature error names a command that exists, each
profile prints its own note, docs/spec.md 3.2 names the profiles that use each scale policy,
and ``mxgate --version``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mxgate.cli import main
from mxgate.kernels.functions import kernel
from mxgate.oracle import profiles

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("mxgate/**/*.py", "mxgate/vectors/data/*.json", "tests/**/*.py", "scripts/**/*", "docs/**/*.md",
           "docs/**/*.sh", "docs/**/*.py", "README.md", ".ci/*", "pyproject.toml")
# tests/test_spec_citations.py parses citation forms and spells them out as its own examples
NOT_SCANNED = {Path(__file__).resolve(), ROOT / "tests" / "test_spec_citations.py"}
STALE = {
    "BUGS" + ".md": "no such file: the vectors cite public reports as BUGS-<n> flags (docs/vectors.md)",
    "SP" + "EC.md": "no such file: the contract is docs/spec.md",
    "ops_catalogue" + ".OPS": "point users to `mxgate backends --ops` (docs/ops/table.md)",
}


def test_no_stale_references_come_back() -> None:
    found = []
    for pattern in SCANNED:
        for path in sorted(ROOT.glob(pattern)):
            if not path.is_file() or path.resolve() in NOT_SCANNED or "__pycache__" in path.parts:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
                for needle, why in STALE.items():
                    if needle in line:
                        found.append(f"{path.relative_to(ROOT)}:{number}: {needle} ({why})")
    assert not found, "\n".join(found)
    assert not (ROOT / "BUGS.md").exists() and not (ROOT / "SPEC.md").exists()  # else the rule is moot


def test_a_bad_kernel_signature_names_a_command_that_lists_the_inputs(capsys) -> None:
    with pytest.raises(TypeError) as error:
        kernel("e2m1.encode", lambda x, scale: x, profile="gfx950")
    message = str(error.value)
    assert "e2m1.encode takes (x)" in message and "mxgate backends --ops" in message
    assert main(["backends", "--ops"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"e2m1\.encode.*\bx\b", listed)


GFX950_NOTE = profiles.get("gfx950").notes


@pytest.mark.parametrize("name", ["sglang-rne", "deepgemm", "cuda-satfinite", "aiter-gfx942"])
def test_a_profile_prints_its_own_note_not_gfx950s(name: str, capsys) -> None:
    assert GFX950_NOTE  # the note about AMD's converter the others used to print
    assert main(["profiles", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{name}: ") and GFX950_NOTE not in out
    assert main(["profiles", "gfx950"]) == 0
    assert f"note: {GFX950_NOTE}" in capsys.readouterr().out


def _policy_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "spec.md").read_text()
    section = text[text.index('<a id="spec-3.2"></a>'):text.index('<a id="spec-3.3"></a>')]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", section, flags=re.M)}


@pytest.mark.parametrize("policy", ["ceil", "even"])
def test_spec_3_2_names_the_profiles_that_use_a_policy(policy: str) -> None:
    users = sorted(n for n in profiles.names() if profiles.get(n).scale_policy == policy)
    assert users, f"no registered profile uses {policy}"
    row = _policy_rows()[policy]
    assert "no shipped profile" not in row
    assert all(f"`{n}`" in row for n in users), (users, row)


def test_version_comes_from_the_package_metadata() -> None:
    done = subprocess.run([sys.executable, "-m", "mxgate", "--version"], capture_output=True, text=True, timeout=120)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.returncode == 0 and done.stdout == f"mxgate {declared}\n", done.stderr
