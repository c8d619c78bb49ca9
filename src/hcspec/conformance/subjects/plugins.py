"""Target declarations shipped by other packages, through the entry-point group ``hcspec.targets``.

A package that wraps its own HC module for the kit declares its targets the way hcspec's own
declarations modules do (a tuple of
:class:`~hcspec.conformance.adapters._builtin.BuiltinTarget`, with its lane and findings), in
a module that imports neither torch nor the package's heavy modules, and names it in its
``pyproject.toml``::

    [project.entry-points."hcspec.targets"]
    mypkg = "mypkg.hc_targets:TARGETS"

The object an entry point names is a tuple or list of ``BuiltinTarget``, a module with such a
``TARGETS``, or a callable without arguments that returns one.
:mod:`hcspec.conformance.subjects.targets` registers them beside the built-in ones when it is
imported (:func:`load`), so ``hc-conformance targets`` lists them and ``hc-conformance run NAME``
runs them; their factory paths are imported only when a target is resolved, as the built-ins' are.

A broken entry point (its import fails, it names something else, a name is taken) never stops
the kit: it is reported as a :class:`RuntimeWarning` and left out.

Nothing here imports torch.
"""

from __future__ import annotations

import importlib.metadata
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

__all__ = ["GROUP", "Declared", "load"]

GROUP: Final = "hcspec.targets"
"""The entry-point group a package declares its targets under."""


@dataclass(frozen=True)
class Declared:
    """What :func:`load` found.

    Attributes:
        targets: (the entry point's ``dist:name``, target) for every target declared.
        problems: one line per entry point that could not be used (the entry point, why).
    """

    targets: tuple[tuple[str, BuiltinTarget], ...]
    problems: tuple[str, ...]


def _targets_of(loaded: object) -> tuple[BuiltinTarget, ...]:
    """The targets the entry point's object declares.

    Raises:
        TypeError: it is neither a tuple/list of BuiltinTarget, a module with one as TARGETS,
            nor a callable returning one.
    """
    if isinstance(loaded, types.ModuleType):
        loaded = getattr(loaded, "TARGETS", None)
    elif callable(loaded) and not isinstance(loaded, (tuple, list)):
        function: Callable[[], object] = loaded
        loaded = function()
    if isinstance(loaded, (tuple, list)) and all(isinstance(t, BuiltinTarget) for t in loaded):
        return tuple(loaded)
    raise TypeError(f"expected a tuple of BuiltinTarget (or a module with TARGETS, or a "
                    f"function returning one), got {type(loaded).__name__}")


def load(taken: frozenset[str] = frozenset()) -> Declared:
    """Load every entry point of :data:`GROUP` (in the order of their ``dist:name``).

    ``taken`` holds the target names already registered: a declared name among them, or one
    declared twice, is a problem, and the target is left out. A name must look like
    ``prefix:name``. Never raises for a bad entry point.
    """
    found: list[tuple[str, BuiltinTarget]] = []
    problems: list[str] = []
    names = set(taken)
    points = sorted(importlib.metadata.entry_points(group=GROUP),
                    key=lambda ep: (getattr(ep.dist, "name", "") or "", ep.name))
    for point in points:
        source = f"{getattr(point.dist, 'name', None) or '?'}:{point.name}"
        where = f"entry point {source} ({GROUP} = {point.value!r})"
        try:
            declared = _targets_of(point.load())
        except Exception as exc:  # the other package's failure: reported, never raised
            problems.append(f"{where}: {type(exc).__name__}: {exc}")
            continue
        for target in declared:
            if ":" not in target.name:
                problems.append(f"{where}: target names look like 'prefix:name', got "
                                f"{target.name!r}")
            elif target.name in names:
                problems.append(f"{where}: the target name {target.name!r} is already taken")
            else:
                names.add(target.name)
                found.append((source, target))
    return Declared(tuple(found), tuple(problems))
