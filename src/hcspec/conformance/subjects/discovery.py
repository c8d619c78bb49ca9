"""The registry of built-in targets: every ``TARGETS`` tuple of
:mod:`hcspec.conformance.adapters.declarations` (one declarations module per adapter module,
read without importing an adapter, torch or a third-party package) and the targets other
packages declare through the ``hcspec.targets`` entry points, registered in :data:`BUILTIN`
when this module is imported. :mod:`hcspec.conformance.subjects.targets` resolves names against it
and re-exports it."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
import warnings
from typing import Any, Final

from hcspec.conformance import adapters
from hcspec.conformance.adapters import declarations
from hcspec.conformance.adapters._builtin import BuiltinTarget

BUILTIN: Final[dict[str, BuiltinTarget]] = {}
"""Every built-in target by name, filled from the declarations modules' ``TARGETS`` at import."""


def register_builtin(target: BuiltinTarget) -> None:
    """Add a built-in TARGET name.

    Raises:
        ValueError: the name is already registered or is not ``prefix:name``.
    """
    if ":" not in target.name:
        raise ValueError(f"built-in target names look like 'prefix:name', got {target.name!r}")
    if target.name in BUILTIN:
        raise ValueError(f"built-in target {target.name!r} is already registered")
    BUILTIN[target.name] = target


def _public_modules(package: Any) -> list[str]:
    return sorted(f"{package.__name__}.{info.name}"
                  for info in pkgutil.iter_modules(package.__path__)
                  if not info.name.startswith("_") and not info.ispkg)


def adapter_modules() -> list[str]:
    """The adapter modules: every public module of :mod:`hcspec.conformance.adapters`
    (names not starting with ``_``; not the ``declarations`` package), sorted. Listing them
    imports none."""
    return _public_modules(adapters)


def declaration_modules() -> list[str]:
    """The declarations modules: every public module of
    :mod:`hcspec.conformance.adapters.declarations` (one per adapter module, same name),
    sorted."""
    return _public_modules(declarations)


def declared_targets(module_name: str) -> tuple[BuiltinTarget, ...]:
    """The ``TARGETS`` a declarations module declares (importing it; it imports neither torch
    nor the package it declares targets for).

    Raises:
        TypeError: the module has no ``TARGETS`` tuple of :class:`BuiltinTarget` (a module
            that declares none says ``TARGETS = ()``).
    """
    module = importlib.import_module(module_name)
    declared = getattr(module, "TARGETS", None)
    if not isinstance(declared, tuple) or not all(
            isinstance(t, BuiltinTarget) for t in declared):
        raise TypeError(f"declarations module {module_name} must declare TARGETS, a tuple of "
                        f"BuiltinTarget (empty when it declares none), got {declared!r}")
    return declared


PLUGIN_TARGETS: Final[dict[str, str]] = {}
"""The targets other packages declare through the ``hcspec.targets`` entry points
(:mod:`hcspec.conformance.subjects.plugins`): target name -> ``dist:entry point``; they are in
:data:`BUILTIN` too."""


def discover_plugins() -> list[str]:
    """Register the targets that the ``hcspec.targets`` entry points declare and are not
    registered yet (called at import; call again after installing a package in-process).
    Returns the problems (a bad entry point, a name already taken), each also issued as a
    :class:`RuntimeWarning`; never raises for another package's entry point."""
    from hcspec.conformance.subjects import plugins

    declared = plugins.load(frozenset(n for n in BUILTIN if n not in PLUGIN_TARGETS))
    problems = list(declared.problems)
    for source, target in declared.targets:
        if PLUGIN_TARGETS.get(target.name) == source:
            continue  # registered by an earlier call
        if target.name in BUILTIN:
            problems.append(f"entry point {source}: the target name {target.name!r} is already "
                            f"taken by the entry point {PLUGIN_TARGETS[target.name]}")
            continue
        register_builtin(target)
        PLUGIN_TARGETS[target.name] = source
    for problem in problems:
        warnings.warn(f"hcspec: {problem}", RuntimeWarning, stacklevel=2)
    return problems


def _discover() -> None:
    for module_name in declaration_modules():
        for target in declared_targets(module_name):
            register_builtin(target)
    discover_plugins()


_discover()
