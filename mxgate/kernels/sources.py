"""Source backends: run an outside project's kernel files from where the user has that project.

A *source backend* tests kernels of another project (vLLM, AITER, ...) without copying any of
its code here and without running its package ``__init__`` (which usually imports the whole
serving stack). The project is found, in this order:

1. a checkout whose root (the folder holding the package folder, e.g. ``vllm/``) is named by an
   environment variable such as ``MXGATE_VLLM_SRC``;
2. the installed distribution (``importlib.util.find_spec`` of the package, which does not
   import it), when it holds the kernel files.

Every source records what it is (``Source.origin``), which every result carries:
``checkout $MXGATE_VLLM_SRC at <commit>`` or ``installed vllm <version>``. The revision of a
checkout comes from git when the root is the top of a git work tree (``+modified`` is added
when tracked files of the package differ from that commit); for a plain tree (an exported
archive) from the environment variable ``<PREFIX>_REV`` (e.g. ``MXGATE_VLLM_REV``), else from
a one-line file ``.mxgate-revision`` at the root; else the origin says the revision is not
recorded. A plain tree inside some other git repository is never given that repository's commit.

Loading (``load``) registers bare packages (no ``__init__`` runs, empty search path) and the
project's stubs under the project's own module names, executes the listed files directly in
dependency order, then restores ``sys.modules`` exactly; the loaded modules stay reachable
through the returned ``Loaded`` (their functions keep their own globals). An import the stubs do
not cover fails with the module named instead of pulling in the project's stack.

Triton fixes interpreter vs compiled when ``triton`` is first imported in a process (its own
standard library is decorated then), so the CPU interpreter needs ``TRITON_INTERPRET=1`` before
that first import; ``env_scope`` sets it for the import and around every kernel launch and puts
the environment back afterwards. A process whose triton started in the other mode cannot switch:
``triton_problem`` says so. Inside ``env_scope``, the interpreter also skips work whose result
nothing reads (``triton_interpreter.speed_up``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Literal, Mapping

from mxgate.kernels import triton_interpreter
from mxgate.kernels.base import Mode  # re-exported: the loaders' mode type
from mxgate.kernels.quiet import foreign_imports

MODES: tuple[str, ...] = ("interpret", "compiled")
Kind = Literal["checkout", "installed"]

REVISION_FILE = ".mxgate-revision"
MIN_TRITON_INTERPRET = (3, 9)  # the interpreter's dot_scaled support starts here
GIT_TIMEOUT_S = 20

_LOCK = threading.RLock()
_CACHE: dict[tuple[object, ...], "Loaded"] = {}


class SourceError(RuntimeError):
    """The project's kernels cannot be found or loaded here; the message says why."""


@dataclass(frozen=True)
class StubContext:
    """What a stub builder may depend on: the triton mode and the device facts it was given."""

    mode: Mode
    device: str
    options: Mapping[str, object] = field(default_factory=dict)


StubBuilder = Callable[[StubContext], dict[str, types.ModuleType]]


@dataclass(frozen=True)
class ProjectSpec:
    """Where one outside project's kernel files are and what they need to load standalone.

    package:   top-level import name and the folder name inside a checkout ("vllm").
    env_var:   names a checkout root ("MXGATE_VLLM_SRC"); ``<env_var minus _SRC>_REV`` names its
               revision for plain trees ("MXGATE_VLLM_REV").
    modules:   short name -> dotted module name, executed in this order; the file is the
               module path under the root (``vllm/v1/.../x.py``).
    required:  short names that must exist (the others load when present).
    stubs:     builds the stub modules (name -> module) for one StubContext.
    hint:      what to point env_var at, for the unavailability reason.
    """

    project: str
    package: str
    distribution: str
    env_var: str
    modules: Mapping[str, str]
    required: tuple[str, ...]
    stubs: StubBuilder
    hint: str

    @property
    def rev_env_var(self) -> str:
        base = self.env_var[: -len("_SRC")] if self.env_var.endswith("_SRC") else self.env_var
        return f"{base}_REV"

    def relpath(self, short: str) -> str:
        """Path of one module's file relative to the root, with '/' separators."""
        return self.modules[short].replace(".", "/") + ".py"

    def not_found(self, detail: str = "") -> str:
        """The unavailability reason: names the variable to set."""
        tail = f" ({detail})" if detail else ""
        return f"no {self.project} source: set {self.env_var} to {self.hint}{tail}"


@dataclass(frozen=True)
class Source:
    """One place a project's files were found."""

    spec: ProjectSpec
    kind: Kind
    root: Path
    revision: str | None  # commit (git), the declared revision (plain tree), or the version
    revision_from: str  # "git", the env var name, REVISION_FILE, "metadata" or "none"

    @property
    def origin(self) -> str:
        """What ran, for every result: no machine paths, the variable's name instead."""
        if self.kind == "installed":
            return f"installed {self.spec.distribution} {self.revision or '(version unknown)'}"
        where = f"checkout ${self.spec.env_var}"
        if self.revision is None:
            return (f"{where} at an unrecorded revision (not a git work tree; set "
                    f"{self.spec.rev_env_var} or write {REVISION_FILE})")
        how = "" if self.revision_from == "git" else f" (from {self.revision_from})"
        return f"{where} at {self.revision}{how}"

    def path(self, short: str) -> Path:
        return self.root / self.spec.relpath(short)

    def has(self, short: str) -> bool:
        return self.path(short).is_file()

    def defines(self, short: str) -> frozenset[str]:
        """Top-level function and class names of one module, read without executing it."""
        return top_level_names(self.path(short))


