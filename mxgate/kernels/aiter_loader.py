"""Where AITER's Triton kernels and Python references come from, and the stubs that load them.

AITER's package ``__init__`` JIT-builds its HIP extensions, so it never runs here: the kernel
files are executed directly (mxgate.kernels.sources) with these stubs in place of the parts of
AITER that need a ROCm build or ask the GPU driver:

* ``aiter.ops.triton.utils._triton.arch_info``: ``get_arch()`` answers the configured target
  (default ``gfx950``; ``gfx942`` gives the FNUZ FP8 dtype), where upstream asks the driver.
* ``aiter.jit.utils.chip_info``: ``get_gfx()`` answers ``gfx90a``, a target outside AITER's
  Gluon list (gfx942, gfx950, gfx1250): ``pa_mqa_logits`` then takes its Triton JIT kernel, as
  AITER does on such a target (the Gluon kernels are AMD-only); ``get_cu_num()`` the
  configured compute-unit count.
* ``aiter.jit.core``: ``compile_ops`` registers a function that raises when called (no HIP
  build here); ``get_module`` raises.
* ``aiter.utility.dtypes`` and the top-level ``aiter`` package: AITER's dtype table
  (``fp8`` is e4m3fn for gfx950, e4m3fnuz for gfx942) and the few attributes the files read.

AITER's ``op_tests/*.py`` files are scripts: importing them runs their benchmarks (module-level
argparse, ``torch.set_default_device("cuda")``). ``extract`` executes only the named functions
of such a file and the module-level definitions and imports they depend on, unchanged, with the
file's own name in tracebacks; module constants may be given new values (the device string).

On NVIDIA, AITER's launchers pass AMD-only launch options (``waves_per_eu``,
``matrix_instr_nonkdim``) that Triton's CUDA backend rejects: ``strip_amd_launch_options``
wraps the kernels a loaded wrapper module calls so those two keywords are dropped there and
nothing else changes. AITER's files are never edited.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from mxgate.kernels import sources

ENV_VAR = "MXGATE_AITER_SRC"
ARCHS = ("gfx950", "gfx942")
GLUON_FREE_GFX = "gfx90a"  # not in AITER's _GLUON_PA_MQA_LOGITS_ARCHS
AMD_LAUNCH_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim")
HINT = "a ROCm/aiter checkout (the folder holding aiter/ and op_tests/)"

# Files of the Triton backend, executed in this order (dependencies first).
TRITON_MODULES = {
    "logger": "aiter.ops.triton.utils.logger",
    "types": "aiter.ops.triton.utils.types",
    "core": "aiter.ops.triton.utils.core",
    "device_info": "aiter.ops.triton.utils.device_info",
    "metadata_redirect": "aiter.utility.triton.triton_metadata_redirect",
    "quant_kernels": "aiter.ops.triton._triton_kernels.quant.quant",
    "fp8_quant_kernels": "aiter.ops.triton._triton_kernels.quant.fused_fp8_quant",
    "activation_kernels": "aiter.ops.triton._triton_kernels.activation",
    "fused_mxfp4_kernels": "aiter.ops.triton._triton_kernels.quant.fused_mxfp4_quant",
    "gluon_fused_mxfp4": "aiter.ops.triton._gluon_kernels.gfx1250.quant.fused_mxfp4_quant",
    "quant": "aiter.ops.triton.quant.quant",
    "fused_mxfp4_quant": "aiter.ops.triton.quant.fused_mxfp4_quant",
    "fp8_mqa_kernels": "aiter.ops.triton._triton_kernels.attention.fp8_mqa_logits",
    "fp8_mqa_logits": "aiter.ops.triton.attention.fp8_mqa_logits",
    "pa_mqa_kernels": "aiter.ops.triton._triton_kernels.attention.pa_mqa_logits",
    "pa_decode_gluon": "aiter.ops.triton.gluon.pa_decode_gluon",
    "gluon_pa_mqa": "aiter.ops.triton.gluon.pa_mqa_logits",
    "pa_mqa_logits": "aiter.ops.triton.attention.pa_mqa_logits",
}
# The Python references: fp4_utils (a Triton file too) and what it imports.
REFERENCE_MODULES = {
    "mx_types": "aiter.utility.mx_types",
    "fp4_utils": "aiter.utility.fp4_utils",
}
OP_TESTS = {
    "quant_mxfp4": "op_tests/test_quant_mxfp4.py",
    "flydsl_fp4": "op_tests/test_flydsl_pa_mqa_logits_fp4.py",
    "flydsl_fp4_prefill": "op_tests/test_flydsl_pa_mqa_logits_fp4_prefill.py",
    "dsv4_rotate_quant": "op_tests/test_dsv4_rotate_quant.py",
    "indexer_k": "op_tests/test_indexer_k_quant_and_cache.py",
}
OPS_QUANT = "aiter/ops/quant.py"  # pertoken_quant, which an op test imports from aiter


class NoHipBuild(RuntimeError):
    """An AITER function that needs its JIT-built HIP extension was called."""


def _compile_ops(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        def unavailable(*_a: Any, **_k: Any) -> Any:
            raise NoHipBuild(f"{function.__name__} needs AITER's JIT-built HIP module {args[0] if args else '?'}; "
                             "mxgate runs AITER's Triton and Python code only")

        unavailable.__name__ = function.__name__
        unavailable.__wrapped__ = function  # type: ignore[attr-defined]
        return unavailable

    return wrap


def _get_module(name: str) -> Any:
    raise NoHipBuild(f"AITER's JIT module {name} is not built here")


def dtypes_module(arch: str) -> types.ModuleType:
    """AITER's ``aiter.utility.dtypes`` table for one target (defaultDtypes there)."""
    import torch

    fallback = torch.uint8
    return sources.stub_module(
        "aiter.utility.dtypes", "stub registered by mxgate's AITER loader: AITER's dtype table",
        fp8=torch.float8_e4m3fnuz if arch == "gfx942" else torch.float8_e4m3fn,
        fp4x2=getattr(torch, "float4_e2m1fn_x2", fallback), fp8_e8m0=getattr(torch, "float8_e8m0fnu", fallback),
        i4x2=getattr(torch, "int4", fallback), fp16=torch.float16, bf16=torch.bfloat16, fp32=torch.float32,
        u32=torch.uint32, i32=torch.int32, i16=torch.int16, i8=torch.int8, u8=torch.uint8, i64=torch.int64,
        u64=torch.uint64,
    )


