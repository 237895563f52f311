"""Import cycles among the package's modules, read statically (function-level imports included).

    python benchmarks/import_cycles.py [ROOT]

Prints every pair of modules that import each other and every strongly connected component
of the import graph; exits 1 when there is any. ``from package import submodule`` counts as an
edge to the submodule only (the package itself is always initialised first).
"""

from __future__ import annotations

import ast
import os
import sys

__all__ = ["import_graph", "strongly_connected"]

#: Source folders and the package names they install as.
PACKAGES = (("specdec_check", "specdec_check"), ("strategies", "specdec_check.strategies"))


def _modules(root: str) -> dict:
    mods = {}
    for folder, package in PACKAGES:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            if "strategies" in os.path.relpath(dirpath, root).split(os.sep)[1:]:
                continue  # the symlink some worktrees keep inside specdec_check/
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, os.path.join(root, folder))[:-3].replace(os.sep, ".")
                    name = package if rel == "__init__" else f"{package}.{rel.removesuffix('.__init__')}"
                    mods[name] = path
    return mods


def import_graph(root: str = ".") -> dict:
    """``{module: {modules it imports}}`` for the package under ``root``."""
    mods = _modules(root)
    edges = {m: set() for m in mods}
    for module, path in mods.items():
        is_package = path.endswith("__init__.py")
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = module.split(".") if is_package else module.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    target = ".".join(parts + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                for name in subs or [target]:
                    if name in mods and name != module:
                        edges[module].add(name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods and alias.name != module:
                        edges[module].add(alias.name)
    return edges


def strongly_connected(edges: dict) -> list:
    """Components of more than one module (Tarjan 1972)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
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
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def main(argv=None) -> int:
    root = (argv or sys.argv[1:] or ["."])[0]
    edges = import_graph(root)
    pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
    components = strongly_connected(edges)
    print(f"{len(edges)} modules; {len(pairs)} mutual imports; {len(components)} cycles")
    for a, b in pairs:
        print(f"  {a} <-> {b}")
    for component in components:
        print("  cycle: " + ", ".join(component))
    return 1 if components else 0


if __name__ == "__main__":
    sys.exit(main())
