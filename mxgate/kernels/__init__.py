"""One registry of every implementation under test (backends), looked up by name.

A backend comes from one of three places:

- built in: the adapters of this package (``oracle``, ``sglang-triton``, ...);
- an installed package's entry point in the group ``mxgate.backends`` (name -> ``module:attr``);
- a ``module.path:attr`` spec given directly (``mxgate check --backend mymod:MyBackend``), where
  ``attr`` is a :class:`Backend` subclass, an instance, or a callable returning one.

The spec string a user gave is the backend's name in every report. Adapters load lazily:
importing mxgate never imports torch, triton or a vendor package.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from mxgate.kernels.base import DEVICES, Availability, Backend, Op, OutsideContract

ENTRY_POINT_GROUP = "mxgate.backends"


class NotABackend(ValueError, TypeError):
    """The name does not name a backend: unknown, malformed, a module that does not exist, an
    attribute it lacks, or an object that is no Backend. A usage error, not a fault of a kernel."""

# name -> (module, class, constructor keyword arguments)
_REGISTRY: dict[str, tuple[str, str, dict[str, object]]] = {
    "oracle": ("mxgate.kernels.oracle_backend", "OracleBackend", {}),
    "ml_dtypes": ("mxgate.kernels.codecs", "MlDtypesBackend", {}),
    "torch": ("mxgate.kernels.codecs", "TorchCastBackend", {}),
    "triton-mxfp": ("mxgate.kernels.codecs", "TritonMxfpBackend", {}),
    "torchao": ("mxgate.kernels.codecs", "TorchaoBackend", {}),
    "triton-dot-scaled": ("mxgate.kernels.triton_dot_scaled", "TritonDotScaledBackend", {}),
    "sglang-triton": ("mxgate.kernels.sglang_triton", "SglangTritonBackend", {}),
    "sglang-triton-rne": ("mxgate.kernels.sglang_triton", "SglangTritonBackend", {"rne": True}),
    "aiter": ("mxgate.kernels.aiter", "AiterBackend", {}),
    "vllm-triton": ("mxgate.kernels.vllm_triton", "VllmTritonBackend", {}),
    "aiter-triton": ("mxgate.kernels.aiter_triton", "AiterTritonBackend", {}),
    "aiter-reference": ("mxgate.kernels.aiter_reference", "AiterReferenceBackend", {}),
    "vllm-triton-fnuz": ("mxgate.kernels.vllm_triton", "VllmTritonBackend", {"fp8": "fnuz"}),
    "torchao-mx-floor": ("mxgate.kernels.peers", "TorchaoMxBackend", {"mode": "floor"}),
    "torchao-mx-rceil": ("mxgate.kernels.peers", "TorchaoMxBackend", {"mode": "rceil"}),
    "microxcaling": ("mxgate.kernels.peers", "MicroxcalingBackend", {}),
    "onnx-reference": ("mxgate.kernels.peers", "OnnxReferenceBackend", {}),
    "onnx-quantizelinear": ("mxgate.kernels.peers", "OnnxQuantizeLinearBackend", {}),
    "deepgemm-reference": ("mxgate.kernels.deepgemm_reference", "DeepGemmReferenceBackend", {}),
    "triton-kernels-round-up": ("mxgate.kernels.triton_kernels_reference", "TritonKernelsReferenceBackend",
                                {"mode": "round_up"}),
    "triton-kernels-round-down": ("mxgate.kernels.triton_kernels_reference", "TritonKernelsReferenceBackend",
                                  {"mode": "round_down"}),
}


# The costly packages (about a second of CPU each) a built-in backend's worker imports: a fork
# server preloads one once where several of the backends it starts import it (speed only).
_TORCH, _TORCHAO = ("torch",), ("torch", "torchao")
_HEAVY: dict[str, tuple[str, ...]] = {
    "oracle": (), "ml_dtypes": (), "onnx-reference": (), "onnx-quantizelinear": (),
    "torchao": _TORCHAO, "torchao-mx-floor": _TORCHAO, "torchao-mx-rceil": _TORCHAO,
}  # every other built-in: torch
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t]+(torchao|torch)\b", re.MULTILINE)


def heavy_imports(name: str) -> tuple[str, ...]:
    """Which of torch and torchao the worker of backend ``name`` imports, as far as can be told
    without importing anything: declared for a built-in; for a spec or an entry point, the import
    lines of its module's own source (found on sys.path; no package code runs). A guess that is
    wrong costs time only."""
    if name in _REGISTRY:
        return _HEAVY.get(name, _TORCH)
    target = name if is_spec(name) else _entry_points().get(name, ("", ""))[0]
    found = set(_IMPORT_LINE.findall(_module_source(target.partition(":")[0])))
    return _TORCHAO if "torchao" in found else _TORCH if found else ()


def _module_source(module_name: str) -> str:
    """The source text of a pure-Python module, located without executing its packages ("" if
    it cannot be found or read)."""
    from importlib.machinery import PathFinder

    spec, path = None, None
    parts = module_name.split(".") if module_name else []
    for i in range(len(parts)):
        if i and path is None:
            return ""  # a part before the last is a plain module: nothing under it to find
        try:
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), path)
        except Exception:  # noqa: BLE001 - e.g. a namespace package the finder wants in sys.modules
            return ""
        if spec is None:
            return ""
        path = spec.submodule_search_locations
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return ""
    try:
        return Path(origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Origin:
    """Where a backend name comes from: 'built-in', 'entry point <dist>', or 'command line'."""

    kind: str
    target: str  # module:attr (or module.Class for built-ins)

    def __str__(self) -> str:
        return f"{self.kind} ({self.target})"


def _entry_points() -> dict[str, tuple[str, str]]:
    """name -> (module:attr, distribution) of the installed ``mxgate.backends`` entry points."""
    found: dict[str, tuple[str, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
        if ep.name in _REGISTRY:
            raise ValueError(f"entry point {ep.name!r} of package {dist} ({ep.value}) clashes with the built-in "
                             f"backend of that name; rename it in that package's {ENTRY_POINT_GROUP} entry points")
        if ep.name in found and found[ep.name][0] != ep.value:
            raise ValueError(f"two installed packages register the backend {ep.name!r} ({found[ep.name][1]}: "
                             f"{found[ep.name][0]}, {dist}: {ep.value})")
        found[ep.name] = (ep.value, dist)
    return found


def names() -> list[str]:
    """Every registered backend name, built-in first, then entry points (available here or not)."""
    return list(_REGISTRY) + sorted(_entry_points())


def is_spec(name: str) -> bool:
    """A ``module.path:attr`` backend spec rather than a registered name."""
    return ":" in name


def origin(name: str) -> Origin:
    if name in _REGISTRY:
        module, cls, _ = _REGISTRY[name]
        return Origin("built-in", f"{module}.{cls}")
    points = _entry_points()
    if name in points:
        target, dist = points[name]
        return Origin(f"entry point of {dist}", target)
    if is_spec(name):
        return Origin("command line", name)
    raise NotABackend(f"backend must be one of {', '.join(names())} or a module.path:attr spec; got {name!r}")


def check_name(name: str) -> None:
    """Raise NotABackend (one line) unless ``name`` is a registered name, an entry point or a
    well-formed module.path:attr spec. Nothing is imported: a spec's module is loaded only in
    the backend's worker process (mxgate.kernels.isolation.load), where its faults are verdicts."""
    _entry_points()  # an installed entry point that clashes with a built-in name is an error for every run
    origin(name)
    if is_spec(name):
        _split_target(name, name)


