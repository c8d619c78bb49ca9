"""Resolving a TARGET string to a factory.

TARGET forms:

* a built-in name ``prefix:name`` registered in :data:`BUILTIN` (``reference:hc-static``,
  ``reference:hc-dynamic``, ``reference:mhc``; adapters for other packages register here too);
* ``package.module:factory`` — any importable module (the current directory is importable)
  and the name of a factory in it (dotted attribute paths such as ``module:Class.make`` work).

The environment variable :data:`ENV_VAR` (``HC_CONFORMANCE_TARGET``) supplies a TARGET where the
CLI argument or the pytest option is not given.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Final

from conformance.protocol import Factory

ENV_VAR: Final = "HC_CONFORMANCE_TARGET"
DEFAULT_TARGET: Final = "reference:mhc"


class TargetError(ValueError):
    """A TARGET that cannot be resolved: malformed, unknown built-in, import failure (the
    message includes the import error and its traceback), or a missing/non-callable factory."""


@dataclass(frozen=True)
class BuiltinTarget:
    """A built-in TARGET name.

    Attributes:
        name: ``prefix:name``.
        factory_path: ``module:attribute`` of the factory (imported lazily).
        description: one line for ``hc-conformance targets``.
        requires: the import name of the package the adapter needs (None: hcspec's own).
        distribution: the distribution whose version the report shows.
    """

    name: str
    factory_path: str
    description: str
    requires: str | None = None
    distribution: str = "hcspec"


BUILTIN: Final[dict[str, BuiltinTarget]] = {}


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


for _kind, _fn, _what in (
    ("hc-static", "make_hc_static", "static HC (HC §2.2)"),
    ("hc-dynamic", "make_hc_dynamic", "dynamic HC (HC §2.3)"),
    ("mhc", "make_mhc", "mHC (mHC §4, Sinkhorn–Knopp, 20 rounds)"),
    ("mhc-fast", "make_mhc_fast", "mHC, fast path (same math as reference:mhc)"),
):
    register_builtin(BuiltinTarget(
        f"reference:{_kind}", f"conformance.adapters.reference:{_fn}",
        f"hcspec reference implementation: {_what}",
    ))


@dataclass(frozen=True)
class Target:
    """A resolved target.

    Attributes:
        name: the TARGET string (or the factory's qualified name when given a callable).
        factory: the factory.
        description: what it is.
        versions: distribution name -> version for the report.
    """

    name: str
    factory: Factory
    description: str = ""
    versions: dict[str, str] = field(default_factory=dict)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_attribute(path: str, what: str) -> object:
    module_name, _, attr_path = path.partition(":")
    if not module_name or not attr_path:
        raise TargetError(
            f"{what} {path!r}: expected 'package.module:factory' or a built-in name "
            f"({', '.join(sorted(BUILTIN))})"
        )
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:  # modules in the current directory are importable, as with `python -m`
        sys.path.insert(0, cwd)
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's, shown in full
        raise TargetError(
            f"{what} {path!r}: importing {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from exc
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(
                f"{what} {path!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if not callable(obj):
        raise TargetError(f"{what} {path!r}: {attr_path!r} is not callable")
    return obj


def resolve(target: str | Factory | None) -> Target:
    """Resolve a TARGET string (or a factory) to a :class:`Target`.

    ``None`` reads :data:`ENV_VAR`.

    Raises:
        TargetError: nothing selected, or as described on the class.
    """
    if target is None:
        target = os.environ.get(ENV_VAR) or None
        if target is None:
            raise TargetError(
                f"no target selected: give a TARGET (e.g. {DEFAULT_TARGET} or "
                f"package.module:factory) or set {ENV_VAR}"
            )
    if callable(target):
        name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
        return Target(name, target, getattr(target, "__doc__", "") or "")
    if not isinstance(target, str) or not target.strip():
        raise TargetError(f"TARGET: expected a non-empty string, got {target!r}")
    target = target.strip()
    versions = {"hcspec": _version("hcspec") or "not installed (source tree)"}
    builtin = BUILTIN.get(target)
    if builtin is not None:
        if builtin.requires is not None:
            try:
                importlib.import_module(builtin.requires)
            except Exception as exc:
                raise TargetError(
                    f"TARGET {target!r} needs the package {builtin.requires!r}, which does not "
                    f"import: {type(exc).__name__}: {exc}"
                ) from exc
        factory = _import_attribute(builtin.factory_path, "built-in target")
        if builtin.distribution != "hcspec":
            versions[builtin.distribution] = _version(builtin.distribution) or "unknown"
        return Target(target, factory, builtin.description, versions)  # type: ignore[arg-type]
    prefix = target.partition(":")[0]
    if any(name.startswith(prefix + ":") for name in BUILTIN) and "." not in prefix:
        known = ", ".join(sorted(n for n in BUILTIN if n.startswith(prefix + ":")))
        raise TargetError(f"unknown built-in target {target!r}; known: {known}")
    factory = _import_attribute(target, "TARGET")
    top = prefix.split(".")[0]
    version = _version(top)
    if version is not None:
        versions[top] = version
    doc = (getattr(factory, "__doc__", "") or "").strip().splitlines()
    return Target(target, factory, doc[0] if doc else "", versions)  # type: ignore[arg-type]


def builtin_status() -> list[tuple[BuiltinTarget, bool, str]]:
    """Every built-in target with whether its package imports and why not (for the
    ``targets`` subcommand)."""
    rows: list[tuple[BuiltinTarget, bool, str]] = []
    for name in sorted(BUILTIN):
        builtin = BUILTIN[name]
        module = builtin.requires or builtin.factory_path.partition(":")[0]
        try:
            importlib.import_module(module)
        except Exception as exc:
            rows.append((builtin, False, f"{type(exc).__name__}: {exc}"))
        else:
            rows.append((builtin, True, ""))
    return rows

