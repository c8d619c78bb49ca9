"""``hc-conformance``: run the conformance kit from the command line.

Subcommands::

    hc-conformance run [TARGET] [--profile quick|ci|thorough] [--device cpu|cuda|auto]
                       [--only IDS] [--skip IDS] [--seed N] [--json PATH] [--junit PATH]
                       [--expected-failures FILE] [--case JSON] [--no-progress] [--verbose]
    hc-conformance list
    hc-conformance targets
    hc-conformance report REPORT.json [REPORT.json ...] --markdown [-o FILE] [--title T]
                          [--preamble FILE]

TARGET defaults to ``$HC_CONFORMANCE_TARGET``, else ``reference:mhc``. Exit codes:
0 nothing failed unexpectedly; 1 a property failed, errored or passed although expected to
fail; 2 usage error (bad TARGET or import failure, unknown property id, unreadable expected
failures, a report file that cannot be written; the requested reports are still written, with
``setup_error`` set and no results); 130 interrupted (the partial report is still
printed and written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from conformance import expected, junit, terminal
from conformance import properties as catalogue
from conformance import report as rp
from conformance.profiles import DEFAULT_PROFILE, PROFILES
from conformance.runner import check_implementation, kit_version
from conformance.strategies import Case
from conformance.targets import DEFAULT_TARGET, ENV_VAR, TargetError, builtin_status

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``run`` and ``list``; more register through
    :func:`add_subcommand`)."""
    parser = argparse.ArgumentParser(
        prog="hc-conformance",
        description="Check an HC/mHC implementation against the hcspec property catalogue.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run the properties against a target",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("target", nargs="?", default=None,
                     help=f"reference:hc-static|hc-dynamic|mhc or package.module:factory "
                          f"(default: ${ENV_VAR}, else {DEFAULT_TARGET})")
    run.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                     help="quick, ci (derandomized; default) or thorough")
    run.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    run.add_argument("--only", action="append", metavar="IDS",
                     help="property ids, families or globs (comma-separated, repeatable)")
    run.add_argument("--skip", action="append", metavar="IDS", help="as --only, to leave out")
    run.add_argument("--seed", type=int, default=0, help="added to every case's seed")
    run.add_argument("--json", metavar="PATH", help="write the JSON report here")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    run.add_argument("--expected-failures", metavar="FILE",
                     help="lines 'PROPERTY_ID: reason' (failures become xfail)")
    run.add_argument("--case", metavar="JSON",
                     help="replay one case (as printed in a reproduction command)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="also print why properties are blocked or not applicable")
    run.set_defaults(handler=cmd_run)
    lister = sub.add_parser("list", help="print the property catalogue")
    lister.set_defaults(handler=cmd_list)
    targets = sub.add_parser("targets", help="list the built-in targets and whether their "
                                             "packages are importable here")
    targets.set_defaults(handler=cmd_targets)
    render = sub.add_parser("report", help="render JSON reports (from run --json)")
    render.add_argument("reports", nargs="+", metavar="REPORT.json")
    render.add_argument("--markdown", action="store_true", required=True,
                        help="render as Markdown (the only format so far)")
    render.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    render.add_argument("--title", help="a top-level heading for the document")
    render.add_argument("--preamble", metavar="FILE",
                        help="Markdown inserted after the title (e.g. notes, classifications)")
    render.set_defaults(handler=cmd_report)
    for extra in _EXTRA_SUBCOMMANDS:
        extra(sub)
    return parser


_EXTRA_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []  # type: ignore[type-arg]


def add_subcommand(register: Callable[[argparse._SubParsersAction], None]) -> None:  # type: ignore[type-arg]
    """Register a further subcommand (e.g. ``targets``, ``report``): ``register(subparsers)``
    adds a parser whose defaults set ``handler`` to a function returning the exit code."""
    _EXTRA_SUBCOMMANDS.append(register)


def _console() -> Console:
    # Redirected output (CI logs, files) gets a wide fixed width instead of rich's 80 columns,
    # so property ids and messages are not folded.
    console = Console()
    return console if console.is_terminal else Console(width=160)


def cmd_list(args: argparse.Namespace) -> int:
    """Print the catalogue."""
    terminal.print_catalogue(_console(), catalogue.CATALOGUE)
    return EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    """Print the built-in targets: name, importable yes/no, version found, description and
    options; then why each unusable one is unusable."""
    out = _console()
    rows = builtin_status()
    table = Table(header_style="bold")
    for name in ("target", "importable", "version", "description"):
        table.add_column(name, no_wrap=name != "description")
    for row in rows:
        description = row.target.description
        if row.target.options:
            description += f" [{row.target.options_text}]"
        importable = "[green]yes[/]" if row.importable else "[red]no[/]"
        table.add_row(row.target.name, importable, escape(row.version or "not installed"),
                      escape(description))
    out.print(table)
    for row in rows:
        if row.problem:
            out.print(f"{row.target.name}: {escape(row.problem)}", highlight=False,
                      soft_wrap=True)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Render JSON reports as one Markdown document (stdout or ``--output``)."""
    err = Console(stderr=True)
    try:
        reports = [rp.Report.read_json(path) for path in args.reports]
        preamble = (Path(args.preamble).read_text(encoding="utf-8")
                    if args.preamble else None)
    except (OSError, ValueError) as exc:
        return _usage_error(err, f"cannot read the report: {exc}")
    text = rp.reports_to_markdown(reports, title=args.title, preamble=preamble)
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        return _usage_error(err, f"cannot write {args.output}: {exc}")
    return EXIT_OK


def _usage_error(console: Console, message: str) -> int:
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return EXIT_USAGE


def cmd_run(args: argparse.Namespace) -> int:
    """Run the kit; print header, table, failures and summary; write the reports."""
    out, err = _console(), Console(stderr=True)
    target = args.target or os.environ.get(ENV_VAR) or DEFAULT_TARGET
    try:
        failures = expected.load(args.expected_failures) if args.expected_failures else None
        case = Case.from_json(args.case) if args.case else None
    except (OSError, ValueError) as exc:
        return _usage_error(err, str(exc))
    show_progress = not args.no_progress and err.is_terminal
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True,
                        disable=not show_progress)
    task = progress.add_task("resolving target", total=None)

    def on_start(prop: catalogue.Property, index: int, total: int) -> None:
        progress.update(task, description=prop.id, completed=index, total=total)

    def on_result(result: rp.PropertyResult) -> None:
        progress.advance(task)
        if not show_progress and not args.no_progress:
            err.print(f"{result.id}: {result.status}", highlight=False)

    try:
        with progress:
            report = check_implementation(
                target, profile=args.profile, device=args.device, only=args.only,
                skip=args.skip, seed=args.seed, expected_failures=failures, case=case,
                on_start=on_start, on_result=on_result,
            )
    except (TargetError, catalogue.SelectionError, ValueError) as exc:
        _write_setup_error(args, target, str(exc), out, err)
        return _usage_error(err, str(exc))
    except KeyboardInterrupt:
        err.print("interrupted before any property ran; no report")
        return EXIT_INTERRUPTED
    terminal.print_header(out, report)
    terminal.print_table(out, report)
    terminal.print_details(out, report, verbose=args.verbose)
    terminal.print_summary(out, report)
    code = EXIT_INTERRUPTED if report.interrupted else (EXIT_OK if report.ok else EXIT_FAILED)
    if not _write_reports(args, report, out, err) and code == EXIT_OK:
        code = EXIT_USAGE
    return code


def _write_setup_error(args: argparse.Namespace, target: str, message: str, out: Console,
                       err: Console) -> None:
    """A usage error still writes the requested reports: no results, ``setup_error`` set (so a
    CI job that collects them sees the reason instead of a missing file)."""
    report = rp.Report(target=target, kit_version=kit_version(), profile=args.profile,
                       seed=args.seed, device=args.device, setup_error=message)
    _write_reports(args, report, out, err)


def _write_reports(args: argparse.Namespace, report: rp.Report, out: Console,
                   err: Console) -> bool:
    """Write the JSON and JUnit reports that ``--json``/``--junit`` ask for; an unwritable path
    is reported on ``err``. Returns False when any requested report could not be written."""
    written = True
    for path, write in ((args.json, report.write_json), (args.junit, _junit_writer(report))):
        if not path:
            continue
        try:
            write(path)
        except OSError as exc:
            _usage_error(err, f"cannot write the report to {path}: {exc}")
            written = False
        else:
            out.print(f"report written to {path}", highlight=False)
    return written


def _junit_writer(report: rp.Report) -> Callable[[str], None]:
    return lambda path: junit.write_junit(report, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hc-conformance`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
