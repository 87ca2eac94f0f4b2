"""The packages stand in layers and every import points down (docs/architecture.md).

Each module's imports are read with ``ast``, those inside functions included (a lazy import is
still an arrow), and resolved to the module they load. An arrow from a package to one in its own
layer or above is named with its file and line; an import circle through modules of two
packages is named with its members.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mxgate"

# top to bottom; a package may import only packages of the layers below its own. "mxgate" is
# the package face (mxgate/__init__.py: it imports the oracle; the rest loads on first use).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("conformance", "identify", "tools"),
    ("kernels", "vectors", "explain", "twin"),
    ("inputs",),
    ("op_table",),
    ("mxgate",),
    ("oracle",),
)
RANK = {name: len(LAYERS) - i for i, layer in enumerate(LAYERS) for name in layer}
OUTSIDE_ORACLE = ("torch", "triton")  # the oracle is NumPy-only


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def package_of(module: str) -> str:
    """The layer name of a module: the first part under mxgate (``__main__`` is the cli's)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "mxgate"
    return "cli" if parts[1] == "__main__" else parts[1]


def imports(module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement of ``module``, at any depth; an
    imported name that is a submodule (``from mxgate import oracle``) counts as that module."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                yield node.lineno, sub if sub in MODULES else source


@functools.cache
def arrows() -> list[tuple[str, int, str]]:
    """(module, line, imported mxgate module) for every import of one mxgate module by another
    (read once, by the first test that asks: collecting this file parses nothing)."""
    found = set()
    for module in MODULES:
        for line, target in imports(module):
            while target and target not in MODULES and target.startswith("mxgate."):
                target = target.rpartition(".")[0]  # an imported name that is no module: its module
            if target in MODULES:
                found.add((module, line, target))
    return sorted(found)


def test_every_package_has_a_layer() -> None:
    assert {package_of(m) for m in MODULES} == set(RANK), "a package missing from LAYERS (and docs/architecture.md)"


def test_every_arrow_points_down() -> None:
    upward = []
    for module, line, target in arrows():
        a, b = package_of(module), package_of(target)
        if a != b and RANK[b] >= RANK[a]:
            where = "its own layer" if RANK[b] == RANK[a] else "a layer above"
            upward.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {a} -> {b} ({module} imports {target}, "
                          f"{where})")
    assert not upward, "imports that do not point down:\n" + "\n".join(upward)


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return found


def test_no_import_circle_spans_two_packages() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, _, target in arrows():
        if target != module:
            edges[module].add(target)
    spanning = [c for c in _circles(edges) if len({package_of(m) for m in c}) > 1]
    assert not spanning, "import circles across packages:\n" + "\n".join(
        f"{len(c)} modules of {', '.join(sorted({package_of(m) for m in c}))}: {', '.join(c)}" for c in spanning)


def test_the_circle_finder_finds_circles() -> None:
    """The check above is only as good as the circle finder: it must see a planted one."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _circles(edges) == [["a", "b", "c"]]


def test_the_oracle_imports_neither_torch_nor_triton() -> None:
    found = [f"{MODULES[m].relative_to(ROOT)}:{line}: {target}"
             for m in MODULES if package_of(m) == "oracle"
             for line, target in imports(m) if target.split(".")[0] in OUTSIDE_ORACLE]
    assert not found, "the oracle must stay NumPy-only:\n" + "\n".join(found)


def test_the_layer_order_is_the_one_documented() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    documented = " -> ".join("(" + ", ".join(layer) + ")" if len(layer) > 1 else layer[0]
                             for layer in LAYERS if layer != ("mxgate",))
    assert f"`{documented}`" in text, f"docs/architecture.md should state the layer order `{documented}`"


def test_the_twin_reads_the_triton_mode_as_the_kernels_do() -> None:
    """mxgate.twin.fused repeats kernels.sources.triton_mode's probe (the twin may not import
    the kernels): the two must agree."""
    pytest.importorskip("triton")
    from mxgate.kernels import sources
    from mxgate.twin import fused

    assert fused.mode() == sources.triton_mode() in ("interpret", "compiled")