# ---- finding a source ------------------------------------------------------------------------


def locate(spec: ProjectSpec, environ: Mapping[str, str] | None = None) -> Source:
    """The checkout named by ``spec.env_var``, else the installed package; SourceError with
    the reason (naming the variable) when neither holds the required files."""
    env = os.environ if environ is None else environ
    named = env.get(spec.env_var, "").strip()
    if named:
        root = Path(named).expanduser()
        if not root.is_dir():
            raise SourceError(f"{spec.env_var} names no directory; set it to {spec.hint}")
        _require_files(spec, root, f"{spec.env_var} is not such a checkout")
        revision, how = checkout_revision(root.resolve(), spec, env)
        return Source(spec, "checkout", root.resolve(), revision, how)
    root = installed_root(spec.package)
    if root is None:
        raise SourceError(spec.not_found(f"python package {spec.package!r} is not installed either"))
    version = distribution_version(spec.distribution)
    label = f"installed {spec.distribution} {version or '(version unknown)'}"
    _require_files(spec, root, f"{label} lacks the kernel files")
    return Source(spec, "installed", root, version, "metadata")


def problem(spec: ProjectSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``locate`` would fail, or None."""
    try:
        locate(spec, environ)
    except SourceError as error:
        return str(error)
    return None


def _require_files(spec: ProjectSpec, root: Path, what: str) -> None:
    missing = [spec.relpath(s) for s in spec.required if not (root / spec.relpath(s)).is_file()]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise SourceError(f"{what}: missing {shown}; set {spec.env_var} to {spec.hint}")


def installed_root(package: str) -> Path | None:
    """The folder holding the installed package's folder, found without importing it."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0]).resolve().parent


def distribution_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def checkout_revision(root: Path, spec: ProjectSpec,
                      environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """(revision, where it came from) of a checkout root: git, else the _REV variable, else
    the revision file, else (None, "none")."""
    env = os.environ if environ is None else environ
    commit = git_commit(root, spec.package)
    if commit is not None:
        return commit, "git"
    declared = env.get(spec.rev_env_var, "").strip()
    if declared:
        return declared, spec.rev_env_var
    marker = root / REVISION_FILE
    if marker.is_file():
        text = marker.read_text(encoding="utf-8").strip().splitlines()
        if text and text[0].strip():
            return text[0].strip(), REVISION_FILE
    return None, "none"


def git_commit(root: Path, package: str | None = None) -> str | None:
    """HEAD of the git work tree whose top is ``root`` (None when root is not such a top,
    e.g. a plain tree inside another repository); '+modified' when tracked files under
    ``package`` differ from it."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root.resolve():
        return None
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return None
    args = ["status", "--porcelain", "--untracked-files=no"] + (["--", package] if package else [])
    dirty = _git(root, *args)
    return head + ("+modified" if dirty else "")


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def top_level_names(path: Path) -> frozenset[str]:
    """Names of the functions and classes a Python file defines at top level (also inside
    top-level ``if`` blocks), parsed, never executed; empty when the file is absent."""
    if not path.is_file():
        return frozenset()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.If):
            pending.extend(node.body + node.orelse)
    return frozenset(names)


# ---- triton mode -----------------------------------------------------------------------------


def check_mode(mode: object) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")


def triton_version() -> tuple[int, int] | None:
    """(major, minor) of the installed triton, read without importing it."""
    text = distribution_version("triton")
    if text is None:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return None


def triton_mode() -> Mode | None:
    """The mode this process's triton was imported in, or None when it is not imported yet."""
    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return None
    probe = getattr(standard, "_elementwise_max", None)
    interp = sys.modules.get("triton.runtime.interpreter")
    if interp is not None and isinstance(probe, getattr(interp, "InterpretedFunction", ())):
        return "interpret"
    return "compiled"


def triton_problem(mode: Mode) -> str | None:
    """Why triton cannot run kernels in ``mode`` in this process (None when it can)."""
    check_mode(mode)
    for module in ("torch", "triton"):
        if importlib.util.find_spec(module) is None:
            return f"python package {module!r} is not installed"
    if mode == "interpret":
        version = triton_version()
        if version is None or version < MIN_TRITON_INTERPRET:
            shown = ".".join(map(str, version)) if version else "?"
            need = ".".join(map(str, MIN_TRITON_INTERPRET))
            return f"triton {shown} is installed; the CPU interpreter path needs triton >= {need}"
    current = triton_mode()
    if current is not None and current != mode:
        if mode == "interpret":
            return ("triton was imported in this process without TRITON_INTERPRET=1, and a process "
                    "cannot switch it to the CPU interpreter: set TRITON_INTERPRET=1 in the "
                    "environment before anything imports triton")
        return ("triton was imported in this process with TRITON_INTERPRET=1 (CPU interpreter); "
                "compiled kernels need a process started without it")
    return None


@contextlib.contextmanager
def env_scope(mode: Mode) -> Iterator[None]:
    """TRITON_INTERPRET as ``mode`` needs it (``1`` or unset) inside, the old value after."""
    check_mode(mode)
    if mode == "interpret":
        triton_interpreter.speed_up()
    with _LOCK:
        old = os.environ.get("TRITON_INTERPRET")
        if mode == "interpret":
            os.environ["TRITON_INTERPRET"] = "1"
        else:
            os.environ.pop("TRITON_INTERPRET", None)
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old


@contextlib.contextmanager
def environ_scope(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, remove) environment variables inside, restore them after."""
    with _LOCK:
        saved = {name: os.environ.get(name) for name in values}
        try:
            _set_environ(values)
            yield
        finally:
            _set_environ(saved)


def _set_environ(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# ---- loading ---------------------------------------------------------------------------------


@dataclass
class Loaded:
    """The executed modules of one source in one mode."""

    source: Source
    mode: Mode
    modules: dict[str, types.ModuleType]
    stubs: dict[str, types.ModuleType]

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Wrap every kernel launch: triton reads TRITON_INTERPRET again while it runs."""
        with env_scope(self.mode):
            yield

    def module(self, short: str) -> types.ModuleType:
        if short not in self.modules:
            raise SourceError(f"{self.source.origin} has no {self.source.spec.relpath(short)}")
        return self.modules[short]

    @property
    def origin(self) -> str:
        return self.source.origin


def bare_packages(module_names: list[str]) -> list[str]:
    """Every parent package of the given dotted names, outermost first."""
    parents: dict[str, None] = {}
    for name in module_names:
        parts = name.split(".")
        for i in range(1, len(parts)):
            parents[".".join(parts[:i])] = None
    return list(parents)


def stub_module(name: str, doc: str = "stub registered by mxgate", **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(attrs)
    return module


def load(source: Source, context: StubContext, *, import_first: tuple[str, ...] = ("torch", "triton", "triton.language"),
         cache_key: tuple[object, ...] = ()) -> Loaded:
    """Execute the source's modules (once per process, source, mode and cache_key).

    ``import_first`` are real packages imported inside the mode's environment before anything
    runs (so triton starts in the right mode). Raises SourceError with the reason.
    """
    check_mode(context.mode)
    key = (source.spec.package, str(source.root), source.revision, context.mode, context.device, cache_key)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if import_first and "triton" in import_first:
            reason = triton_problem(context.mode)
            if reason is not None:
                raise SourceError(reason)
        with env_scope(context.mode), foreign_imports():  # the other project's import-time notes
            for name in import_first:
                importlib.import_module(name)
            if "triton" in import_first and triton_mode() != context.mode:
                raise SourceError(triton_problem(context.mode) or f"triton did not start in {context.mode} mode")
            stubs = source.spec.stubs(context)
            modules = _exec_modules(source, stubs)
        loaded = Loaded(source, context.mode, modules, stubs)
        _CACHE[key] = loaded
        return loaded


def _exec_modules(source: Source, stubs: dict[str, types.ModuleType]) -> dict[str, types.ModuleType]:
    spec = source.spec
    prefix = spec.package
    wanted = [s for s in spec.modules if s in spec.required or source.has(s)]
    ours: dict[str, types.ModuleType] = {}
    for name in bare_packages([spec.modules[s] for s in wanted] + list(stubs)):
        if name not in stubs:
            package = types.ModuleType(name, "bare package registered by mxgate (its __init__ is not run)")
            package.__path__ = []  # type: ignore[attr-defined]
            ours[name] = package
    outside = sorted(n for n in stubs if n.split(".")[0] != prefix)
    if outside:  # replacing a real package (triton, torch) for the exec would re-import it
        raise SourceError(f"stubs must live under {prefix!r}; got {', '.join(outside)}")
    ours.update(stubs)

    def mine(name: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    saved = {n: sys.modules.pop(n) for n in [n for n in sys.modules if mine(n)]}
    try:
        sys.modules.update(ours)
        loaded: dict[str, types.ModuleType] = {}
        for short in wanted:
            name = spec.modules[short]
            path = source.path(short)
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise SourceError(f"cannot build an import spec for {spec.relpath(short)}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            parent, _, leaf = name.rpartition(".")
            try:
                module_spec.loader.exec_module(module)
            except ImportError as exc:
                raise SourceError(f"{spec.relpath(short)} ({source.origin}) imports a name mxgate's "
                                  f"{spec.project} stubs do not provide: {exc}") from exc
            if parent in sys.modules:
                setattr(sys.modules[parent], leaf, module)
            loaded[short] = module
        return loaded
    finally:
        for name in [n for n in sys.modules if mine(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def clear_cache() -> None:
    """Forget every loaded source (tests; a new checkout in the same process)."""
    with _LOCK:
        _CACHE.clear()
