"""Load sglang's FP4 indexer Triton kernels from the installed wheel, without sglang's package init.

sglang's ``__init__`` modules import its whole serving stack. The five kernel modules this
project tests need only a handful of names from it, so the loader registers bare packages and
small stubs under the ``sglang.*`` names those modules import, executes the shipped files
directly, and then puts ``sys.modules`` back the way it found it (the loaded modules are kept
privately; their functions hold their own globals).

Triton decides between the CPU interpreter and compilation when ``@triton.jit`` decorates,
and its own standard library (``tl.max``...) is decorated when ``triton`` is first imported.
So interpreter mode needs ``TRITON_INTERPRET=1`` before the first ``import triton`` in the
process; the loader sets it for that import and for every kernel call (``Kernels.scope``) and
restores the previous environment afterwards, so nothing leaks into other runs or subprocesses.
A process whose triton was imported in the other mode cannot switch: ``load`` says so.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mxgate.kernels.sources import MODES, Mode, env_scope, triton_mode, triton_version  # noqa: F401 - shared, re-exported

# The version whose sources were read for these stubs (docs/findings/sglang.md).
VERIFIED_VERSION = "0.5.23"
MIN_TRITON_INTERPRET = (3, 9)  # the interpreter's dot_scaled support starts here

# Shipped modules executed as they are, in dependency order: short name -> (module, wheel path).
REAL_MODULES: dict[str, tuple[str, str]] = {
    "fake_quant": (
        "sglang.kernels.ops.quantization.fp4_fake_quant",
        "sglang/kernels/ops/quantization/fp4_fake_quant.py",
    ),
    "quant": (
        "sglang.kernels.ops.quantization.fp4_indexer_quant",
        "sglang/kernels/ops/quantization/fp4_indexer_quant.py",
    ),
    "indexer": (
        "sglang.kernels.ops.attention.dsv4.fp4_indexer",
        "sglang/kernels/ops/attention/dsv4/fp4_indexer.py",
    ),
    "page68": (
        "sglang.kernels.ops.kvcache.dsv4_fp4_index_k_cache",
        "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache.py",
    ),
    "split": (
        "sglang.kernels.ops.kvcache.dsv4_fp4_index_k_cache_hip",
        "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache_hip.py",
    ),
}

# Bare packages: no __init__ runs and no search path, so an import the stubs do not cover fails
# with ModuleNotFoundError naming it instead of pulling in the serving stack.
BARE_PACKAGES: tuple[str, ...] = (
    "sglang",
    "sglang.srt",
    "sglang.kernels",
    "sglang.kernels.jit",
    "sglang.kernels.ops",
    "sglang.kernels.ops.quantization",
    "sglang.kernels.ops.attention",
    "sglang.kernels.ops.attention.dsv4",
    "sglang.kernels.ops.kvcache",
)

# Constants the stubs provide, read from the shipped files (never executed): stub module ->
# (wheel path, {name: expected literal}). A different literal in a later wheel is an error.
STUB_CONSTANTS: dict[str, tuple[str, dict[str, int]]] = {
    "sglang.kernels.ops.attention.dsv4.fp4_indexer_hip": (
        "sglang/kernels/ops/attention/dsv4/fp4_indexer_hip.py",
        {"_HEAD_DIM": 128, "_KV_BLOCK_SIZE": 64},
    ),
    "sglang.kernels.ops.attention.deep_select": (
        "sglang/kernels/ops/attention/deep_select.py",
        {"_INPUT_STRIDE_ALIGNMENT_BYTES": 128},
    ),
}

# Names of get_platform() facts the stub answers; anything else raises AttributeError.
PLATFORM_FACTS: tuple[str, ...] = (
    "is_blackwell",
    "is_sm90",
    "is_sm100",
    "is_sm120",
    "is_hopper",
    "is_cuda",
    "is_hip",
)

# Byte written into buffers the stub allocates (aligned_new_empty): sglang leaves them
# uninitialised; a fixed poison keeps runs deterministic and shows untouched cells (0xFFFFFFFF
# is a NaN in float32).
POISON_BYTE = 0xFF

_LOCK = threading.RLock()
_CACHE: dict[str, Kernels] = {}


class LoaderError(RuntimeError):
    """sglang's kernels cannot be loaded here; the message says why."""


