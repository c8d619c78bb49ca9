"""The layout of the kit: one module per family in conformance/families/, importing only the
kit's machinery (conformance/properties/ and the modules beside it) and the spec, never
another family and never the reference (whose values the families check)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hcspec.conformance.properties import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
FAMILY_DIR = ROOT / "conformance" / "families"
MACHINERY_DIR = ROOT / "conformance" / "properties"
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
                    "from hcspec.conformance.properties.base import Context\n")
    assert offending_imports(path) == [
        "gradients.py:1 hcspec.conformance.families.variant.UNROLLED",
        "gradients.py:4 hcspec.reference.sinkhorn",
        "gradients.py:5 hcspec.reference",
        "gradients.py:6 hcspec.conformance.families.constraints.MHCWeights",
    ]


def test_the_families_folder_holds_exactly_the_registered_families() -> None:
    assert [p.stem for p in _family_modules()] == sorted(FAMILIES)
    assert not {p.stem for p in MACHINERY_DIR.glob("*.py")} & set(FAMILIES)
