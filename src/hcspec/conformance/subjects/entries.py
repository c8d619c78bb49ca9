"""One entry per target: the expected-failures files generated from the targets' declarations.

A built-in target's declaration (:class:`hcspec.conformance.adapters._builtin.BuiltinTarget`, in
its module of :mod:`hcspec.conformance.adapters.declarations`) carries everything known about
it besides its adapter: the version it was written for, how CI installs and runs it
(:class:`~hcspec.conformance.adapters._builtin.Lane`) and its findings
(:class:`~hcspec.conformance.adapters._builtin.Finding`, one per root cause, scoped by property
globs, dtypes and profiles). The files ``.ci/expected-failures/PREFIX/NAME.txt`` that the CI
lanes pass to ``hc-conformance run --expected-failures`` are rendered from them
(:func:`render`): one ``PROPERTY: classification: reason, reproducer`` line per property a
finding scopes under the lane's profile, in the format of
:mod:`hcspec.conformance.subjects.expected`, which users keep writing by hand for their own targets.

The files stay committed, generated, and checked: ``python -m hcspec.conformance.subjects.expected
--write`` (or ``python -m hcspec.conformance.subjects.entries --write``) rewrites them, ``--check``
(the default) exits 1 naming every file that differs from its declaration, and the test suite
and ``.ci/thirdparty`` run the check. The same command writes ``docs/findings/index.md``, one
row per root cause (:func:`findings_index`). Committed rather than made at run time because the
lanes (``.ci/lanes/*``) and users read them as plain files without importing hcspec's declarations
in the lane's environment, a review shows the expected failures a change adds or removes, and
they change only when a declaration does (nothing in them depends on the kit's sources).

Nothing here imports torch, an adapter or a third-party package.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

__all__ = ["FOLDER", "INDEX", "Entry", "entries", "expected_failures", "findings_index", "main",
           "render", "rendered", "scoped", "stale", "write"]

FOLDER: Final = Path(".ci", "expected-failures")
"""The expected-failures files' folder, relative to the repository root."""

COMMAND: Final = "python -m hcspec.conformance.subjects.expected --write"
"""The command that rewrites the generated files."""


@dataclass(frozen=True)
class Entry:
    """A built-in target with the declarations module that declares it.

    Attributes:
        target: the declaration.
        module: the declarations module's name.
    """

    target: BuiltinTarget
    module: str

    @property
    def path(self) -> Path:
        """The expected-failures file, relative to the repository root
        (``.ci/expected-failures/PREFIX/NAME.txt``)."""
        prefix, _, name = self.target.name.partition(":")
        return FOLDER / prefix / f"{name}.txt"


def entries() -> list[Entry]:
    """Every built-in target that declares a CI lane, with its declarations module, in the
    order of the modules and their ``TARGETS`` (imports the declarations only)."""
    from hcspec.conformance.subjects.targets import declaration_modules, declared_targets

    return [Entry(target, module) for module in declaration_modules()
            for target in declared_targets(module) if target.lane is not None]


def _check_profiles(target: BuiltinTarget) -> None:
    """Raises ValueError when the lane or a finding names a profile that is not registered."""
    from hcspec.conformance.profiles import PROFILE_NAMES

    named = [(f"finding {f.key!r}", p) for f in target.findings for p in f.profiles]
    if target.lane is not None and target.lane.profile is not None:
        named.append(("its lane", target.lane.profile))
    for where, name in named:
        if name not in PROFILE_NAMES:
            raise ValueError(f"{target.name}: {where} names the profile {name!r}, which is not "
                             f"one of {', '.join(PROFILE_NAMES)}")


def scoped(target: BuiltinTarget, profile: str | None = None) -> list[Finding]:
    """The findings of ``target`` that apply under ``profile`` (default: its lane's; a target
    without a lane, or whose lane does not run it, has its findings for every profile): those
    with no profiles, or with ``profile`` among them.

    Raises:
        ValueError: the lane or a finding names a profile that is not registered.
    """
    _check_profiles(target)
    if profile is None and target.lane is not None:
        profile = target.lane.profile
    return [f for f in target.findings
            if not f.profiles or profile is None or profile in f.profiles]


