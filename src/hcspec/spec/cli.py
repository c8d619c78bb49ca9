"""``hc-spec``: prove the registered theorems, list them, and generate/check their docs.

    hc-spec prove [--only ID ...]      prove (all or some) and print a table; exit 1 on a failure
    hc-spec list                       ids, generality and statements
    hc-spec docs [--check] [--out DIR] write docs/derivations/, or check the committed copy

Exit codes: 0 success; 1 a proof failed or the docs are stale; 2 usage error (an unknown id,
``docs`` without ``--out`` outside the hcspec repository, or ``docs --check`` on a directory that
does not exist).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hcspec.spec import docs
from hcspec.spec.registry import ProofResult, Theorem, all_theorems, get

DEFAULT_DOCS_DIR = Path("docs/derivations")


def _select(ids: Sequence[str] | None, console: Console) -> list[Theorem] | None:
    if not ids:
        return all_theorems()
    selected = []
    for theorem_id in dict.fromkeys(ids):
        try:
            selected.append(get(theorem_id))
        except KeyError as error:
            console.print(f"hc-spec: error: {error.args[0]}", markup=False, highlight=False)
            return None
    return selected


def _prove(theorems: Sequence[Theorem]) -> list[ProofResult]:
    return [theorem.prove() for theorem in theorems]


def _cmd_prove(args: argparse.Namespace, out: Console, err: Console) -> int:
    theorems = _select(args.only, err)
    if theorems is None:
        return 2
    start = time.perf_counter()
    results = _prove(theorems)
    total = time.perf_counter() - start
    table = Table(title="hcspec theorems", show_lines=False)
    for column, style in (("id", "bold"), ("statement", ""), ("proven for", ""),
                          ("seconds", ""), ("ok", "")):
        table.add_column(column, style=style, justify="right" if column == "seconds" else "left",
                         overflow="fold")
    for theorem, result in zip(theorems, results, strict=True):
        mark = "[green]yes[/green]" if result.ok else "[red]NO[/red]"
        table.add_row(theorem.id, theorem.statement, f"{theorem.generality}: {theorem.cases}",
                      f"{result.seconds:.2f}", mark)
    out.print(table)
    failed = [r for r in results if not r.ok]
    for result in failed:
        err.print(f"\nNOT PROVEN: {result.theorem_id}\n{result.error}", markup=False,
                  highlight=False)
    out.print(f"{len(results) - len(failed)}/{len(results)} proven in {total:.1f} s",
              markup=False, highlight=False)
    return 1 if failed else 0


def _cmd_list(args: argparse.Namespace, out: Console, err: Console) -> int:
    for theorem in all_theorems():  # plain print: tab-separated lines stay greppable
        print(f"{theorem.id}\t{theorem.generality}\t{theorem.statement}")
    return 0


def in_hcspec_repository(directory: Path) -> bool:
    """True when ``directory`` is the root of an hcspec source tree: a ``pyproject.toml`` naming
    the project ``hcspec`` next to ``spec/registry.py``."""
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file() or not (directory / "spec" / "registry.py").is_file():
        return False
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return any(line.replace(" ", "") == 'name="hcspec"' for line in text.splitlines())


def _cmd_docs(args: argparse.Namespace, out: Console, err: Console) -> int:
    start = time.perf_counter()
    out_dir: Path = args.out if args.out is not None else DEFAULT_DOCS_DIR
    where = f"{out_dir} ({out_dir.resolve()})" if not out_dir.is_absolute() else str(out_dir)
    if args.out is None and not in_hcspec_repository(Path.cwd()):
        verb = "check" if args.check else "write"
        err.print(f"hc-spec docs: {Path.cwd()} is not the hcspec repository; without --out it "
                  f"would {verb} {where}; pass --out DIR to {verb} the pages elsewhere",
                  markup=False, highlight=False, soft_wrap=True)
        return 2
    if args.check and not out_dir.is_dir():
        err.print(f"hc-spec docs --check: there is no directory {where} to check; --out "
                  f"(default {DEFAULT_DOCS_DIR}) is relative to the current directory: run "
                  "from the repository root or pass --out DIR", markup=False, highlight=False,
                  soft_wrap=True)
        return 2
    theorems = all_theorems()
    reused = docs.reusable(theorems, out_dir)
    to_prove = [t for t in theorems if t.id not in reused]
    results = _prove(to_prove)
    failed = [r.theorem_id for r in results if not r.ok]
    if failed:
        err.print(f"hc-spec docs: cannot render, not proven: {', '.join(failed)} "
                  "(run `hc-spec prove` for details)", markup=False, highlight=False)
        return 1
    pages = docs.render(theorems, results, reused)
    timing = (f"{len(to_prove)} proven, {len(reused)} reused unchanged, "
              f"{time.perf_counter() - start:.1f} s")
    if args.check:
        report = docs.check(pages, out_dir)
        if report.ok:
            out.print(f"{out_dir}: {pages_counted(pages)} up to date ({timing})",
                      markup=False, highlight=False)
            return 0
        for kind, names in (("stale", report.stale), ("missing", report.missing),
                            ("extra", report.extra)):
            for name in names:
                err.print(f"{kind}: {out_dir / name}", markup=False, highlight=False)
        err.print(f"checked {where} (--out DIR checks another directory): the pages differ "
                  "from a fresh render; run `hc-spec docs` and commit the result",
                  markup=False, highlight=False)
        return 1
    keys = {docs.page_name(t.id): docs.source_key(t) for t in theorems}
    removed = docs.write(pages, out_dir, keys)
    out.print(f"wrote {pages_counted(pages)} to {out_dir} ({timing})"
              + (f"; removed stale generated pages: {', '.join(removed)}" if removed else ""),
              markup=False, highlight=False)
    return 0


def pages_counted(pages: Mapping[str, str]) -> str:
    """What ``pages`` holds, counted as the user sees the files: ``41 theorem pages and
    index.md`` (one page per theorem, plus the index when present)."""
    theorem_pages = sum(1 for name in pages if name != docs.INDEX)
    text = f"{theorem_pages} theorem page{'s' if theorem_pages != 1 else ''}"
    return text + (f" and {docs.INDEX}" if docs.INDEX in pages else "")


def build_parser() -> argparse.ArgumentParser:
    """The ``hc-spec`` argument parser (subcommands prove, list, docs)."""
    parser = argparse.ArgumentParser(
        prog="hc-spec",
        description="hcspec's specification layer: exact sympy proofs of the Hyper-Connections "
                    "(arXiv:2409.19606) and mHC (arXiv:2512.24880) math.",
        epilog="Exit codes: 0 success, 1 a proof failed or docs are stale, 2 usage error (an "
               "unknown id, or docs --check on a directory that does not exist).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{prove,list,docs}")
    prove = sub.add_parser(
        "prove", help="prove the registered theorems and print a table",
        description="Prove every registered theorem (or those named with --only) and print a "
                    "table: id, statement, cases proven, seconds, ok. Exits 1 if any proof "
                    "fails, 2 if an id is unknown.")
    prove.add_argument("--only", nargs="+", metavar="ID",
                       help="prove only these theorem ids (see `hc-spec list`)")
    prove.set_defaults(handler=_cmd_prove)
    listing = sub.add_parser("list", help="print theorem ids, generality and statements",
                             description="Print every registered theorem: id, how general its "
                                         "proof is (all sizes, induction, explicit sizes, "
                                         "instance) and its statement, one per line "
                                         "(tab-separated).")
    listing.set_defaults(handler=_cmd_list)
    docs_cmd = sub.add_parser(
        "docs", help="write (or --check) the derivation pages",
        description="Render one Markdown page per theorem plus index.md into --out. Without "
                    "--out the pages go to docs/derivations of the hcspec repository, and only "
                    "when run from its root (elsewhere the command refuses, exit 2). A page "
                    "whose theorem and sources did not change since it was written (the "
                    "manifest .hc-spec-manifest.json records this) is reused without proving "
                    "again. Only files the command generated (marked in their first line and "
                    "listed in the manifest) are ever removed. With --check, write nothing and "
                    "exit 1 naming the stale, missing or extra pages when the directory differs "
                    "from a fresh render, or 2 when the directory does not exist.")
    docs_cmd.add_argument("--check", action="store_true",
                          help="compare with a fresh render instead of writing")
    docs_cmd.add_argument("--out", type=Path, default=None, metavar="DIR",
                          help=f"pages directory (default: {DEFAULT_DOCS_DIR} of the hcspec "
                               "repository, only when run from its root)")
    docs_cmd.set_defaults(handler=_cmd_docs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hc-spec`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code (1,
    quietly, when the reader of stdout went away, as in ``hc-spec list | head``)."""
    args = build_parser().parse_args(argv)
    wide = None if sys.stdout.isatty() else 160  # readable tables in CI logs
    out, err = Console(width=wide), Console(stderr=True, width=wide)
    try:
        code: int = args.handler(args, out, err)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        _discard_stdout()
        return 1
    return code


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush does not fail again (the recipe
    of the ``signal`` module's docs; rich does the same for its own output and exits 1)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