def _stubs(context: sources.StubContext) -> dict[str, types.ModuleType]:
    arch = str(context.options.get("arch", "gfx950"))
    units = int(context.options.get("compute_units", 1))  # type: ignore[call-overload]
    doc = "stub registered by mxgate's AITER loader"
    dtypes = dtypes_module(arch)
    arch_info = sources.stub_module(
        "aiter.ops.triton.utils._triton.arch_info", doc, get_arch=lambda: arch,
        is_gluon_avail=lambda: False, is_fp4_avail=lambda: arch == "gfx950",
        is_fp8_avail=lambda: True, is_mx_scale_preshuffling_avail=lambda: False, is_tdm_avail=lambda: False,
    )
    chip_info = sources.stub_module(
        "aiter.jit.utils.chip_info", doc, get_gfx=lambda: GLUON_FREE_GFX, get_gfx_runtime=lambda: arch,
        get_cu_num=lambda: units,
    )
    jit_core = sources.stub_module("aiter.jit.core", doc, compile_ops=_compile_ops, get_module=_get_module)
    top = sources.stub_module("aiter", doc, dtypes=dtypes, logger=logging.getLogger("aiter"))
    top.__path__ = []  # type: ignore[attr-defined]
    return {"aiter": top, "aiter.utility.dtypes": dtypes, "aiter.ops.triton.utils._triton.arch_info": arch_info,
            "aiter.jit.utils.chip_info": chip_info, "aiter.jit.core": jit_core}


def _spec(modules: Mapping[str, str], required: tuple[str, ...]) -> sources.ProjectSpec:
    return sources.ProjectSpec(project="AITER", package="aiter", distribution="amd-aiter", env_var=ENV_VAR,
                               modules=modules, required=required, stubs=_stubs, hint=HINT)


TRITON_SPEC = _spec(TRITON_MODULES, ("quant", "fused_mxfp4_quant", "fp8_mqa_logits", "pa_mqa_logits"))
REFERENCE_SPEC = _spec(REFERENCE_MODULES, ("fp4_utils",))


def locate(spec: sources.ProjectSpec) -> sources.Source:
    return sources.locate(spec)