def _line(pid: str, finding: Finding) -> str:
    note = finding.notes.get(pid)
    reason = f"{finding.reason}; {note}" if note else finding.reason
    dtypes = f" (in {', '.join(finding.dtypes)})" if finding.dtypes else ""
    evidence = finding.reproducer or finding.page
    return f"{pid}: {finding.classification}: {reason}{dtypes}, {evidence} [{finding.key}]"


def expected_failures(target: BuiltinTarget, profile: str | None = None) -> dict[str, str]:
    """``{property id or glob: reason}`` for ``target`` under ``profile`` (as :func:`scoped`),
    in the form :func:`hcspec.conformance.subjects.expected.expand` takes (the pytest helper's
    ``expected_failures=``).

    Raises:
        ValueError: two findings of the target scope the same id or glob, or as
            :func:`scoped`.
    """
    out: dict[str, str] = {}
    for finding in scoped(target, profile):
        for pid in finding.properties:
            if pid in out:
                raise ValueError(f"{target.name}: {pid} is scoped by two findings (the second "
                                 f"is {finding.key!r}); one root cause, one finding")
            out[pid] = _line(pid, finding).partition(": ")[2]
    return out


def _comment(text: str) -> Iterator[str]:
    for line in textwrap.wrap(text, width=98, break_on_hyphens=False, break_long_words=False):
        yield f"# {line}"


def _header(entry: Entry, lane: Lane) -> Iterator[str]:
    target = entry.target
    yield from _comment(f"Generated by `{COMMAND}` from the declaration of TARGET "
                        f"{target.name} ({entry.module}): edit its findings there, not this file.")
    version = f" {target.written_for}" if target.written_for else ""
    yield from _comment(f"{target.distribution}{version}; lane {lane.script}: {lane.install}")
    if lane.profile is None:
        yield "# Not run by the lane: listed only."
    else:
        yield f"# Known findings under the {lane.profile} profile."
    if lane.note:
        yield from _comment(lane.note)
    pages = sorted({f.page for f in target.findings})
    if pages:
        yield f"# Classifications and reproducers: {', '.join(pages)}"


def render(entry: Entry) -> str:
    """The expected-failures file of ``entry``: a header of comments (generated from what,
    the package and its version, the lane, the profile, the lane's note, the findings pages),
    then one ``PROPERTY: classification: reason, reproducer [key]`` line per property (or
    glob) of each finding that applies under the lane's profile, or ``# none: ...``.

    Raises:
        ValueError: the target has no lane, or two findings scope the same id or glob.
    """
    lane = entry.target.lane
    if lane is None:
        raise ValueError(f"{entry.target.name}: declares no CI lane, so it has no file")
    lines = list(_header(entry, lane))
    body = [f"{pid}: {reason}" for pid, reason in
            expected_failures(entry.target, lane.profile).items()]
    if not body:
        body = ["# none: every applicable property passes" if lane.profile is not None
                else "# none listed (the lane does not run it)"]
    lines += body
    return "\n".join(lines) + "\n"


INDEX: Final = Path("docs", "findings", "index.md")
"""The generated table of every declared finding, relative to the repository root."""


