"""``mxgate vectors regen --check`` on damaged and read-only folders (issue 22 item 3, issue 21):
a damaged file is a mismatch naming it (exit 1), never an internal error, and the comparison
writes nothing beside the data."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from mxgate.cli import main
from mxgate.vectors import generator

DATA = generator.package_data_dir()


def _copy_data(tmp_path: Path) -> Path:
    out = tmp_path / "holder" / "data"
    shutil.copytree(DATA, out)
    return out


def _flip_byte(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def test_a_flipped_byte_in_an_npz_is_a_mismatch_naming_the_file(tmp_path: Path, capsys) -> None:
    data = _copy_data(tmp_path)
    npz = data / "scales.npz"
    _flip_byte(npz, npz.stat().st_size // 2)  # inside a member's data: its CRC no longer matches
    status = main(["vectors", "regen", "--check", "--out", str(data)])
    out, err = capsys.readouterr()
    assert status == 1, err[-2000:]
    assert "internal error" not in err and "Traceback" not in err
    named = [line for line in out.splitlines() if "scales.npz" in line]
    assert named and named[0].startswith("scales: scales.npz unreadable (BadZipFile"), out
    assert "vectors out of date: 1 file(s) differ" in out
    # verify agrees on which file it is
    assert main(["vectors", "verify", "--dir", str(data)]) == 1
    assert "FAIL scales.npz" in capsys.readouterr().out


def test_check_writes_nothing_beside_the_data(tmp_path: Path, capsys, monkeypatch) -> None:
    data = _copy_data(tmp_path)
    holder = data.parent
    before = sorted(os.listdir(holder)), sorted(os.listdir(data))
    seen: list[tuple[list[str], list[str]]] = []
    real = generator.generate_into

    def watched(directory: Path, progress=generator._stderr):
        # what lies beside and inside the data folder while the comparison is being built
        def spy(message: str) -> None:
            seen.append((sorted(os.listdir(holder)), sorted(os.listdir(data))))
            progress(message)

        return real(directory, spy)

    monkeypatch.setattr(generator, "generate_into", watched)
    assert main(["vectors", "regen", "--check", "--out", str(data)]) == 0, capsys.readouterr()
    assert seen and all(s == before for s in seen), seen[:3]
    assert (sorted(os.listdir(holder)), sorted(os.listdir(data))) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders anyway")
def test_check_runs_on_a_read_only_folder(tmp_path: Path, capsys) -> None:
    data = _copy_data(tmp_path)
    modes = {}
    for path in (data.parent, data):
        modes[path] = path.stat().st_mode
        path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert main(["vectors", "regen", "--check", "--out", str(data)]) == 0, capsys.readouterr()
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
