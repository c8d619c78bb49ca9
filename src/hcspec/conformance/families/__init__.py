"""The registry of property families: every property the kit checks, in run order
(prerequisites first), and the selection of a run's properties (:func:`select`).

Each family is one module of this package, ``hcspec.conformance.families.<family>``, whose
checks declare their property (:func:`hcspec.conformance.machinery.declaration.declare`)
with ids ``<family>.<name>``. A family module imports the kit's machinery through the author
facade :mod:`hcspec.conformance.author` (or the machinery modules of
:mod:`hcspec.conformance.machinery` themselves) and the spec, never another family and never
:mod:`hcspec.reference` (tests/conformance/test_layout.py checks the import graph).
Importing this package imports the family modules in :data:`FAMILIES` order, which registers
the catalogue; ``hc-conformance list`` prints it.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
from collections.abc import Iterable
from typing import Final

from hcspec.conformance.machinery.declaration import PACKAGE, REGISTRY, Property

FAMILIES: Final[tuple[str, ...]] = (
    "shape", "law", "independence", "conventions", "constraints", "gradients", "reduction",
    "dtype", "device", "state", "scale", "strides", "inference", "determinism", "exact", "compile",
    "customop", "variant", "depth", "stack", "published", "gated", "parallel",
)
"""The families in run order; each names its module."""

for _family in FAMILIES:
    importlib.import_module(f"{PACKAGE}.{_family}")

CATALOGUE: Final[tuple[Property, ...]] = tuple(
    sorted(REGISTRY, key=lambda p: FAMILIES.index(p.family)))
"""Every property, family by family in :data:`FAMILIES` order, each family in declaration
order."""

BY_ID: Final[dict[str, Property]] = {p.id: p for p in CATALOGUE}


def _validate() -> None:
    seen: set[str] = set()
    for prop in CATALOGUE:
        if prop.family not in FAMILIES:
            raise RuntimeError(f"property {prop.id}: unknown family {prop.family}")
        for pre in prop.prerequisites:
            if pre not in seen:
                raise RuntimeError(f"property {prop.id}: prerequisite {pre} must come earlier")
        seen.add(prop.id)


_validate()


class SelectionError(ValueError):
    """``--only``/``--skip`` named something that matches no property or family."""


def _matches(pattern: str) -> list[str]:
    if pattern in FAMILIES:
        return [p.id for p in CATALOGUE if p.family == pattern]
    return [pid for pid in BY_ID if fnmatch.fnmatchcase(pid, pattern)]


def select(only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> list[Property]:
    """The catalogue restricted to ``only`` and without ``skip``. Each entry is an id, a family
    name, or a glob (``law.*``). The prerequisites of a selected property are selected too
    (they are cheap and decide whether it is blocked).

    Raises:
        SelectionError: an entry that matches nothing; the message lists the known ids.
    """
    def expand(patterns: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for raw in patterns:
            for pattern in (p.strip() for p in raw.split(",")):
                if not pattern:
                    continue
                found = _matches(pattern)
                if not found:
                    close = difflib.get_close_matches(pattern, [*BY_ID, *FAMILIES], n=3)
                    hint = f"did you mean {', '.join(close)}? " if close else ""
                    raise SelectionError(
                        f"unknown property id or family {pattern!r}; {hint}expected a family "
                        f"({', '.join(FAMILIES)}), a property id or a glob such as 'law.*' "
                        "(hc-conformance list prints every id)"
                    )
                out.update(found)
        return out

    chosen = expand(only) if only else set(BY_ID)
    dropped = expand(skip) if skip else set()
    chosen -= dropped
    stack = list(chosen)
    while stack:
        for pre in BY_ID[stack.pop()].prerequisites:
            if pre not in chosen and pre not in dropped:
                chosen.add(pre)
                stack.append(pre)
    return [p for p in CATALOGUE if p.id in chosen]