def _from_findings(path: str) -> str:
    """``path`` (from the repository root) as a link from ``docs/findings/``."""
    return Path(path).relative_to(INDEX.parent).as_posix() if path.startswith(
        f"{INDEX.parent.as_posix()}/") else f"/{path}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def findings_index() -> str:
    """``docs/findings/index.md``: every finding of every built-in target, one row per root
    cause (per distribution and key) with its classification, the targets that show it, the
    properties it scopes (their union over those targets), its dtypes and profiles, its reason
    and its evidence, grouped by distribution."""
    rows: dict[tuple[str, str], list[tuple[BuiltinTarget, Finding]]] = {}
    from hcspec.conformance.subjects.targets import declaration_modules, declared_targets

    for module in declaration_modules():
        for target in declared_targets(module):
            for finding in target.findings:
                rows.setdefault((target.distribution, finding.key), []).append(
                    (target, finding))
    lines = [
        "# Known findings, by root cause",
        "",
        f"Generated by `{COMMAND}` from the targets' declarations",
        "(`conformance/adapters/declarations/*.py`); edit a finding there, not here. Each row is",
        "one root cause: the targets that show it, the properties it makes fail (their",
        "`.ci/expected-failures` lines), and its evidence. *bug*: the package's; *convention*: a",
        "deliberate, declared difference from the paper; *limitation*: ours (the kit's, the",
        "adapter's or the environment's). The pages beside this one tell each finding in full.",
    ]
    for distribution in sorted({d for d, _ in rows}):
        lines += ["", f"## {distribution}", "",
                  "| finding | class | targets | properties | scope | reason | evidence |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for (dist, key), shown in sorted(rows.items()):
            if dist != distribution:
                continue
            first = shown[0][1]
            names = ", ".join(f"`{t.name}`" for t, _ in shown)
            props = ", ".join(f"`{p}`" for p in sorted({p for _, f in shown for p in f.properties}))
            scope = "; ".join(part for part in (
                ", ".join(first.dtypes), ", ".join(f"`{p}` profile" for p in first.profiles))
                if part) or "all"
            evidence = [f"[page]({_from_findings(first.page)})"]
            if first.reproducer:
                evidence.append(f"[reproducer]({_from_findings(first.reproducer)})")
            lines.append(f"| `{key}` | {first.classification} | {names} | {props} | {scope} | "
                         f"{_cell(first.reason)} | {', '.join(evidence)} |")
    return "\n".join(lines) + "\n"


def rendered() -> dict[Path, str]:
    """Every generated file (relative path -> text): the expected-failures files and
    :data:`INDEX`.

    Raises:
        ValueError: as :func:`render`, or two targets map to one file.
    """
    out: dict[Path, str] = {}
    for entry in entries():
        if entry.path in out:
            raise ValueError(f"two targets write {entry.path}")
        out[entry.path] = render(entry)
    out[INDEX] = findings_index()
    return out


def stale(root: Path) -> list[str]:
    """What differs between the files under ``root`` and the declarations: one line per
    missing, different or extra (no target declares it) ``.txt`` file, sorted; [] when every
    file is current."""
    want = rendered()
    problems = []
    for path, text in want.items():
        file = root / path
        if not file.is_file():
            problems.append(f"{path}: missing")
        elif file.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: differs from its declaration")
    problems += [f"{path.relative_to(root)}: no built-in target with a lane declares it"
                 for path in sorted((root / FOLDER).glob("*/*.txt"))
                 if path.relative_to(root) not in want]
    return sorted(problems)


def write(root: Path) -> list[Path]:
    """Rewrite every generated file under ``root`` and delete the ``.txt`` files no target
    declares; returns the paths written or deleted (relative), sorted."""
    want = rendered()
    changed: list[Path] = []
    for path, text in want.items():
        file = root / path
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
            changed.append(path)
    for file in sorted((root / FOLDER).glob("*/*.txt")):
        if file.relative_to(root) not in want:
            file.unlink()
            changed.append(file.relative_to(root))
    return sorted(changed)


def main(argv: Sequence[str] | None = None) -> int:
    """``--check`` (default): exit 1 listing the stale files; ``--write``: rewrite them.
    ``--root`` is the repository root (default: the current folder)."""
    parser = argparse.ArgumentParser(
        prog="python -m hcspec.conformance.subjects.expected",
        description="Generate .ci/expected-failures/*/*.txt from the targets' declarations.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the files")
    mode.add_argument("--check", action="store_true", help="fail when a file is stale (default)")
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    args = parser.parse_args(argv)
    if args.write:
        for path in write(args.root):
            print(f"wrote {path}")
        return 0
    problems = stale(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"the expected-failures files are stale: run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
