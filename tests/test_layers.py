"""The layer rule of the package, read from the files (docs/architecture.md, "The layers"):

* the spec (``spec/``) imports none of torch, :mod:`hcspec.formulas`, :mod:`hcspec.reference`,
  :mod:`hcspec.conformance`;
* the formulas (``src/hcspec/formulas/``) import torch and the spec at most, never the
  reference or the kit;
* the reference (``reference/``) never imports the kit (it reaches the kit only as the
  built-in targets ``reference:*``, declared by the kit).

Every import statement counts, nested ones too (a function-level import is still an arrow).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: dict[str, tuple[Path, str, tuple[str, ...]]] = {
    "spec": (ROOT / "spec", "hcspec.spec",
             ("torch", "hcspec.formulas", "hcspec.reference", "hcspec.conformance")),
    "formulas": (ROOT / "src" / "hcspec" / "formulas", "hcspec.formulas",
                 ("hcspec.reference", "hcspec.conformance")),
    "reference": (ROOT / "reference", "hcspec.reference", ("hcspec.conformance",)),
}
"""layer -> (its folder, its package, the modules it may not import)."""


def imports(source: str, package: str) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every import in ``source`` of a module in ``package``
    (nested ones too; ``from A import b`` gives ``A.b``; a relative import is resolved
    against ``package``, one level up per extra dot)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[:len(parts) - (node.level - 1)]
                base = ".".join([*parent, base]).rstrip(".")
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return sorted(found)


def offending(path: Path, package: str, forbidden: tuple[str, ...]) -> list[str]:
    """The imports of the module at ``path`` (in ``package``) of a ``forbidden`` module or one
    below it, each as ``file:line module``."""
    return [f"{path.name}:{line} {module}"
            for line, module in imports(path.read_text(encoding="utf-8"), package)
            if any(module == f or module.startswith(f + ".") for f in forbidden)]


def _modules(layer: str) -> list[tuple[str, Path]]:
    folder = LAYERS[layer][0]
    return [(layer, p) for p in sorted(folder.rglob("*.py"))]


@pytest.mark.parametrize(("layer", "path"),
                         [m for layer in LAYERS for m in _modules(layer)],
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_a_layer_imports_nothing_above_it(layer: str, path: Path) -> None:
    folder, package, forbidden = LAYERS[layer]
    sub = ".".join((package, *path.relative_to(folder).parent.parts))
    assert offending(path, sub, forbidden) == []


def test_every_layer_folder_holds_modules() -> None:
    for layer in LAYERS:
        assert len(_modules(layer)) >= 3, layer
    # a real folder inside the package, not a link to one elsewhere
    assert not (ROOT / "src" / "hcspec" / "formulas").is_symlink()


def test_the_layers_are_real_folders_under_their_installed_name() -> None:
    """Static tools read the package itself: src/hcspec/<layer> are folders, and the three
    top-level names the users asked for are relative links to them (not the other way)."""
    for layer in ("spec", "reference", "conformance"):
        inside = ROOT / "src" / "hcspec" / layer
        assert inside.is_dir() and not inside.is_symlink(), layer
        top = ROOT / layer
        assert top.is_symlink(), layer
        assert os.readlink(top) == f"src/hcspec/{layer}", layer


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    path = tmp_path / "sinkhorn.py"
    path.write_text("import torch\n"
                    "from hcspec.spec.record import Formula\n"
                    "from hcspec.conformance import rules\n"
                    "def f():\n    import hcspec.reference.sinkhorn\n"
                    "from .. import conformance\n"
                    "from ..reference import published\n"
                    "from . import mhc\n", encoding="utf-8")
    assert offending(path, "hcspec.formulas", LAYERS["formulas"][2]) == [
        "sinkhorn.py:3 hcspec.conformance.rules",
        "sinkhorn.py:5 hcspec.reference.sinkhorn",
        "sinkhorn.py:6 hcspec.conformance",
        "sinkhorn.py:7 hcspec.reference.published",
    ]
    assert offending(path, "hcspec.spec", LAYERS["spec"][2]) == [
        "sinkhorn.py:1 torch",
        "sinkhorn.py:3 hcspec.conformance.rules",
        "sinkhorn.py:5 hcspec.reference.sinkhorn",
        "sinkhorn.py:6 hcspec.conformance",
        "sinkhorn.py:7 hcspec.reference.published",
    ]
    assert offending(path, "hcspec.reference", LAYERS["reference"][2]) == [
        "sinkhorn.py:3 hcspec.conformance.rules",
        "sinkhorn.py:6 hcspec.conformance",
    ]
