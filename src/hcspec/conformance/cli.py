"""``hc-conformance``: run the conformance kit from the command line.

Subcommands: ``run`` (check a TARGET, print the report, write JSON/JUnit), ``list`` (the
property catalogue), ``targets`` (the built-in targets and whether they import here) and
``report`` (JSON reports as Markdown or HTML). Each parser's description, built by
:func:`build_parser`, is what ``--help`` shows; exit codes are listed in :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hcspec.conformance import compare
from hcspec.conformance.outputs import journal
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.report import kit_version
from hcspec.conformance.profiles import DEFAULT_PROFILE, PROFILE_NAMES
from hcspec.conformance.subjects.targets import BUILTIN, DEFAULT_TARGET, ENV_VAR

if TYPE_CHECKING:
    pass

from hcspec.conformance.run_command import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    _console,
    _usage_error,
    cmd_run,
)
from hcspec.conformance.run_command import (
    report_path_problem as report_path_problem,
)
from hcspec.conformance.run_command import (
    sigterm_as_interrupt as sigterm_as_interrupt,
)

Handler = Callable[[argparse.Namespace], int]

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    nothing failed unexpectedly
  {EXIT_FAILED}    a property failed, errored, or passed although expected to fail
  {EXIT_USAGE}    usage error: a bad TARGET or a failed import, an unknown property
       id, an unreadable expected-failures file, a report path that cannot be
       written (checked before the run); the requested reports are still
       written where possible, with setup_error set and no results
  {EXIT_INTERRUPTED}  interrupted (SIGINT, Ctrl-C): the partial report is still printed and
       written (interrupted: true, the finished results, the running property
       and the ids not run), also when no property had finished
  {EXIT_TERMINATED}  terminated (SIGTERM, e.g. a CI job's timeout): as for 130
a property that runs past --timeout is reported `timeout` (exit code 1)"""

_WIDTH = 78  # argparse's width on an 80-column terminal; descriptions are filled here


def _fill(text: str) -> str:
    return textwrap.fill(text, _WIDTH, break_on_hyphens=False)


def _builtin_names(reference: bool) -> list[str]:
    return sorted(name for name in BUILTIN if name.startswith("reference:") == reference)


