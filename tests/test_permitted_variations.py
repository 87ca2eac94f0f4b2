"""docs/permitted-variations.md is what ``mxgate profiles --variations`` writes today.

When this fails, the profiles or the known findings changed: regenerate the document with
``mxgate profiles --variations > docs/permitted-variations.md`` and commit it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mxgate.cli import main
from mxgate.conformance import variations
from mxgate.oracle import profiles

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_document_is_the_generated_one() -> None:
    committed = (ROOT / variations.DOC).read_text(encoding="utf-8")
    assert committed == variations.render(), (
        f"{variations.DOC} is stale: run `mxgate profiles --variations > {variations.DOC}`")


def test_the_command_prints_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--variations"]) == 0
    assert capsys.readouterr().out == variations.render()


@pytest.mark.parametrize("name", profiles.names())
def test_every_profile_states_its_differences_and_evidence(name: str) -> None:
    p = profiles.get(name)
    text = variations.render()
    section = text.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
    for field in p.differences(profiles.base()):
        assert f"| `{field}` |" in section, f"{name}: {field} missing"
    assert p.evidence and p.evidence in section, f"{name}: no evidence"