def load(spec: sources.ProjectSpec, mode: sources.Mode, device: str, *, arch: str = "gfx950",
         compute_units: int = 1) -> sources.Loaded:
    """The spec's files executed once per process, source, mode, target and unit count."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}; got {arch!r}")
    source = locate(spec)
    context = sources.StubContext(mode, device, {"arch": arch, "compute_units": compute_units})
    key = ("files", tuple(spec.modules.values()), "arch", arch, "units", compute_units)
    return sources.load(source, context, cache_key=key)


# ---- op_tests: named functions and their module-level dependencies ----------------------------


def _assigned(node: ast.stmt) -> set[str]:
    names: set[str] = set()
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    for target in targets:
        names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _defined(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        return _assigned(node)
    return set()


def dependency_closure(tree: ast.Module, names: tuple[str, ...]) -> list[ast.stmt]:
    """The top-level statements that define ``names`` and, transitively, every module-level
    name they read (functions, classes, imports, assignments), in file order. Import lists
    keep only the names needed. Statements with no definition (calls, argparse at top level,
    ``if __name__`` blocks) are never taken."""
    definers: dict[str, list[int]] = {}
    for i, node in enumerate(tree.body):
        for name in _defined(node):
            definers.setdefault(name, []).append(i)
    missing = [n for n in names if n not in definers]
    if missing:
        raise sources.SourceError(f"the file defines no top-level {', '.join(missing)}")
    wanted: set[str] = set()
    keep: set[int] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in wanted or name not in definers:
            continue  # a builtin, a local, or an attribute
        wanted.add(name)
        for i in definers[name]:
            keep.add(i)
            node = tree.body[i]
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                pending.extend(_used(node))
    kept: list[ast.stmt] = []
    for i in sorted(keep):
        node = tree.body[i]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            aliases = [a for a in node.names if (a.asname or a.name).split(".")[0] in wanted]
            node = type(node)(**{**{f: getattr(node, f) for f in node._fields}, "names": aliases})
            ast.copy_location(node, tree.body[i])
        kept.append(node)
    return kept


@contextlib.contextmanager
def modules_installed(modules: Mapping[str, types.ModuleType]) -> Iterator[None]:
    """``modules`` in sys.modules inside (AITER's names only); sys.modules exactly as before after."""
    names = [n for n in sys.modules if n == "aiter" or n.startswith("aiter.")]
    saved = {n: sys.modules.pop(n) for n in names}
    try:
        sys.modules.update(modules)
        yield
    finally:
        for n in [n for n in sys.modules if n == "aiter" or n.startswith("aiter.")]:
            del sys.modules[n]
        sys.modules.update(saved)


def extract(path: Path, names: tuple[str, ...], module_name: str, modules: Mapping[str, types.ModuleType],
            overrides: Mapping[str, object] | None = None, *, package: str = "") -> types.ModuleType:
    """Execute the definitions of ``names`` (and their dependencies) from ``path`` as module
    ``module_name`` (``package``: the package its relative imports start from), with
    ``modules`` (AITER's stubs and loaded files) importable meanwhile; then apply
    ``overrides`` to module constants (e.g. ``dev = "cpu"``)."""
    if not path.is_file():
        raise sources.SourceError(f"{path.name} is missing from the AITER checkout")
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    body = dependency_closure(tree, names)
    module = types.ModuleType(module_name, f"definitions of {', '.join(names)} from {path.name}, run by mxgate")
    module.__file__ = str(path)
    module.__package__ = package
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
    with modules_installed(modules):
        try:
            exec(code, module.__dict__)  # noqa: S102 - the user's AITER checkout, as it ships
        except ImportError as error:
            raise sources.SourceError(f"{path.name} imports a name mxgate's AITER stubs do not provide: "
                                      f"{error}") from error
    for key, value in (overrides or {}).items():
        if key not in module.__dict__:
            raise sources.SourceError(f"{path.name} has no module constant {key} to set")
        module.__dict__[key] = value
    return module


def package_modules(loaded: sources.Loaded) -> dict[str, types.ModuleType]:
    """The stub and loaded modules of a source under their AITER names (for ``extract``)."""
    found: dict[str, types.ModuleType] = dict(loaded.stubs)
    for short, module in loaded.modules.items():
        found[loaded.source.spec.modules[short]] = module
    for name in sources.bare_packages(list(found)):
        if name not in found:
            package = types.ModuleType(name, "bare package registered by mxgate (its __init__ is not run)")
            package.__path__ = []  # type: ignore[attr-defined]
            found[name] = package
    for name, module in found.items():  # submodules reachable as attributes of their parents
        parent, _, leaf = name.rpartition(".")
        if parent in found and not hasattr(found[parent], leaf):
            setattr(found[parent], leaf, module)
    return found


# ---- NVIDIA: AMD-only launch options --------------------------------------------------------


class _Launcher:
    """``kernel[grid]`` of a wrapped kernel: the AMD-only keywords removed, the rest passed on."""

    def __init__(self, launch: Callable[..., Any], dropped: list[str]) -> None:
        self._launch, self._dropped = launch, dropped

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for name in AMD_LAUNCH_OPTIONS:
            if name in kwargs:
                kwargs.pop(name)
                self._dropped.append(name)
        return self._launch(*args, **kwargs)


class AmdOptionFilter:
    """Stands in for one Triton kernel inside a wrapper module's globals (NVIDIA only)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.dropped: list[str] = []  # what was removed, for the results

    def __getitem__(self, grid: Any) -> _Launcher:
        return _Launcher(self.kernel[grid], self.dropped)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


def strip_amd_launch_options(module: types.ModuleType) -> list[AmdOptionFilter]:
    """Wrap every Triton kernel in ``module``'s globals (its launcher's view only)."""
    from triton.runtime.jit import KernelInterface

    filters = []
    for name, value in list(vars(module).items()):
        if isinstance(value, KernelInterface):
            wrapped = AmdOptionFilter(value)
            setattr(module, name, wrapped)
            filters.append(wrapped)
    return filters