def sglang_version() -> str | None:
    """Version of the installed ``sglang`` distribution, or None when it is absent."""
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def problem(mode: Mode) -> str | None:
    """Why ``load(mode)`` would fail, checked without importing torch, triton or sglang."""
    _check_mode(mode)
    for module in ("torch", "triton"):
        if importlib.util.find_spec(module) is None:
            return f"python package {module!r} is not installed"
    if sglang_version() is None:
        return "python package 'sglang' is not installed (pip install --no-deps sglang==0.5.23)"
    if mode == "interpret":
        version = triton_version()
        if version is None or version < MIN_TRITON_INTERPRET:
            return (
                f"triton {'.'.join(map(str, version)) if version else '?'} is installed; the CPU "
                f"interpreter path needs triton >= {'.'.join(map(str, MIN_TRITON_INTERPRET))}"
            )
    current = triton_mode()
    if current is not None and current != mode:
        if mode == "interpret":
            return (
                "triton was imported in this process without TRITON_INTERPRET=1, and a process "
                "cannot switch it to the CPU interpreter: set TRITON_INTERPRET=1 in the "
                "environment (or call mxgate.kernels.sglang_loader.load('interpret') before "
                "anything imports triton)"
            )
        return (
            "triton was imported in this process with TRITON_INTERPRET=1 (CPU interpreter); "
            "compiled CUDA kernels need a process started without it"
        )
    return None


@dataclass
class Platform:
    """Stand-in for ``sglang.srt.runtime_context.get_platform()``: the device's facts."""

    facts: dict[str, bool]
    _overrides: dict[str, bool] = field(default_factory=dict)

    def __getattr__(self, name: str) -> bool:
        # only reached for names that are not fields; private names (copy, pickle probes) fail plainly
        if name.startswith("_") or "facts" not in self.__dict__:
            raise AttributeError(name)
        if name in self._overrides:
            return self._overrides[name]
        if name in self.facts:
            return self.facts[name]
        raise AttributeError(
            f"platform fact {name!r} is not provided by mxgate's sglang loader; "
            f"known: {', '.join(sorted(self.facts))}"
        )

    @contextlib.contextmanager
    def override(self, **facts: bool) -> Iterator[None]:
        """Scoped override, e.g. ``override(is_blackwell=True)`` to reach a dispatch branch."""
        unknown = set(facts) - set(self.facts)
        if unknown:
            raise ValueError(f"facts must be among {sorted(self.facts)}; got {sorted(unknown)}")
        saved = dict(self._overrides)
        self._overrides.update(facts)
        try:
            yield
        finally:
            self._overrides.clear()
            self._overrides.update(saved)


