#!/usr/bin/env python3
"""No import cycle in any distribution's package; lazy imports only of optional dependencies.

    python3 .ci/imports.py            check every ironaccel-*/src package; exit 1 on a problem
    python3 .ci/imports.py --graph    also print each package's module graph

Static (ast), so nothing is imported.  The graph has an edge A -> B when module A of a package imports
module B of the same package, at module level or inside a function (a lazy import still runs, and a
cycle through one is still a cycle).  Imports under ``if TYPE_CHECKING:`` are not edges: they never
run, and annotations may refer both ways.  An edge goes to the module named, not to the packages
above it (Python imports a submodule of a package that is still initialising without trouble).

A function-level import of anything outside the package must be the standard library, ironaccel
itself (every backend depends on core), or an optional dependency listed in OPTIONAL: anything else
belongs at module level.  Standard library only, so it runs before any install.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Per package: what a function may import lazily besides the standard library and ironaccel -- the
#: optional dependencies (vendor bindings, extras) that loading a plugin must not import.
OPTIONAL: dict[str, frozenset[str]] = {
    "ironaccel": frozenset({"numpy", "pytest", "ml_dtypes"}),
    "ironaccel_cuda": frozenset({"cuda", "numpy", "torch", "cupy", "ml_dtypes", "nvtx", "pytest", "mpi4py"}),
    "ironaccel_levelzero": frozenset({"numpy"}),
    "ironaccel_metal": frozenset({"Metal", "Foundation", "objc", "numpy"}),
    "ironaccel_neuron": frozenset({"numpy"}),
    "ironaccel_opengl": frozenset({"moderngl", "glcontext", "numpy"}),
    "ironaccel_pjrt": frozenset({"numpy", "jax", "jaxlib", "ml_dtypes"}),
    "ironaccel_qnn": frozenset({"numpy"}),
    "ironaccel_rocm": frozenset({"hip", "numpy"}),
    "ironaccel_vulkan": frozenset({"vulkan", "numpy", "spirv_tools"}),
    "ironaccel_webgpu": frozenset({"wgpu", "numpy"}),
    "ironaccel_slang": frozenset({"cuda", "ironaccel_cuda"}),  # the CUBIN route for CUDA kernels using half
    # ironaccel_cuda is no optional dependency of the compat: its function-level imports of the library were
    # imports inside one package before the compat left ironaccel-cuda (issue 40 turns them into module-level ones).
    "ironaccel_cuda_compat": frozenset({"cuda", "numpy", "torch", "cupy", "ml_dtypes", "pytest", "ironaccel_cuda"}),
}

#: Cycles left on purpose, by module.  ironaccel_cuda_compat mirrors a third-party package's layout,
#: whose modules import each other; issue 40 is its rewrite.
EXEMPT: frozenset[str] = frozenset({"ironaccel_cuda_compat"})


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import that runs, with whether it sits inside a function (or class body)."""

    def walk(nodes: list[ast.stmt], nested: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, nested
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    yield from walk(node.body, nested)
                yield from walk(node.orelse, nested)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from walk(node.body, True)
            else:  # try / with / for / while / match: their bodies run where they stand
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        yield from walk([child], nested)
                    elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                        yield from walk(child.body, nested)

    yield from walk(tree.body, False)


def _modules(src: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def check(src: Path, package: str, graph: bool = False) -> list[str]:
    """Problems of one package: cycles and lazy imports of what is not an optional dependency."""
    modules = _modules(src, package)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    problems = []
    optional = OPTIONAL.get(package, frozenset()) | {"ironaccel"}
    stdlib = set(sys.stdlib_module_names)
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node, nested in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(module, is_package, node)
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
                names_only = len(submodules) < len(node.names)  # some names are attributes of base itself
                targets = submodules + ([base] if names_only else [])
            for target in targets:
                if target in modules:
                    if target != module:
                        edges[module].add(target)
                    continue
                top = target.split(".")[0]
                if nested and top != package and top not in stdlib and top not in optional:
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    problems.append(f"{where}:{node.lineno}: a function imports {target}, which is"
                                    f" not an optional dependency of {package}: import it at module level, or list"
                                    " it in OPTIONAL in .ci/imports.py")
    for cycle in _cycles(edges):
        if any(m == e or m.startswith(e + ".") for m in cycle for e in EXEMPT):
            continue
        problems.append(f"import cycle in {package}: {' -> '.join(cycle + [cycle[0]])}")
    if graph:
        for module in sorted(edges):
            print(f"{module} -> {', '.join(sorted(edges[module])) or '-'}")
    return problems


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(_one_cycle(sorted(component), edges))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return components


def _one_cycle(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first module of a component, to name in the message."""
    inside = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v] & inside):
            if w == start:
                return paths[v]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return component


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", action="store_true", help="print each package's module graph")
    args = parser.parse_args()
    problems = []
    for src in sorted(ROOT.glob("ironaccel-*/src")):
        for package in sorted(p.name for p in src.iterdir() if (p / "__init__.py").is_file()):
            problems.extend(check(src, package, args.graph))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
