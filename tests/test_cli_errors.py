"""Every bad input to the ``mxgate`` commands ends in one line on stderr and a documented exit
status, never a traceback; a closed pipe is status 141 (or 0), never a traceback.

Each case runs the installed ``mxgate`` console script as a subprocess from a temporary
directory outside the checkout, as a kernel repository's CI job would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxgate import oracle

SEED = 1111  # every generated buffer below comes from PCG64(SEED)
USAGE, DIFFER, CLOSED_PIPE = 2, 1, 141
EXPLAIN_DOC = Path(__file__).resolve().parents[1] / "docs" / "explain.md"


def _console_script() -> str:
    # the script installed beside this interpreter first: a PATH shim may pick another one
    beside = Path(sys.executable).with_name("mxgate")
    found = str(beside) if beside.is_file() else shutil.which("mxgate")
    assert found, "the mxgate console script is not installed (pip install -e .)"
    return found


MXGATE = _console_script()


def _env(hide: tuple[str, ...] = (), site: Path | None = None) -> dict[str, str]:
    # PYTHONUNBUFFERED off: output to a pipe is then buffered, as in most CI jobs, so a
    # closed pipe can surface at the final flush, the case the commands must handle
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")}
    env["COLUMNS"] = "100"
    if hide:
        assert site is not None
        site.mkdir(exist_ok=True)
        # A meta-path finder that answers as Python does for a package that is not installed.
        (site / "sitecustomize.py").write_text(
            "import sys\n"
            f"_HIDDEN = {tuple(hide)!r}\n"
            "class _NotInstalled:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in _HIDDEN:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "        return None\n"
            "sys.meta_path.insert(0, _NotInstalled())\n")
        env["PYTHONPATH"] = str(site)
    return env


def mxgate(cwd: Path, *argv: str, hide: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([MXGATE, *argv], cwd=cwd, env=_env(hide, cwd / "_site"), text=True,
                          capture_output=True, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, command: str, status: int,
                          *words: str) -> str:
    """The exact status, stderr one line ``mxgate COMMAND: error: ...`` naming ``words``."""
    where = f"status {proc.returncode}, stderr {proc.stderr!r}"
    assert proc.returncode == status, where
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, where
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, where
    assert lines[0].startswith(f"mxgate {command}: error: "), where
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    """A scratch directory (the cwd of every run) with a small packed-row case."""
    assert not tmp_path.resolve().is_relative_to(Path(__file__).resolve().parents[1])
    x = np.random.Generator(np.random.PCG64(SEED)).standard_normal((4, 64), dtype=np.float32)
    packed, scales = oracle.quantize_mx(x, "gfx950")
    np.save(tmp_path / "p.npy", packed)
    np.save(tmp_path / "s.npy", scales)
    shifted = scales.copy()
    shifted[2, 1] += 1  # one e8m0 byte one binade up; the data bytes stay equal
    np.save(tmp_path / "s_shifted.npy", shifted)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "x_empty.npy", np.zeros((0, 64), np.float32))
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "notzip.npz").write_bytes(b"this is not a zip archive")
    head = (tmp_path / "p.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(head[:40])  # the header cut short
    np.savez(tmp_path / "good.npz", a=np.arange(1000))
    damaged = bytearray((tmp_path / "good.npz").read_bytes())
    damaged[200:260] = bytes(60)  # inside the member's data: its CRC no longer matches
    (tmp_path / "damaged.npz").write_bytes(bytes(damaged))
    (tmp_path / "folder.npy").mkdir()
    return tmp_path


EXPLAIN = ("explain", "p.npy", "p.npy", "--layout", "packed-row")


# ---- explain: files -----------------------------------------------------------------------


def test_explain_empty_npy(work: Path) -> None:
    proc = mxgate(work, "explain", "empty.npy", "p.npy", "--layout", "packed-row")
    assert_one_line_error(proc, "explain", USAGE, "EXPECTED", "empty.npy", "empty")


def test_explain_npz_that_is_not_a_zip(work: Path) -> None:
    proc = mxgate(work, "explain", "p.npy", "notzip.npz", "--layout", "packed-row")
    line = assert_one_line_error(proc, "explain", USAGE, "ACTUAL", "notzip.npz", "not an .npz archive")
    assert "pickle" not in line  # numpy's fallback guess; the file holds no pickle


def test_explain_cut_npy_and_damaged_npz(work: Path) -> None:
    proc = mxgate(work, "explain", "cut.npy", "p.npy", "--layout", "packed-row")
    assert_one_line_error(proc, "explain", USAGE, "EXPECTED", "cut.npy")
    proc = mxgate(work, "explain", "p.npy", "damaged.npz", "--layout", "packed-row")
    assert_one_line_error(proc, "explain", USAGE, "ACTUAL", "damaged.npz")


def test_explain_directory_given_as_a_file(work: Path) -> None:
    proc = mxgate(work, "explain", "folder.npy", "p.npy", "--layout", "packed-row")
    line = assert_one_line_error(proc, "explain", USAGE, "EXPECTED", "folder.npy", "is a directory")
    assert "no such file" not in line


def test_explain_missing_file(work: Path) -> None:
    proc = mxgate(work, "explain", "p.npy", "missing.npy", "--layout", "packed-row")
    assert_one_line_error(proc, "explain", USAGE, "ACTUAL", "no such file", "missing.npy")


def test_explain_scales_archive_that_is_not_a_zip(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--scales", "notzip.npz")
    assert_one_line_error(proc, "explain", USAGE, "--scales", "not an .npz archive")


# ---- explain: outputs, checked before the work --------------------------------------------


def test_explain_plot_into_missing_folder_fails_before_the_report(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--plot", "no/such/folder/m.png")
    assert_one_line_error(proc, "explain", USAGE, "--plot", "does not exist")
    assert proc.stdout == ""  # nothing was compared or printed first
    assert not (work / "no").exists()


def test_explain_plot_onto_a_directory(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--plot", "folder.npy")
    assert_one_line_error(proc, "explain", USAGE, "--plot", "is a directory")
    assert proc.stdout == ""


def test_explain_plot_without_matplotlib_fails_before_the_report(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--plot", "m.png", hide=("matplotlib",))
    assert_one_line_error(proc, "explain", USAGE, "--plot", "matplotlib", "pip install")
    assert proc.stdout == "" and not (work / "m.png").exists()


def test_explain_negative_row_counts(work: Path) -> None:
    assert_one_line_error(mxgate(work, *EXPLAIN, "--rows", "-1"), "explain", USAGE, "--rows")
    assert_one_line_error(mxgate(work, *EXPLAIN, "--json", "--max-rows", "-2"), "explain",
                          USAGE, "--max-rows")


# ---- explain: inputs that do not fit the buffers ------------------------------------------


def test_explain_empty_input_is_an_error_not_given(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--input", "x_empty.npy")
    assert_one_line_error(proc, "explain", USAGE, "input", "(0, 64)")
    assert "given" not in proc.stdout and "matches" not in proc.stdout


def test_explain_unknown_profile_names(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--input", "x.npy", "--profiles", "gfx950,nope")
    line = assert_one_line_error(proc, "explain", USAGE, "profiles", "'nope'")
    assert all(name in line for name in oracle.profiles.names())  # the valid names are listed
    proc = mxgate(work, *EXPLAIN, "--profile", "nope")
    assert_one_line_error(proc, "explain", USAGE, "profile", "'nope'")


def test_explain_profiles_without_input(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--profiles", "gfx950")
    assert_one_line_error(proc, "explain", USAGE, "profiles", "input")


# ---- explain: a scale difference is a difference ------------------------------------------


def test_explain_differing_scale_byte_exits_1(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--scales", "s.npy", "--actual-scales", "s_shifted.npy")
    assert proc.returncode == DIFFER, proc.stderr
    assert proc.stderr == ""
    assert "expected == actual" not in proc.stdout
    assert "1 differ" in proc.stdout
    counts = [line.split() for line in proc.stdout.splitlines()
              if line.strip().startswith("scale_off_by_one")]
    assert counts[0][:2] == ["scale_off_by_one", "1"]
    row = [line for line in proc.stdout.splitlines() if "scales" in line and "row 2, group 1" in line]
    assert row, proc.stdout


def test_explain_same_scales_on_both_sides_exit_0(work: Path) -> None:
    proc = mxgate(work, *EXPLAIN, "--scales", "s.npy", "--actual-scales", "s.npy")
    assert proc.returncode == 0 and "expected == actual" in proc.stdout, proc.stderr


# ---- explain: statuses are the command's own, also through python -m ----------------------


def test_explain_module_entry_point_has_the_same_contract(work: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mxgate.cli.explain_cmd", "empty.npy", "p.npy",
                           "--layout", "packed-row"], cwd=work, env=_env(), text=True,
                          capture_output=True, timeout=300)
    assert_one_line_error(proc, "explain", USAGE, "empty.npy")


def test_explain_internal_error_is_3_never_1(monkeypatch, capsys, work: Path) -> None:
    """1 means "the buffers differ": a bug inside explain must not read as that."""
    import mxgate.explain
    from mxgate.cli import main

    def broken(**kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(mxgate.explain, "explain", broken)
    monkeypatch.chdir(work)
    assert main(list(EXPLAIN)) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("mxgate explain: internal error")


# ---- sweep and bench ----------------------------------------------------------------------


@pytest.mark.parametrize("chunks", ["-1", "0", "257"])
def test_sweep_chunks_outside_range(work: Path, chunks: str) -> None:
    proc = mxgate(work, "sweep", "e2m1", "--chunks", chunks, "--quiet")
    assert_one_line_error(proc, "sweep", USAGE, "--chunks", chunks)
    assert proc.stdout == ""


def test_sweep_against_ml_dtypes_without_it(work: Path) -> None:
    proc = mxgate(work, "sweep", "e2m1", "--against", "ml_dtypes", "--chunks", "1", "--quiet",
                  hide=("ml_dtypes",))
    assert_one_line_error(proc, "sweep", USAGE, "ml_dtypes", "pip install ml_dtypes")
    assert proc.stdout == ""


def test_sweep_on_a_device_without_torch(work: Path) -> None:
    # checked before any work, though this process no longer imports torch (its worker would)
    proc = mxgate(work, "sweep", "e2m1", "--device", "cpu", "--backend", "ml_dtypes", "--chunks", "1", "--quiet",
                  hide=("torch",))
    assert_one_line_error(proc, "sweep", USAGE, "torch", "pip install torch")
    assert proc.stdout == ""


def test_sweep_on_a_device_with_a_broken_torch(work: Path) -> None:
    # installed but failing to import: the twin's sweep meets it in the backend's worker, and it
    # is the installation's usage error (status 2), not a fail of the backend (status 1)
    broken = work / "_broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('planted: a broken torch')\n")
    env = dict(_env(), PYTHONPATH=str(broken.parent))
    proc = subprocess.run([MXGATE, "sweep", "e2m1", "--device", "cpu", "--backend", "ml_dtypes", "--chunk-bits", "16",
                           "--chunks", "1", "--quiet"], cwd=work, env=env, text=True, capture_output=True, timeout=300)
    assert_one_line_error(proc, "sweep", USAGE, "torch", "planted: a broken torch", "pip install torch")
    assert proc.stdout == ""


def test_sweep_exact_table_runs_without_ml_dtypes(work: Path) -> None:
    # the hiding itself is sound: the rest of mxgate does not need the package
    proc = mxgate(work, "sweep", "e2m1", "--chunks", "1", "--workers", "1", "--quiet",
                  hide=("ml_dtypes",))
    assert proc.returncode == 0 and "0 mismatches" in proc.stdout, proc.stderr


def test_bench_without_ml_dtypes(work: Path) -> None:
    proc = mxgate(work, "bench", "--log2-size", "10", "--repeat", "1", hide=("ml_dtypes",))
    assert_one_line_error(proc, "bench", USAGE, "ml_dtypes", "pip install ml_dtypes")
    assert proc.stdout == ""


def test_bench_bad_sizes(work: Path) -> None:
    assert_one_line_error(mxgate(work, "bench", "--log2-size", "40"), "bench", USAGE, "--log2-size")
    assert_one_line_error(mxgate(work, "bench", "--repeat", "0"), "bench", USAGE, "--repeat")


# ---- profiles and vectors -----------------------------------------------------------------


def test_profiles_unknown_name(work: Path) -> None:
    proc = mxgate(work, "profiles", "nope")
    assert_one_line_error(proc, "profiles", USAGE, "'nope'", "gfx950")


def test_vectors_folders_that_are_not_folders(work: Path) -> None:
    proc = mxgate(work, "vectors", "verify", "--dir", "missing")
    assert_one_line_error(proc, "vectors", USAGE, "--dir", "no such folder")
    proc = mxgate(work, "vectors", "regen", "--check", "--out", "p.npy")
    assert_one_line_error(proc, "vectors", USAGE, "--out", "not a folder")
    assert proc.stdout == ""
    proc = subprocess.run([sys.executable, "-m", "mxgate.cli.vectors_cmd", "verify", "--dir", "missing"],
                          cwd=work, env=_env(), text=True, capture_output=True, timeout=300)
    assert_one_line_error(proc, "vectors", USAGE, "--dir")


# ---- closed pipes -------------------------------------------------------------------------


def test_profiles_head_1(work: Path) -> None:
    """``mxgate profiles | head -1``: read one line, close the pipe. Whether the command had
    written everything before the close (0) or hit the closed pipe (141) is a race; a
    traceback or another status is not."""
    for argv in (("profiles",), ("profiles", "--json")):
        proc = subprocess.Popen([MXGATE, *argv], cwd=work, env=_env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        status = proc.wait(timeout=300)
        assert first.strip(), argv
        assert status in (0, CLOSED_PIPE), (argv, status, err)
        assert err == "", (argv, err)


@pytest.mark.parametrize("argv", [("profiles",), ("profiles", "argmin"), ("profiles", "--json"),
                                  EXPLAIN,
                                  ("sweep", "e2m1", "--chunks", "1", "--workers", "1", "--quiet"), ("--version",)])
def test_pipe_closed_before_any_output(work: Path, argv: tuple[str, ...]) -> None:
    """The reader is gone before the first write: always the closed-pipe path, 141, silent.
    Small outputs (``profiles argmin``) sit in the buffer until exit: still 141."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([MXGATE, *argv], cwd=work, env=_env(), text=True,
                              stdout=write_end, stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == CLOSED_PIPE, (proc.returncode, proc.stderr)
    assert proc.stderr == ""


# ---- documented statuses ------------------------------------------------------------------

DOCUMENTED = {
    "explain": ("0", "1", "2", "3", "141"),
    "sweep": ("0", "1", "2", "3", "5", "141"),
    "bench": ("0", "2", "3", "141"),
    "profiles": ("0", "2", "3", "141"),
    "vectors": ("0", "1", "2", "3", "141"),
}


@pytest.mark.parametrize("command", sorted(DOCUMENTED))
def test_help_documents_exit_statuses(work: Path, command: str) -> None:
    proc = mxgate(work, command, "--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.split("exit status:", 1)
    assert len(text) == 2, proc.stdout
    listed = [line.split()[0] for line in text[1].splitlines()
              if line.startswith("  ") and line.split() and line.split()[0].isdigit()]
    assert tuple(listed) == DOCUMENTED[command]


def test_explain_doc_lists_the_statuses() -> None:
    text = EXPLAIN_DOC.read_text()
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    for status in DOCUMENTED["explain"]:
        assert f"**{status}**" in section, status