def _split_target(target: str, label: str) -> tuple[str, str]:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise NotABackend(f"backend {label!r}: expected module.path:attr, got {target!r}")
    return module_name, attr


def resolve_target(target: str, label: str) -> object:
    """The object ``module.path:attr`` names (attr may be dotted). A module that does not exist
    or lacks the attribute is NotABackend; a module whose own code fails while importing raises
    that error unchanged (a fault of the backend, judged as such by the gate)."""
    module_name, attr = _split_target(target, label)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise NotABackend(f"backend {label!r}: cannot import module {module_name!r}: no module named "
                              f"{missing!r}") from None
        raise
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise NotABackend(f"backend {label!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _construct(obj: object, label: str, device: str) -> Backend:
    if isinstance(obj, Backend):
        return obj
    if inspect.isclass(obj) and issubclass(obj, Backend):
        return obj(device=device)
    if callable(obj) and not inspect.isclass(obj):
        try:
            wants_device = "device" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            wants_device = False
        made = obj(device=device) if wants_device else obj()
        if isinstance(made, Backend):
            return made
        raise NotABackend(f"backend {label!r}: the callable returned {type(made).__name__}, not a "
                          "mxgate.kernels.Backend")
    raise NotABackend(f"backend {label!r}: {type(obj).__name__} is not a mxgate.kernels.Backend subclass, "
                      "instance, or a callable returning one")


def get(name: str, device: str = "cpu") -> Backend:
    """The backend called ``name`` (a registered name or a module.path:attr spec), set up for ``device``."""
    if device not in DEVICES:
        raise NotABackend(f"device must be 'cpu' or 'cuda', got {device!r}")
    if name in _REGISTRY:
        module_name, class_name, kwargs = _REGISTRY[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:  # the adapter module itself is missing: report, do not crash
            return _Missing(name, f"adapter module {module_name} failed to import: {error}")
        backend = getattr(module, class_name)(device=device, **kwargs)
    else:
        origin(name)  # unknown names fail here with the list
        target = name if is_spec(name) else _entry_points()[name][0]
        backend = _construct(resolve_target(target, name), name, device)
        if getattr(backend, "device", None) is None:
            backend.device = device
    backend.name = name
    return backend


def available(device: str = "cpu") -> list[str]:
    """Names of the registered backends that can run here."""
    return [name for name in names() if get(name, device).available()]


class _Missing(Backend):
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self._reason = reason

    def available(self) -> Availability:
        return Availability(False, self._reason)

    def ops(self) -> dict[str, Op]:
        return {}


__all__ = ["Availability", "Backend", "NotABackend", "Op", "OutsideContract", "available", "get", "names", "origin"]