def _run_description() -> str:
    """``run --help``: what it does and the TARGET forms (built-in names read from the
    registry, so the list cannot go stale)."""
    reference = ", ".join(_builtin_names(reference=True))
    third_party = ", ".join(_builtin_names(reference=False))
    paragraphs = [
        "Run the property catalogue against TARGET and print what was resolved (target, kind, "
        "versions, device, dtype, profile, seed, capabilities, declared conventions), one row "
        "per property, each failure's message, minimal counterexample and reproduction "
        "command, and a summary with a score per family.",
        "TARGET is a built-in name or package.module:factory (a module in the current "
        f"directory is importable). Without TARGET: ${ENV_VAR}, else {DEFAULT_TARGET}.",
        f"Built-in reference targets: {reference}.",
        f"Adapters for third-party packages (usable where the package is installed; "
        f"`hc-conformance targets` shows which): {third_party}.",
    ]
    return "\n\n".join(map(_fill, paragraphs))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``run``, ``list``, ``targets`` and ``report``; more
    register through :func:`add_subcommand`)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="hc-conformance", formatter_class=raw,
        description=_fill("Check an implementation of Hyper-Connections (HC, arXiv:2409.19606) "
                          "or manifold-constrained Hyper-Connections (mHC, arXiv:2512.24880) "
                          "against the hcspec property catalogue."),
        epilog="`hc-conformance COMMAND --help` describes each command.\n\n" + EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"hc-conformance {kit_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run the properties against a target",
                         description=_run_description(), epilog=EXIT_CODES,
                         formatter_class=raw)
    reference = "|".join(name.partition(":")[2] for name in _builtin_names(reference=True))
    run.add_argument("target", nargs="?", default=None,
                     help=f"reference:{reference}, another built-in name (`hc-conformance "
                          f"targets`) or package.module:factory (default: ${ENV_VAR}, else "
                          f"{DEFAULT_TARGET})")
    run.add_argument("--profile", choices=PROFILE_NAMES, default=DEFAULT_PROFILE,
                     help=f"{', '.join(PROFILE_NAMES)} (default {DEFAULT_PROFILE}); kernel is "
                          "sized for Triton's CPU interpreter; all are deterministic (seeded)")
    run.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                     help="auto (default): cuda where a CUDA device exists, else cpu")
    run.add_argument("--only", action="append", metavar="IDS",
                     help="property ids, families or globs (comma-separated, repeatable)")
    run.add_argument("--skip", action="append", metavar="IDS", help="as --only, to leave out")
    run.add_argument("--max-examples", type=_positive, metavar="N", default=None,
                     help="hypothesis examples per property after the explicit ones, for every "
                          "property, in place of the profile's (recorded in the report)")
    run.add_argument("--seed", type=int, default=0,
                     help="added to every case's seed and each property's hypothesis seed")
    run.add_argument("--json", metavar="PATH", help="write the JSON report here")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    run.add_argument("--markdown", metavar="PATH", help="write the Markdown report here")
    run.add_argument("--html", metavar="PATH",
                     help="write the HTML report here (one self-contained page)")
    run.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=None,
                     help="wall-clock limit per property (default: the profile's: "
                          + ", ".join(f"{k} {v:g} s" for k, v in _default_timeouts().items())
                          + "; 0: none); a property past it is reported `timeout` and the "
                          "run goes on")
    run.add_argument("--expected-failures", metavar="FILE",
                     help="lines 'PROPERTY_ID: reason' (failures become xfail)")
    run.add_argument("--case", metavar="JSON",
                     help="replay one case (as printed in a reproduction command)")
    run.add_argument("--world-size", type=int, metavar="N",
                     help="also run the multi-process properties (the parallel family) on N "
                          "ranks started here (gloo on cpu, NCCL on cuda, one GPU per rank); "
                          "under torchrun the launcher's ranks are used instead")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress bar on a terminal (off a terminal, status lines are "
                          "printed instead: see --no-status); the steps of the target's "
                          "inspection are still announced, so that a hang shows where it is")
    run.add_argument("--no-status", action="store_true",
                     help="off a terminal, no per-property status lines on stderr (printed by "
                          "default whenever stderr is not a terminal, --no-progress or not)")
    run.add_argument("--journal", metavar="PATH",
                     help="append every finished result at once to this journal (JSON lines, "
                          "fsync-ed; default: beside the first report, r.json -> "
                          "r.journal.jsonl; none without a report path)")
    run.add_argument("--resume", action="store_true",
                     help="continue the run recorded in the journal (same target, profile, "
                          "seed, device): its finished results are kept, the rest run")
    run.add_argument("--save-failures", metavar="DIR",
                     help="per failed property, write DIR/<id>/: case.json, tensors.pt (the "
                          "case's inputs, the target's and the expected tensors of the failing "
                          "comparison) and replay.py, a script that replays the case without "
                          "the CLI and prints the entries that disagree")
    run.add_argument("--pdb", action="store_true",
                     help="on a failure, replay its case in this process and open the "
                          "debugger (post-mortem) at the failing comparison")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="also print, one by one, the properties that did not fail but carry a "
                          "message (blocked, not applicable, a pass with a note)")
    run.set_defaults(handler=cmd_run)
    lister = sub.add_parser(
        "list", help="print the property catalogue", formatter_class=raw,
        description=_fill("Print the property catalogue: each property's id, statement, the "
                          "spec theorem it checks, the capability it needs and the kinds "
                          "(hc-static, hc-dynamic, mhc) it applies to."))
    lister.add_argument("--json", action="store_true",
                        help="print the rows as a JSON list (id, family, statement, theorems, "
                             "requires, tolerance)")
    lister.add_argument("--family", action="append", metavar="FAMILY",
                        help="only this family's properties (repeatable)")
    lister.add_argument("--theorem", action="append", metavar="THEOREM",
                        help="only the properties checking this spec theorem id, or ids "
                             "starting with it followed by a dot (repeatable)")
    lister.set_defaults(handler=cmd_list)
    init = sub.add_parser(
        "init", help="write a documented adapter skeleton for your module",
        formatter_class=raw,
        description=_fill("Write a documented adapter skeleton (the factory, the protocol's "
                          "parts, the conventions to declare) for the module MODULE that holds "
                          "your HC/mHC layer, to fill in and run with `hc-conformance run "
                          "FILE:make`. --example writes the kit's complete worked adapter "
                          "instead (shipped with the package)."))
    init.add_argument("module", metavar="MODULE", nargs="?", default=None,
                      help="the import name of the module with your layer (e.g. mylib.layers)")
    init.add_argument("-o", "--output", metavar="FILE", default=None,
                      help="where to write (default hc_adapter.py, or conformance_adapter.py "
                           "with --example); an existing file is never overwritten")
    init.add_argument("--example", action="store_true",
                      help="write the worked example adapter (a complete, passing one)")
    init.set_defaults(handler=cmd_init)
    targets = sub.add_parser(
        "targets", help="list the built-in targets and whether their packages are importable "
                        "here", formatter_class=raw,
        description=_fill("List the built-in targets: name, whether the package it needs "
                          "imports here, the version found and a description with the options "
                          "it binds; then why each unusable one cannot be used."))
    targets.set_defaults(handler=cmd_targets)
    render = sub.add_parser(
        "report", help="render JSON reports (from run --json) as Markdown or HTML",
        formatter_class=raw,
        description=_fill("Render JSON reports written by `hc-conformance run --json` as one "
                          "Markdown document: a summary table with one row per report, then "
                          "per report its header, a table of every property and each failure's "
                          "message, minimal counterexample and reproduction command. With "
                          "--html, also (or, without -o, instead) as one self-contained HTML "
                          "page with an error ÷ allowance bar per property and the depth "
                          "plot."))
    render.add_argument("reports", nargs="+", metavar="REPORT.json",
                        help="JSON reports, or journals (r.journal.jsonl: what a run that died "
                             "had finished, and what it was running)")
    render.add_argument("--markdown", action="store_true",
                        help="render as Markdown (the default; with --html, only with -o "
                             "or --markdown)")
    render.add_argument("--html", metavar="OUT.html",
                        help="write one self-contained HTML page here")
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


