"""Resolving a TARGET string to a factory.

TARGET forms:

* a built-in name ``prefix:name`` in :data:`BUILTIN`: hcspec's reference
  (``reference:hc-static``, ``reference:hc-dynamic``, ``reference:mhc``, ...) and adapters for
  third-party packages (``hyper_connections:mhc``, ``mhc_pytorch:mhc``, ...), which load only
  when their package is importable (``hc-conformance targets`` lists them all). Each adapter
  module in :mod:`hcspec.conformance.adapters` has a declarations module of the same name in
  :mod:`hcspec.conformance.adapters.declarations` with its ``TARGETS`` tuple of
  :class:`BuiltinTarget`; this module discovers them at import (:func:`declaration_modules`)
  without importing an adapter, torch or a third-party package, so that ``--help`` and
  ``hc-conformance targets`` stay fast; other packages add theirs through the entry-point group
  ``hcspec.targets`` (:mod:`hcspec.conformance.subjects.plugins`, :func:`discover_plugins`);
* ``package.module:factory`` — any importable module (the current directory is importable)
  and the name of a factory in it (dotted attribute paths such as ``module:Class.make`` work);
* ``path/to/file.py:factory`` — a Python file, loaded by path and registered in
  ``sys.modules`` under its stem (its own folder is importable while it loads).

A TARGET without ``:factory`` naming a file or module here gets a "did you mean"
(``hc_adapter.py`` → ``hc_adapter:make``), an unknown built-in name the closest one.

The environment variable :data:`ENV_VAR` (``HC_CONFORMANCE_TARGET``) supplies a TARGET where the
CLI argument or the pytest option is not given.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from hcspec.conformance.adapters._builtin import BuiltinTarget
from hcspec.conformance.subjects.discovery import (
    BUILTIN,
    PLUGIN_TARGETS,
    adapter_modules,
    declaration_modules,
    declared_targets,
    discover_plugins,
    register_builtin,
)

if TYPE_CHECKING:
    from hcspec.conformance.protocol import Factory

__all__ = [
    "BUILTIN", "DEFAULT_TARGET", "ENV_VAR", "PLUGIN_TARGETS", "BuiltinStatus", "BuiltinTarget",
    "Target", "TargetError", "adapter_modules", "builtin_status", "declaration_modules",
    "declared_targets", "describe", "discover_plugins", "importable_folders", "package_problem",
    "providers", "register_builtin", "resolve",
]

ENV_VAR: Final = "HC_CONFORMANCE_TARGET"
DEFAULT_TARGET: Final = "reference:mhc"


class TargetError(ValueError):
    """A TARGET that cannot be resolved: malformed, unknown built-in, import failure (the
    message includes the import error and its traceback), or a missing/non-callable factory."""




@dataclass(frozen=True)
class Target:
    """A resolved target.

    Attributes:
        name: the TARGET string (or the factory's qualified name when given a callable).
        factory: the factory.
        description: what it is.
        versions: distribution name -> version for the report.
        sharded: the factory the ``parallel`` family runs: the built-in's declared
            ``sharding`` factory (options bound as for ``factory``), else ``factory`` itself
            (whose impls may declare the sharding capability).
    """

    name: str
    factory: Factory
    description: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    sharded: Factory | None = None

    @property
    def sharding_factory(self) -> Factory:
        """:attr:`sharded`, else :attr:`factory`."""
        return self.sharded if self.sharded is not None else self.factory


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def importable_folders(*folders: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, the current folder (and each of ``folders``) is importable: put at
    the front of ``sys.path`` where it is not there already, and taken out again after the
    block (``sys.path`` is left as it was found, whatever the block did to the rest of it).

    A factory imports its own project's modules when it likes, e.g. inside ``make``: the
    folder must stay importable for the whole run, not only while the TARGET is imported,
    so that the ``hc-conformance`` script (whose ``sys.path[0]`` is the script's folder) and
    ``python -m hcspec.conformance`` (whose ``sys.path[0]`` is the current folder) behave the
    same. The runner (:func:`hcspec.conformance.run.session.check_implementation`) and the pytest
    plugin run the target inside this block.
    """
    added: list[str] = []
    for given in (os.getcwd(), *folders):
        folder = os.path.abspath(os.fspath(given))
        if folder in sys.path or folder in added or (folder == os.getcwd() and "" in sys.path):
            continue
        sys.path.insert(0, folder)
        added.append(folder)
    try:
        yield
    finally:
        for folder in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)


def _suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``choices`` to ``word`` (a built-in name
    ending in ``:word``, hcspec's reference first, else difflib's closest), '' when none is
    close."""
    names = sorted(choices, key=lambda name: not name.startswith("reference:"))
    close = [n for n in names if n.endswith(":" + word)] or difflib.get_close_matches(
        word, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _factory_names(file: Path) -> list[str]:
    """The top-level functions and classes of the Python file ``file`` (read with :mod:`ast`,
    never run), ``make`` first where it exists; [] when the file cannot be parsed."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    names = [node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]
    return sorted(names, key=lambda name: name != "make")


