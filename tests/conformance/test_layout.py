"""The layout of the kit: one module per family in conformance/families/ (whose package is the
registry), importing the kit's machinery through the author facade (conformance/author.py)
plus the few machinery modules only it needs, and the spec; never another family and never the
reference (whose values the families check). The kit has no import circle and no module over
500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hcspec.conformance.families import FAMILIES
from tools.import_graph import (
    OUTSIDE_SPEC,
    circles,
    import_graph,
    module_files,
    room_graph,
)

ROOT = Path(__file__).resolve().parents[2]
FAMILY_DIR = ROOT / "conformance" / "families"
MACHINERY_DIR = ROOT / "conformance" / "machinery"
FAMILY_PACKAGE = "hcspec.conformance.families"
FORBIDDEN = ("hcspec.reference",)


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every import in ``source`` (nested ones too; ``from A
    import b`` gives ``A.b``, since ``b`` may be a module; a relative import is resolved
    against the families package)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([FAMILY_PACKAGE, base]).rstrip(".")
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return sorted(found)


def offending_imports(path: Path) -> list[str]:
    """The imports of the family module at ``path`` that break the layout: another family
    (or the families package), or :mod:`hcspec.reference`; each as ``file:line module``."""
    own = f"{FAMILY_PACKAGE}.{path.stem}"
    bad = []
    for line, module in imported_modules(path.read_text(encoding="utf-8")):
        family = module == FAMILY_PACKAGE or module.startswith(FAMILY_PACKAGE + ".")
        if (family and not module.startswith(own)) or any(
                module == f or module.startswith(f + ".") for f in FORBIDDEN):
            bad.append(f"{path.name}:{line} {module}")
    return bad


def _family_modules() -> list[Path]:
    return sorted(p for p in FAMILY_DIR.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", _family_modules(), ids=lambda p: p.stem)
def test_a_family_imports_no_other_family_and_not_the_reference(path: Path) -> None:
    assert offending_imports(path) == []


def test_the_check_sees_a_cross_family_import_and_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "gradients.py"
    path.write_text("from hcspec.conformance.families.variant import UNROLLED\n"
                    "from hcspec.conformance.families import gradients\n"
                    "def f():\n    from hcspec.reference import sinkhorn\n"
                    "from hcspec import reference\n"
                    "from .constraints import MHCWeights\n"
                    "from hcspec.conformance.machinery.base import Context\n")
    assert offending_imports(path) == [
        "gradients.py:1 hcspec.conformance.families.variant.UNROLLED",
        "gradients.py:4 hcspec.reference.sinkhorn",
        "gradients.py:5 hcspec.reference",
        "gradients.py:6 hcspec.conformance.families.constraints.MHCWeights",
    ]


def test_the_families_folder_holds_exactly_the_registered_families() -> None:
    assert [p.stem for p in _family_modules()] == sorted(FAMILIES)
    assert not {p.stem for p in MACHINERY_DIR.glob("*.py")} & set(FAMILIES)


# The import graph of the kit: no circle among its modules (docs/architecture.md, "Layers").

KIT_FOLDERS = {ROOT / "conformance": "hcspec.conformance",
               ROOT / "src" / "hcspec" / "formulas": "hcspec.formulas"}


def test_no_import_circle_outside_spec_counting_every_import() -> None:
    # imports inside functions, in except clauses and under TYPE_CHECKING all count: a
    # lazy import that breaks a circle at run time leaves it in the structure (issue #35)
    graph = import_graph(module_files(OUTSIDE_SPEC), in_functions=True)
    assert len(graph) > 200  # the kit, the reference, the benchmarks and the tools were found
    assert "hcspec.conformance.parallel.harness" in graph["hcspec.conformance.families.parallel"]
    assert circles(graph) == []


def test_no_circle_among_the_rooms_a_folder_or_a_top_level_module_of_the_kit() -> None:
    # every folder imports only folders below it: the layout reads top down (issue #35)
    files = module_files(OUTSIDE_SPEC)
    rooms = room_graph(import_graph(files, in_functions=True), files)
    assert {"hcspec.conformance.run", "hcspec.conformance.cli"} <= set(rooms)
    assert "hcspec.conformance.machinery" in rooms["hcspec.conformance.run"]
    assert circles(rooms) == []


def test_the_room_check_sees_a_circle_between_two_folders(tmp_path: Path) -> None:
    kit = tmp_path / "src" / "hcspec" / "conformance"
    for folder in ("a", "b"):
        (kit / folder).mkdir(parents=True)
        (kit / folder / "__init__.py").write_text("")
    (kit / "__init__.py").write_text("")
    (kit / "a" / "one.py").write_text("from hcspec.conformance.b import two\n")
    (kit / "b" / "two.py").write_text("x = 1\n")
    (kit / "b" / "three.py").write_text("from hcspec.conformance.a import four\n")
    (kit / "a" / "four.py").write_text("y = 2\n")
    files = module_files({kit: "hcspec.conformance"})
    graph = import_graph(files, in_functions=True)
    assert circles(graph) == []  # one-way between modules
    assert circles(room_graph(graph, files)) == [["hcspec.conformance.a", "hcspec.conformance.b"]]


def test_the_circle_check_sees_a_circle_through_a_function_and_a_relative_import(
        tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (tmp_path / "pkg" / "b.py").write_text("from . import a\nfrom .c import x\n")
    (tmp_path / "pkg" / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                           "if TYPE_CHECKING:\n    from pkg import b\n")
    (tmp_path / "pkg" / "d.py").write_text("def f():\n    try:\n        pass\n"
                                           "    except ImportError:\n        from pkg import e\n")
    (tmp_path / "pkg" / "e.py").write_text("import pkg.d\n")
    modules = module_files({tmp_path / "pkg": "pkg"})
    assert circles(import_graph(modules, in_functions=True)) == [["pkg.a", "pkg.b", "pkg.c"],
                                                                 ["pkg.d", "pkg.e"]]
    assert circles(import_graph(modules, in_functions=True, type_checking=False)) == [
        ["pkg.a", "pkg.b"], ["pkg.d", "pkg.e"]]
    assert circles(import_graph(modules, in_functions=False, type_checking=False)) == []


# The size of the kit's modules: one clear job per module, none over MAX_LINES lines
# (docs/architecture.md, "Layers"; issue #35).

MAX_LINES = 500


def oversized(folders: dict[Path, str], limit: int = MAX_LINES) -> list[str]:
    """``module (lines)`` for every module under ``folders`` longer than ``limit`` lines."""
    found = []
    for name, path in module_files(folders).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{name} ({lines})")
    return found


def test_no_module_of_the_kit_is_over_500_lines() -> None:
    assert oversized(KIT_FOLDERS) == []


def test_the_size_check_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 500)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 501)
    assert oversized({tmp_path / "pkg": "pkg"}) == ["pkg.long (501)"]


# The author facade: a family imports its machinery through hcspec.conformance.author, plus at
# most MAX_OWN_MACHINERY modules that only it needs; nothing but a family imports the facade.

AUTHOR = "hcspec.conformance.author"
MAX_OWN_MACHINERY = 4


def kit_imports(path: Path) -> set[str]:
    """The kit modules (``hcspec.conformance...``) the module at ``path`` imports at its top
    level (``from A import b`` counts as ``A``)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("hcspec.conformance")}


