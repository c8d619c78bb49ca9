"""The import graph of the checkout, read from the files as they stand (no import is run):
every module outside spec/ (the kit, the formulas, the reference, the benchmarks, the tools),
the modules each imports, and the import circles among them.

    python -m tools.import_graph            # one line per package, then the circles (if any)
    python -m tools.import_graph --dot      # the graph in Graphviz's DOT language, to stdout

An import counts wherever it is written: at the top, inside a function, in an ``except``
clause or under ``if TYPE_CHECKING`` (a lazy import breaks a circle when the code runs, not
in the structure a reader or a graph-drawing tool sees). ``tests/conformance/test_layout.py``
requires that there is no circle, among modules or among rooms (:func:`room_of`: a folder,
or a top-level module of the kit). Exit status: 1 when there is one, else 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE_SPEC = {ROOT / "src" / "hcspec" / "conformance": "hcspec.conformance",
                ROOT / "src" / "hcspec" / "formulas": "hcspec.formulas",
                ROOT / "src" / "hcspec" / "reference": "hcspec.reference",
                ROOT / "benchmarks": "benchmarks", ROOT / "tools": "tools"}
"""Every package outside spec/ (whose derivation modules may refer to each other), by folder."""


def module_files(folders: dict[Path, str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``folders`` (folder -> the
    package it is)."""
    found = {}
    for folder, package in folders.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts
                     if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def import_graph(modules: dict[str, Path], *, in_functions: bool,
                 type_checking: bool = True) -> dict[str, set[str]]:
    """module -> the modules among ``modules`` it imports (``from A import b`` counts as
    ``A.b`` when that is a module, else ``A``; relative imports resolved; imports in
    ``except`` handlers count; imports under ``if TYPE_CHECKING`` only with ``type_checking``
    (an import graph drawn from the text sees them); imports inside functions only with
    ``in_functions``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found: set[str] = set()

        def visit(statements: list[ast.stmt], package: str = package,
                  found: set[str] = found) -> None:
            for node in statements:
                if (isinstance(node, ast.If) and not type_checking
                        and "TYPE_CHECKING" in ast.unparse(node.test)):
                    visit(node.orelse)
                    continue
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not in_functions:
                    continue
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 \
                            else package
                        base = f"{anchor}.{base}".rstrip(".")
                    found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                                 for a in node.names)
                for child in ("body", "orelse", "finalbody"):
                    inner = getattr(node, child, None)
                    if isinstance(inner, list):
                        visit([s for s in inner if isinstance(s, ast.stmt)])
                for handler in getattr(node, "handlers", []):  # except clauses: not statements
                    visit(handler.body)

        visit(ast.parse(path.read_text(encoding="utf-8")).body)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one
    module, each sorted, in sorted order (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def room_of(module: str, files: dict[str, Path]) -> str:
    """The room ``module`` belongs to: for the kit, each top-level module is a room of its own
    and each first-level subpackage one room (``hcspec.conformance.run``); elsewhere the
    top-level package (``hcspec.reference``, ``benchmarks``)."""
    parts = module.split(".")
    if parts[:2] != ["hcspec", "conformance"]:
        return ".".join(parts[:2]) if parts[0] == "hcspec" else parts[0]
    if len(parts) == 2:
        return module
    if len(parts) == 3 and files[module].name != "__init__.py":
        return module  # a top-level module of the kit
    return ".".join(parts[:3])


def room_graph(graph: dict[str, set[str]], files: dict[str, Path]) -> dict[str, set[str]]:
    """The graph among rooms (:func:`room_of`): room A imports room B when a module of A
    imports one of B (A ≠ B). A circle here is a loop between folders, each import of which
    may be one-way at the level of modules."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        own = room_of(module, files)
        rooms.setdefault(own, set()).update(
            room_of(t, files) for t in targets if room_of(t, files) != own)
    return rooms


def main(argv: list[str] | None = None) -> int:
    """Print the graph's summary (or ``--dot``); 1 when it has a circle."""
    parser = argparse.ArgumentParser(prog="python -m tools.import_graph",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dot", action="store_true", help="print the graph as Graphviz DOT")
    args = parser.parse_args(argv)
    files = module_files(OUTSIDE_SPEC)
    graph = import_graph(files, in_functions=True)
    found = circles(graph) + circles(room_graph(graph, files))
    if args.dot:
        print("digraph imports {")
        for module in sorted(graph):
            for target in sorted(graph[module]):
                print(f'  "{module}" -> "{target}";')
        print("}")
        return 1 if found else 0
    packages = Counter(m if files[m].name == "__init__.py" else m.rsplit(".", 1)[0]
                       for m in graph)
    edges = sum(len(targets) for targets in graph.values())
    rooms = room_graph(graph, files)
    print(f"{len(graph)} modules, {edges} imports among them, {len(circles(graph))} circles; "
          f"{len(rooms)} rooms (the kit's top-level modules and subpackages, the other "
          f"packages), {len(circles(rooms))} circles among them")
    for package, count in sorted(packages.items()):
        out = sum(len(graph[m]) for m in graph
                  if (m if files[m].name == "__init__.py" else m.rsplit(".", 1)[0]) == package)
        print(f"  {package}: {count} modules, {out} imports")
    for circle in found:
        print("circle: " + " -> ".join([*circle, circle[0]]))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
