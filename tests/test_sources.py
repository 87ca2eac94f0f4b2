"""The source-backend mechanism (mxgate.kernels.sources) on a tiny fake project written into
tmp_path: a package whose __init__ raises (so loading proves it never runs), a stub the files
import, a relative import between two shipped files, revisions from git, the _REV variable
and the revision file, and the installed route through a dist-info folder on sys.path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mxgate.kernels import sources

PACKAGE = "mxgatefakeproj"
ENV = "MXGATE_FAKEPROJ_SRC"


def _stubs(context: sources.StubContext) -> dict:
    return {f"{PACKAGE}.platform": sources.stub_module(f"{PACKAGE}.platform", device=lambda: context.device,
                                                       mode=context.mode)}


SPEC = sources.ProjectSpec(
    project="FakeProj",
    package=PACKAGE,
    distribution=PACKAGE,
    env_var=ENV,
    modules={"base": f"{PACKAGE}.ops.base", "kern": f"{PACKAGE}.ops.kern", "extra": f"{PACKAGE}.ops.extra"},
    required=("base", "kern"),
    stubs=_stubs,
    hint="a FakeProj checkout",
)


def write_project(root: Path, *, with_extra: bool = False) -> Path:
    pkg = root / PACKAGE
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the package __init__ must not run')\n")
    (pkg / "ops" / "__init__.py").write_text("raise RuntimeError('the subpackage __init__ must not run')\n")
    (pkg / "ops" / "base.py").write_text("def twice(x):\n    return 2 * x\n")
    (pkg / "ops" / "kern.py").write_text(
        f"from {PACKAGE}.platform import device\n"
        "from .base import twice\n\n"
        "def run(x):\n    return twice(x), device()\n\n"
        "if True:\n    def branch():\n        return 1\n"
    )
    if with_extra:
        (pkg / "ops" / "extra.py").write_text("from mxgatefakeproj.missing import nothing\n")
    return root


def _no_package_left() -> bool:
    return not any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in sys.modules)


@pytest.fixture(autouse=True)
def _fresh_cache():
    sources.clear_cache()
    yield
    sources.clear_cache()


def test_unavailable_without_source_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    reason = sources.problem(SPEC, environ={})
    assert reason is not None
    assert f"set {ENV} to a FakeProj checkout" in reason


def test_variable_naming_a_missing_folder_or_files(tmp_path) -> None:
    assert ENV in sources.problem(SPEC, environ={ENV: str(tmp_path / "nope")})
    (tmp_path / PACKAGE / "ops").mkdir(parents=True)
    reason = sources.problem(SPEC, environ={ENV: str(tmp_path)})
    assert f"{PACKAGE}/ops/base.py" in reason and ENV in reason


def test_load_executes_files_without_package_init_and_restores_sys_modules(tmp_path) -> None:
    root = write_project(tmp_path / "plain")
    before = dict(sys.modules)
    source = sources.locate(SPEC, environ={ENV: str(root), "MXGATE_FAKEPROJ_REV": "abc123"})
    loaded = sources.load(source, sources.StubContext("interpret", "cpu"), import_first=())
    assert loaded.module("kern").run(21) == (42, "cpu")
    assert _no_package_left()
    assert set(sys.modules) - set(before) <= {n for n in sys.modules if not n.startswith(PACKAGE)}
    assert source.origin == f"checkout ${ENV} at abc123 (from MXGATE_FAKEPROJ_REV)"
    assert str(tmp_path) not in source.origin  # no machine paths in what results record


def test_load_keeps_a_previous_module_of_the_same_name(tmp_path) -> None:
    root = write_project(tmp_path / "p")
    sentinel = sources.stub_module(PACKAGE, "the user's own module of that name")
    sys.modules[PACKAGE] = sentinel
    try:
        source = sources.locate(SPEC, environ={ENV: str(root)})
        sources.load(source, sources.StubContext("interpret", "cpu"), import_first=())
        assert sys.modules[PACKAGE] is sentinel
    finally:
        del sys.modules[PACKAGE]


def test_an_import_the_stubs_do_not_cover_is_named(tmp_path) -> None:
    root = write_project(tmp_path / "p", with_extra=True)
    source = sources.locate(SPEC, environ={ENV: str(root)})
    with pytest.raises(sources.SourceError, match="missing"):
        sources.load(source, sources.StubContext("interpret", "cpu"), import_first=())
    assert _no_package_left()


def test_optional_module_skipped_when_absent_and_names_read_without_executing(tmp_path) -> None:
    root = write_project(tmp_path / "p")
    source = sources.locate(SPEC, environ={ENV: str(root)})
    assert not source.has("extra")
    assert source.defines("kern") == {"run", "branch"}
    assert source.defines("extra") == frozenset()
    loaded = sources.load(source, sources.StubContext("interpret", "cpu"), import_first=())
    assert set(loaded.modules) == {"base", "kern"}
    with pytest.raises(sources.SourceError, match="extra.py"):
        loaded.module("extra")


def test_stub_outside_the_package_is_refused(tmp_path) -> None:
    root = write_project(tmp_path / "p")
    spec = sources.ProjectSpec(**{**SPEC.__dict__, "stubs": lambda c: {"numpy.fake": sources.stub_module("numpy.fake")}})
    source = sources.locate(spec, environ={ENV: str(root)})
    with pytest.raises(sources.SourceError, match="must live under"):
        sources.load(source, sources.StubContext("interpret", "cpu"), import_first=())


def test_revision_file_and_unrecorded_revision(tmp_path) -> None:
    root = write_project(tmp_path / "p")
    source = sources.locate(SPEC, environ={ENV: str(root)})
    assert source.revision is None and "unrecorded revision" in source.origin
    assert "MXGATE_FAKEPROJ_REV" in source.origin
    (root / sources.REVISION_FILE).write_text("f0b08643d\n")
    source = sources.locate(SPEC, environ={ENV: str(root)})
    assert source.origin == f"checkout ${ENV} at f0b08643d (from {sources.REVISION_FILE})"


git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@git
def test_git_work_tree_gives_its_commit_and_flags_local_changes(tmp_path) -> None:
    root = write_project(tmp_path / "repo")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "x")
    head = _git(root, "rev-parse", "HEAD")
    source = sources.locate(SPEC, environ={ENV: str(root), "MXGATE_FAKEPROJ_REV": "ignored"})
    assert source.revision == head and source.origin == f"checkout ${ENV} at {head}"
    (root / PACKAGE / "ops" / "base.py").write_text("def twice(x):\n    return x + x\n")
    assert sources.locate(SPEC, environ={ENV: str(root)}).revision == head + "+modified"


@git
def test_plain_tree_inside_another_repository_is_not_given_its_commit(tmp_path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    _git(outer, "init", "-q")
    (outer / "README").write_text("x")
    _git(outer, "add", ".")
    _git(outer, "commit", "-q", "-m", "x")
    root = write_project(outer / ".src" / "fake")
    source = sources.locate(SPEC, environ={ENV: str(root)})
    assert source.revision is None


def test_installed_route_reports_the_version(tmp_path, monkeypatch) -> None:
    site = tmp_path / "site"
    write_project(site)
    info = site / f"{PACKAGE}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.2.3\n")
    monkeypatch.syspath_prepend(str(site))
    source = sources.locate(SPEC, environ={})
    assert source.kind == "installed" and source.origin == f"installed {PACKAGE} 1.2.3"
    loaded = sources.load(source, sources.StubContext("compiled", "cuda"), import_first=())
    assert loaded.module("kern").run(1) == (2, "cuda")
    assert _no_package_left()


def test_env_scope_restores_triton_interpret(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with sources.env_scope("interpret"):
        assert os.environ["TRITON_INTERPRET"] == "1"
    assert os.environ["TRITON_INTERPRET"] == "0"
    with sources.env_scope("compiled"):
        assert "TRITON_INTERPRET" not in os.environ
    assert os.environ["TRITON_INTERPRET"] == "0"
    with pytest.raises(ValueError, match="mode"):
        with sources.env_scope("gpu"):  # type: ignore[arg-type]
            pass


def test_environ_scope_sets_and_removes(monkeypatch) -> None:
    monkeypatch.setenv("MXGATE_T1", "a")
    monkeypatch.delenv("MXGATE_T2", raising=False)
    with sources.environ_scope({"MXGATE_T1": None, "MXGATE_T2": "b"}):
        assert "MXGATE_T1" not in os.environ and os.environ["MXGATE_T2"] == "b"
    assert os.environ["MXGATE_T1"] == "a" and "MXGATE_T2" not in os.environ


def test_bare_packages_lists_every_parent_once() -> None:
    assert sources.bare_packages(["a.b.c", "a.b.d", "a.e"]) == ["a", "a.b"]