@pytest.mark.parametrize("path", _family_modules(), ids=lambda p: p.stem)
def test_a_family_imports_the_author_facade_and_few_other_kit_modules(path: Path) -> None:
    kit = kit_imports(path)
    assert AUTHOR in kit
    assert len(kit - {AUTHOR}) <= MAX_OWN_MACHINERY, sorted(kit - {AUTHOR})


def test_nothing_but_a_family_imports_the_author_facade() -> None:
    graph = import_graph(module_files(KIT_FOLDERS), in_functions=True)
    importers = sorted(m for m, deps in graph.items() if AUTHOR in deps)
    assert importers and all(m.startswith(FAMILY_PACKAGE + ".") for m in importers), importers


def test_the_facade_check_counts_a_familys_kit_imports(tmp_path: Path) -> None:
    path = tmp_path / "law.py"
    path.write_text("import torch\nfrom hcspec.conformance.author import Case, declare\n"
                    "from hcspec.conformance import metrics\n"
                    "def f():\n    from hcspec.conformance.rules import forward\n")
    assert kit_imports(path) == {AUTHOR, "hcspec.conformance"}


def test_only_the_registry_imports_a_family_module() -> None:
    """A front end (``compare.py``, the CLI, the pytest plugin) or the machinery reaches a
    family only through the registry, never a family module's helpers: what two places need
    is machinery (``machinery/published_step.py`` for the published family and ``compare``)."""
    graph = import_graph(module_files(KIT_FOLDERS), in_functions=True)
    reaching = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                      if d.startswith(FAMILY_PACKAGE + ".") and not m.startswith(FAMILY_PACKAGE))
    assert reaching == []