def _did_you_mean_module(path: str) -> str | None:
    """A one-line suggestion for a TARGET without ``:factory``: a Python file
    (``hc_adapter.py``, ``src/hc_adapter.py``) or a module name (``hc_adapter``) of which a file
    exists here, with its factory (``make`` when the file defines one); None otherwise."""
    file = Path(path) if path.endswith(".py") else Path(*path.split(".")).with_suffix(".py")
    if not file.is_file():
        return None
    names = _factory_names(file)
    factory = names[0] if names else "FACTORY"
    module = path.removesuffix(".py") if "/" not in path and os.sep not in path else None
    forms = ([f"{module.replace('/', '.')}:{factory}"] if module else []) + [f"{file}:{factory}"]
    return " or ".join(repr(form) for form in forms)


_PATH_TARGET = re.compile(r"^(?P<file>.+\.py):(?P<attr>[A-Za-z_][\w.]*)$")
"""``path/to/file.py:factory``: a TARGET naming a Python file."""


def _load_file(file: Path, what: str, path: str) -> object:
    """The module of the Python file ``file``, loaded by path and registered in
    ``sys.modules`` (TorchDynamo and pickle look a function's module up there) under the
    file's stem, or ``hc_target_<stem>`` when that name is taken by another module.

    Raises:
        TargetError: the file does not exist, or running it raised (with the traceback).
    """
    file = file.resolve()
    if not file.is_file():
        raise TargetError(f"{what} {path!r}: there is no file {str(file)!r}")
    name = file.stem
    taken = sys.modules.get(name)
    if taken is not None:
        if getattr(taken, "__file__", None) and Path(str(taken.__file__)).resolve() == file:
            return taken
        name = f"hc_target_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise TargetError(f"{what} {path!r}: {str(file)!r} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with importable_folders(file.parent):
            spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed: shown in full
        sys.modules.pop(name, None)
        raise TargetError(f"{what} {path!r}: running {str(file)!r} failed: "
                          f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
    return module


def _import_attribute(path: str, what: str) -> object:
    by_file = _PATH_TARGET.match(path)
    if by_file is not None:
        obj: object = _load_file(Path(by_file["file"]), what, path)
        module_name, attr_path = by_file["file"], by_file["attr"]
        return _attribute(obj, path, what, module_name, attr_path)
    module_name, _, attr_path = path.partition(":")
    if not module_name or not attr_path:
        suggestion = _did_you_mean_module(module_name or path)
        if suggestion is not None:
            raise TargetError(f"{what} {path!r} names no factory: did you mean {suggestion}?")
        raise TargetError(
            f"{what} {path!r}: expected 'package.module:factory', 'path/to/file.py:factory' or "
            f"a built-in name{_suggest(path, BUILTIN)} (hc-conformance targets lists them)"
        )
    try:
        with importable_folders():  # modules in the current folder import, as with `python -m`
            obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not _names_the_module(exc, module_name):  # a dependency of the module is missing
            raise TargetError(
                f"{what} {path!r}: importing {module_name!r} failed: "
                f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
        raise TargetError(
            f"{what} {path!r}: there is no module {exc.name!r} (searched the current "
            f"directory and sys.path); give package.module:factory of an importable module, "
            f"path/to/file.py:factory, or a built-in name (hc-conformance targets lists them)"
        ) from None
    except Exception as exc:  # any import-time failure is the user's, shown in full
        raise TargetError(
            f"{what} {path!r}: importing {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from exc
    return _attribute(obj, path, what, module_name, attr_path)


def _attribute(obj: object, path: str, what: str, module_name: str, attr_path: str) -> object:
    """``obj.<attr_path>`` (a dotted path), checked to be callable.

    Raises:
        TargetError: an attribute is missing (with the closest name, difflib) or the result is
            not callable.
    """
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("_")]
            raise TargetError(
                f"{what} {path!r}: module {module_name!r} has no attribute {attr_path!r}"
                f"{_suggest(part, names)}"
            ) from None
    if not callable(obj):
        raise TargetError(f"{what} {path!r}: {attr_path!r} is not callable")
    return obj


def _names_the_module(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether the missing module is ``module_name`` itself or a package above it (the TARGET
    is mistyped or not on the path), not a module that ``module_name`` imports."""
    missing = exc.name or ""
    return bool(missing) and (module_name == missing or module_name.startswith(missing + "."))


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
        problem = package_problem(builtin)
        if problem is not None:
            raise TargetError(f"TARGET {target!r}: {problem}")
        factory: Any = _import_attribute(builtin.factory_path, "built-in target")
        sharded: Any = (None if builtin.sharding is None
                        else _import_attribute(builtin.sharding, "sharding factory"))
        if builtin.options:
            factory = _bind_options(factory, builtin.options)
            sharded = None if sharded is None else _bind_options(sharded, builtin.options)
        description = describe(builtin)
        if builtin.options:
            description += f" [options: {builtin.options_text}]"
        if builtin.distribution != "hcspec":
            found = _version(builtin.distribution) or "unknown"
            versions[builtin.distribution] = found
            if builtin.written_for is not None and found != builtin.written_for:
                description += (f" [adapter written for {builtin.distribution} "
                                f"{builtin.written_for}, found {found}]")
        return Target(target, factory, description, versions, sharded)
    prefix = target.partition(":")[0]
    if any(name.startswith(prefix + ":") for name in BUILTIN) and "." not in prefix:
        known = ", ".join(sorted(n for n in BUILTIN if n.startswith(prefix + ":")))
        raise TargetError(f"unknown built-in target {target!r}{_suggest(target, BUILTIN)}; "
                          f"known: {known}")
    factory = _import_attribute(target, "TARGET")
    top = prefix.split(".")[0]
    version = None if _PATH_TARGET.match(target) or not top else _version(top)
    if version is not None:
        versions[top] = version
    return Target(target, factory, _first_doc_line(factory), versions)


def _first_doc_line(factory: object) -> str:
    """The first line of the factory's docstring, without markup; for a
    :func:`functools.partial` the wrapped function's (a partial's own docstring describes
    ``partial``), with the bound arguments appended."""
    bound = ""
    if isinstance(factory, functools.partial):
        bound = ", ".join(f"{k}={v!r}" for k, v in factory.keywords.items())
        factory = factory.func
    doc = (getattr(factory, "__doc__", "") or "").strip().splitlines()
    line = plain_text(doc[0]) if doc else ""
    return f"{line} [{bound}]" if bound else line


_RST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_RST_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(line: str) -> str:
    """A docstring line without reStructuredText markup, for the terminal and reports:
    ``` ``x`` ``` and ``:role:`x` `` become ``x``."""
    return _RST_LITERAL.sub(r"\1", _RST_ROLE.sub(r"\1", line))


def describe(builtin: BuiltinTarget) -> str:
    """``builtin``'s description with its ``detail`` sentence, when it declares one (calling
    the detail function, which may import torch: call this only for a usable target)."""
    if builtin.detail is None:
        return builtin.description
    detail = cast("Callable[[], str]", _import_attribute(builtin.detail, "description detail"))
    return f"{builtin.description}; {detail()}"


def _bind_options(factory: Any, options: Mapping[str, Any]) -> Factory:
    bound = functools.partial(factory, **options)
    functools.update_wrapper(bound, factory)
    result: Factory = bound
    return result


def providers(import_name: str) -> list[str]:
    """The installed distributions that provide the top-level module ``import_name``
    (more than one means their files overwrite each other)."""
    return sorted(set(importlib.metadata.packages_distributions().get(import_name, [])))


def package_problem(builtin: BuiltinTarget) -> str | None:
    """Why ``builtin``'s package cannot be used here, or None when it can: not importable
    (with the import error), or its import name provided by another distribution than the one
    the adapter was written for (the ``mhc`` clash), or what the declared ``available``
    check says."""
    if builtin.available is not None:
        check = cast("Callable[[], str | None]",
                     _import_attribute(builtin.available, "availability check"))
        reason = check()
        if reason is not None:
            return f"needs the package {builtin.distribution!r}: {reason}"
    if builtin.requires is None:
        return None
    try:
        importlib.import_module(builtin.requires)
    except Exception as exc:  # any import-time failure: shown to the user
        what = "import name" if "." not in builtin.requires else "module"
        return (f"needs the package {builtin.distribution!r} ({what} "
                f"{builtin.requires!r}), which does not import: {type(exc).__name__}: {exc}")
    top = builtin.requires.partition(".")[0]
    found = providers(top)
    if found and builtin.distribution not in found:
        return (f"the import name {top!r} is provided by {', '.join(found)}, not by "
                f"{builtin.distribution!r}: a different package with the same import name is "
                "installed (install the two in separate environments)")
    if len(found) > 1:
        return (f"the import name {top!r} is provided by several distributions "
                f"({', '.join(found)}): their files overwrite each other; use one environment "
                f"per package")
    return None


@dataclass(frozen=True)
class BuiltinStatus:
    """One row of ``hc-conformance targets``.

    Attributes:
        target: the built-in target.
        importable: its package imports (and is the right distribution).
        version: the installed version of its distribution (None when not installed).
        problem: why it is not usable ('' when it is).
    """

    target: BuiltinTarget
    importable: bool
    version: str | None
    problem: str = ""


def builtin_status() -> list[BuiltinStatus]:
    """Every built-in target with whether its package imports, the version found and why it
    cannot be used (for the ``targets`` subcommand). Never raises for a missing package."""
    rows: list[BuiltinStatus] = []
    for name in sorted(BUILTIN):
        builtin = BUILTIN[name]
        problem = package_problem(builtin)
        version = _version(builtin.distribution) or (
            "source tree" if builtin.distribution == "hcspec" else None)
        rows.append(BuiltinStatus(builtin, problem is None, version, problem or ""))
    return rows
