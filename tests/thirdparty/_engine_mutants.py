"""Mutants of a serving engine's Triton kernel, made at import: the installed module's source
with one change in one ``@triton.jit`` function, written to a temporary file and imported
from there under a new name (Triton reads a kernel's source from its file, so an ``exec`` of
the text would not do). Nothing of the engine is copied into the repository: the text is the
installed wheel's, read at test time.
"""

from __future__ import annotations

import importlib.util
import inspect
import pathlib
from types import ModuleType

from hcspec.conformance.outputs.report import Report


def function_span(source: str, name: str) -> tuple[int, int]:
    """``(start, end)`` of the top-level ``def name`` in ``source`` (up to the next top-level
    statement).

    Raises:
        LookupError: no such function.
    """
    start = source.find(f"\ndef {name}(")
    if start < 0:
        raise LookupError(f"no top-level function {name}")
    end = start + 1
    while True:
        nxt = source.find("\n", end)
        if nxt < 0 or nxt + 1 >= len(source):
            return start, len(source)
        line_start = nxt + 1
        if source[line_start] not in " \t\n)" and not source.startswith("#", line_start):
            return start, line_start
        end = line_start


def mutate(module: ModuleType, function: str, replacements: list[tuple[str, str]],
           tmp: pathlib.Path, *, drop: list[str] | None = None) -> ModuleType:
    """The module with each ``(old, new)`` applied inside ``function`` (each ``old`` must be
    there), and each line starting with a text of ``drop`` removed from the whole module
    (statements that must not run twice, e.g. a custom-op registration), imported from a file
    in ``tmp``.

    Raises:
        AssertionError: an ``old`` text is not found in the function (the engine changed).
    """
    source = inspect.getsource(module)
    start, end = function_span(source, function)
    body = source[start:end]
    for old, new in replacements:
        assert old in body, f"{function}: {old!r} not found (the engine changed)"
        body = body.replace(old, new)
    source = source[:start] + body + source[end:]
    if drop:
        source = _drop_statements(source, drop)
    path = tmp / f"mutant_{function}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"hcspec_mutant_{function}_{id(path)}", path)
    assert spec is not None and spec.loader is not None
    mutant = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutant)
    return mutant


def _drop_statements(source: str, prefixes: list[str]) -> str:
    """Comment out every top-level statement that starts with one of ``prefixes`` (through its
    closing parenthesis at column 0)."""
    out: list[str] = []
    skipping = False
    for line in source.splitlines(keepends=True):
        if not skipping and any(line.startswith(p) for p in prefixes):
            skipping = not line.rstrip().endswith(")")
            out.append("# " + line)
            continue
        if skipping:
            out.append("# " + line)
            skipping = line.rstrip() != ")"
            continue
        out.append(line)
    return "".join(out)


def failed(report: Report) -> list[str]:
    """The ids of the properties that failed or errored in ``report``."""
    return [r.id for r in report.results if r.status in ("failed", "error")]