add_subcommand(compare.register)  # hc-conformance compare TARGET_A TARGET_B


def _default_timeouts() -> dict[str, float]:
    from hcspec.conformance.run.timeouts import DEFAULT_TIMEOUTS

    return dict(DEFAULT_TIMEOUTS)


def cmd_list(args: argparse.Namespace) -> int:
    """Print the catalogue (from the user cache of :mod:`hcspec.conformance.listing` when it
    matches the sources here, without importing torch; else from the imported catalogue, which
    is then cached, with a note on stderr saying why)."""
    from hcspec.conformance import listing

    rows, stale = listing.rows()
    if stale is not None:
        Console(stderr=True).print(f"(catalogue read from the sources and cached for the next "
                                   f"listing: {stale})", highlight=False, soft_wrap=True,
                                   style="dim")
    families = getattr(args, "family", None) or []
    theorems = getattr(args, "theorem", None) or []
    known = sorted({row.id.partition(".")[0] for row in rows})
    unknown = [f for f in families if f not in known]
    if unknown:
        return _usage_error(Console(stderr=True), f"--family: unknown {', '.join(unknown)}; "
                                                  f"expected some of {', '.join(known)}")
    rows = [row for row in rows
            if (not families or row.id.partition(".")[0] in families)
            and (not theorems or any(t == want or t.startswith(want + ".")
                                     for t in row.theorems for want in theorems))]
    if getattr(args, "json", False):
        import json

        sys.stdout.write(json.dumps([
            {"id": row.id, "family": row.id.partition(".")[0], "statement": row.statement,
             "theorems": list(row.theorems), "requires": list(row.requires),
             "tolerance": row.tolerance} for row in rows], indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    listing.print_catalogue(_console(), rows)
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """Write the adapter skeleton for ``MODULE`` (:func:`hcspec.conformance.scaffold.skeleton`)
    or, with ``--example``, the worked example shipped with the package; never overwrite."""
    from hcspec.conformance import scaffold

    err = Console(stderr=True)
    if args.example:
        text = scaffold.worked_example()
        path = Path(args.output or "conformance_adapter.py")
    else:
        if not args.module:
            return _usage_error(err, "init: give MODULE (the import name of the module with "
                                     "your layer), or --example")
        path = Path(args.output or "hc_adapter.py")
        try:
            text = scaffold.skeleton(args.module, str(path))
        except ValueError as exc:
            return _usage_error(err, str(exc))
    if path.exists():
        return _usage_error(err, f"init: {path} exists; give another --output")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return _usage_error(err, f"init: cannot write {path}: {exc}")
    Console().print(f"wrote {path}; run it: hc-conformance run {path}:make --profile quick",
                    highlight=False, soft_wrap=True)
    return EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    """Print the built-in targets (and those other packages declare through the
    ``hcspec.targets`` entry points): name, importable yes/no, version found, description,
    options, the number of declared findings and, for another package's target, its entry
    point; then why each unusable one is unusable."""
    from hcspec.conformance.subjects.targets import PLUGIN_TARGETS, builtin_status, describe

    out = _console()
    rows = builtin_status()
    table = Table(header_style="bold")
    for name in ("target", "importable", "version", "description"):
        table.add_column(name, no_wrap=name != "description")
    for row in rows:
        # the detail (e.g. where Triton kernels run) needs torch: only for a usable target
        description = describe(row.target) if row.importable else row.target.description
        if row.target.options:
            description += f" [{row.target.options_text}]"
        if row.target.findings:
            count = len(row.target.findings)
            description += f" [{count} known finding{'s' if count > 1 else ''}]"
        if row.target.name in PLUGIN_TARGETS:
            description += f" [entry point {PLUGIN_TARGETS[row.target.name]}]"
        importable = "[green]yes[/]" if row.importable else "[red]no[/]"
        table.add_row(row.target.name, importable, escape(row.version or "not installed"),
                      escape(description))
    out.print(table)
    said: set[str] = set()
    for row in rows:  # one line per package: its targets share the reason
        if row.problem and row.problem not in said:
            said.add(row.problem)
            names = ", ".join(r.target.name for r in rows if r.problem == row.problem)
            out.print(f"{names}: {escape(row.problem)}", highlight=False, soft_wrap=True)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Render JSON reports (or journals, :mod:`hcspec.conformance.outputs.journal`: the finished
    results of a run that died) as one Markdown document (stdout or ``--output``) and, with
    ``--html``, as one HTML page (:mod:`hcspec.conformance.outputs.html_report`); with ``--html``,
    Markdown is written only when ``--output`` or ``--markdown`` asks for it."""
    err = Console(stderr=True)
    try:
        reports = [journal.read(path).report() if str(path).endswith(journal.SUFFIX)
                   else rp.Report.read_json(path) for path in args.reports]
        preamble = (Path(args.preamble).read_text(encoding="utf-8")
                    if args.preamble else None)
    except (OSError, ValueError) as exc:
        return _usage_error(err, f"cannot read the report: {exc}")
    if args.html:
        from hcspec.conformance.outputs.html_report import write_html

        try:
            write_html(reports, args.html, title=args.title)
        except OSError as exc:
            return _usage_error(err, f"cannot write {args.html}: {exc}")
        if not args.output and not args.markdown:
            return EXIT_OK
    text = md.reports_to_markdown(reports, title=args.title, preamble=preamble)
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        return _usage_error(err, f"cannot write {args.output}: {exc}")
    return EXIT_OK


def _positive(text: str) -> int:
    """``--max-examples``'s value: an int, 1 or more.

    Raises:
        argparse.ArgumentTypeError: anything else (a usage error, exit 2).
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, got {text!r}")
    return value


def _seconds(text: str) -> float:
    """``--timeout``'s value: a finite number of seconds, 0 or more.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse makes it a usage error, exit 2).
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, 0 or more (0: no limit), got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hc-conformance`` console script; returns the exit code (1, quietly,
    when the reader of stdout went away, as in ``hc-conformance list | head``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        code = handler(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_FAILED
    return code


def console_main() -> NoReturn:
    """The ``hc-conformance`` console script and ``python -m hcspec.conformance``:
    :func:`main`, then exit with its code.

    When a worker thread abandoned by a timeout or an interrupt is still running the target's
    code, the process ends at once (``os._exit``, after flushing): letting the interpreter
    finalise under a thread that is inside torch's C++ code can abort it (``terminate called
    without an active exception``, exit 134) after the report was written. Otherwise, when no
    thread but daemon threads is left, the exit handlers run (:mod:`atexit`: logging's flush,
    torch's) and the process ends the same way: the interpreter's own finalisation — tearing
    down every module of torch, sympy and hypothesis, and their last garbage collections —
    took longer than the startup of a ``quick`` run (docs/benchmarks.md, "Time to verdict")
    and produces nothing. A non-daemon thread the target left running is waited for, as
    ``sys.exit`` does."""
    code = main()
    from hcspec.conformance.run import timeouts

    # The run is over: a late Ctrl-C ends the exit at once instead of printing a traceback.
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(EXIT_INTERRUPTED))
    if timeouts.running_jobs():
        _flush()
        os._exit(code)
    if all(t.daemon or t is threading.main_thread() for t in threading.enumerate()):
        atexit._run_exitfuncs()
        _flush()
        os._exit(code)
    sys.exit(code)


def _flush() -> None:
    """Flush stdout and stderr, ignoring a reader that went away."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush does not fail again (the recipe
    of the ``signal`` module's docs; rich does the same for its own output and exits 1)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    console_main()