@dataclass
class Kernels:
    """The loaded modules of one mode, with the stubs they were given."""

    version: str
    mode: Mode
    root: Path
    modules: dict[str, types.ModuleType]
    platform: Platform
    constants: dict[str, int]

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Wrap every kernel launch: triton reads TRITON_INTERPRET again while it runs."""
        with env_scope(self.mode):
            yield

    def __getattr__(self, name: str) -> types.ModuleType:
        modules = self.__dict__.get("modules", {})
        if name in modules:
            return modules[name]
        raise AttributeError(name)

    @property
    def verified(self) -> bool:
        """Whether this is the sglang version the stubs were checked against."""
        return self.version == VERIFIED_VERSION


def load(mode: Mode = "interpret") -> Kernels:
    """Load (once per process and mode) sglang's FP4 indexer kernel modules.

    Raises LoaderError with the reason when sglang, torch or triton is missing, when triton
    was already imported in the other mode, or when the wheel no longer matches the stubs.
    """
    _check_mode(mode)
    with _LOCK:
        if mode in _CACHE:
            return _CACHE[mode]
        reason = problem(mode)
        if reason is not None:
            raise LoaderError(reason)
        root = _wheel_root()
        constants = _read_constants(root)
        with env_scope(mode):
            importlib.import_module("torch")
            importlib.import_module("triton")
            importlib.import_module("triton.language")
            if triton_mode() != mode:
                raise LoaderError(problem(mode) or f"triton did not start in {mode} mode")
            platform = Platform(_device_facts(mode))
            modules = _exec_modules(root, platform, constants)
        kernels = Kernels(sglang_version() or "?", mode, root, modules, platform, constants)
        _CACHE[mode] = kernels
        return kernels


def _check_mode(mode: object) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")


def _wheel_root() -> Path:
    dist = importlib.metadata.distribution("sglang")
    root = Path(str(dist.locate_file("")))
    missing = [rel for _, rel in REAL_MODULES.values() if not (root / rel).is_file()]
    missing += [rel for rel, _ in STUB_CONSTANTS.values() if not (root / rel).is_file()]
    if missing:
        raise LoaderError(
            f"sglang {sglang_version()} lacks the kernel files the loader expects: {', '.join(missing)}"
        )
    return root


def _read_constants(root: Path) -> dict[str, int]:
    """Module-level integer literals the stubs stand in for, parsed from the shipped source."""
    found: dict[str, int] = {}
    for module, (rel, expected) in STUB_CONSTANTS.items():
        tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
        values: dict[str, object] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in expected:
                        values[target.id] = node.value.value
        for name, want in expected.items():
            if values.get(name) != want:
                raise LoaderError(
                    f"{rel} in sglang {sglang_version()} defines {name} = {values.get(name)!r}; "
                    f"the loader's stub for {module} assumes {want}"
                )
            found[name] = want
    return found


def _device_facts(mode: Mode) -> dict[str, bool]:
    facts = dict.fromkeys(PLATFORM_FACTS, False)
    if mode == "interpret":
        return facts  # the interpreter is no device: every dispatch takes its generic branch
    import torch

    if torch.cuda.is_available():
        major, _ = torch.cuda.get_device_capability()
        hip = torch.version.hip is not None
        facts.update(
            is_cuda=not hip,
            is_hip=hip,
            is_hopper=not hip and major == 9,
            is_sm90=not hip and major == 9,
            is_sm100=not hip and major == 10,
            is_sm120=not hip and major == 12,
            is_blackwell=not hip and major in (10, 11, 12),
        )
    return facts


def _aligned_new_empty(shape: Any, dtype: Any, device: Any, *, alignment_bytes: int) -> Any:
    """Tensor of ``shape`` whose row stride is a multiple of ``alignment_bytes``, poison-filled."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    if alignment_bytes <= 0 or alignment_bytes % itemsize:
        raise ValueError(f"alignment_bytes must be a positive multiple of {itemsize}; got {alignment_bytes}")
    shape = tuple(int(s) for s in shape)
    if not shape:
        raise ValueError("shape must have at least one dimension")
    step = alignment_bytes // itemsize
    padded = -(-shape[-1] // step) * step
    raw = torch.full((*shape[:-1], padded * itemsize), POISON_BYTE, dtype=torch.uint8, device=device)
    return raw.view(dtype)[..., : shape[-1]]


def _stub_modules(platform: Platform, constants: dict[str, int]) -> dict[str, types.ModuleType]:
    stubs: dict[str, types.ModuleType] = {}
    for name in BARE_PACKAGES:
        module = types.ModuleType(name, "bare package registered by mxgate's sglang loader")
        module.__path__ = []  # type: ignore[attr-defined]
        stubs[name] = module

    def stub(name: str, **attrs: Any) -> None:
        module = types.ModuleType(name, "stub registered by mxgate's sglang loader")
        module.__dict__.update(attrs)
        stubs[name] = module

    stub("sglang.srt.runtime_context", get_platform=lambda: platform)
    stub("sglang.kernels.jit.utils", aligned_new_empty=_aligned_new_empty)
    alignment = constants["_INPUT_STRIDE_ALIGNMENT_BYTES"]
    stub(
        "sglang.kernels.ops.attention.deep_select",
        get_input_stride_alignment_bytes=lambda: alignment,
    )
    stub(
        "sglang.kernels.ops.attention.dsv4.fp4_indexer_hip",
        _HEAD_DIM=constants["_HEAD_DIM"],
        _KV_BLOCK_SIZE=constants["_KV_BLOCK_SIZE"],
    )
    return stubs


def _exec_modules(root: Path, platform: Platform, constants: dict[str, int]) -> dict[str, types.ModuleType]:
    ours = _stub_modules(platform, constants)
    touched = [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]
    saved = {n: sys.modules.pop(n) for n in touched}
    try:
        sys.modules.update(ours)
        loaded: dict[str, types.ModuleType] = {}
        for short, (name, rel) in REAL_MODULES.items():
            spec = importlib.util.spec_from_file_location(name, root / rel)
            if spec is None or spec.loader is None:
                raise LoaderError(f"cannot build an import spec for {root / rel}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except ImportError as exc:
                raise LoaderError(
                    f"{rel} (sglang {sglang_version()}) imports a name the loader does not stub: {exc}"
                ) from exc
            loaded[short] = module
        return loaded
    finally:
        for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
            del sys.modules[name]
        sys.modules.update(saved)
