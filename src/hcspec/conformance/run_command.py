"""The ``run`` subcommand of ``hc-conformance`` (:mod:`hcspec.conformance.cli`): the run's
options to :func:`hcspec.conformance.run.session.check_implementation` with a listener that prints
the progress, keeps the journal and saves the failures; the reports written; the exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

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

from hcspec.conformance.outputs import journal, junit, terminal
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.report import kit_version
from hcspec.conformance.subjects import expected
from hcspec.conformance.subjects.targets import DEFAULT_TARGET, ENV_VAR

if TYPE_CHECKING:
    from hcspec.conformance.machinery.declaration import Property
    from hcspec.conformance.parallel.launcher import Launch
    from hcspec.conformance.replay import FailureSaver

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def _console() -> Console:
    # Redirected output (CI logs, files) gets a wide fixed width instead of rich's 80 columns,
    # so property ids and messages are not folded.
    console = Console()
    return console if console.is_terminal else Console(width=160)


def _usage_error(console: Console, message: str) -> int:
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return EXIT_USAGE


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`hcspec.conformance.run.timeouts.Terminated` (a
    ``KeyboardInterrupt``) in the main thread, so a CI job's timeout stops the run the way
    Ctrl-C does and the partial report is written; the previous handler is restored after.
    Outside the main thread (no signal handlers there) the block runs unchanged."""
    from hcspec.conformance.run.timeouts import Terminated

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_code(report: rp.Report) -> int:
    if report.interrupted:
        return EXIT_TERMINATED if report.interrupted_by == "SIGTERM" else EXIT_INTERRUPTED
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    """Run the kit: print the first header lines as soon as the target is resolved (before
    any factory or forward runs) and a status line saying what is being built or called,
    then the rest of the header, the table, failures and summary; write the reports (their
    paths are checked before the run). SIGINT and SIGTERM stop the run and still write the
    partial reports (exit 130 / 143). With ``--world-size N`` the multi-process properties
    run on N ranks too; under a torch.distributed launcher (:func:`_run_launched`) every
    process is a rank and rank 0 alone prints and writes the report."""
    from hcspec.conformance.parallel import launcher

    try:
        launch = launcher.detect()
    except ValueError as exc:
        return _usage_error(Console(stderr=True), str(exc))
    if launch is not None:
        return _run_launched(args, launch)
    return _run_guarded(args)


def _run_launched(args: argparse.Namespace, launch: Launch) -> int:
    """Run as one rank of a launcher's job (torchrun): join its process group; rank 0 runs
    the kit with the launcher's world size, the others follow rank 0's instructions
    (:mod:`hcspec.conformance.parallel.launcher`), write nothing, and exit with rank 0's
    code, after rank 0 when it is not 0 (:func:`~hcspec.conformance.parallel.launcher.
    outlast_rank_zero`)."""
    from hcspec.conformance.parallel import launcher
    from hcspec.conformance.run.inspection import resolve_device

    err = Console(stderr=True)
    if args.world_size is not None and args.world_size != launch.world_size:
        return _usage_error(err, f"--world-size {args.world_size} differs from the launcher's "
                                 f"WORLD_SIZE={launch.world_size} (leave it out under torchrun)")
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        return _usage_error(err, str(exc))
    launcher.join(launch, device)
    if launch.rank != 0:
        try:
            code = launcher.follow(launch, device)
        finally:
            launcher.leave()
        launcher.outlast_rank_zero(code)
        return code
    args.world_size, args.device = launch.world_size, device
    code = EXIT_FAILED
    try:
        code = _run_guarded(args)
    finally:
        launcher.finish(code)
    return code


def _run_guarded(args: argparse.Namespace) -> int:
    """:func:`_run` with SIGTERM as an interrupt and hypothesis's files kept private; an
    interrupt before the target was resolved still writes the (empty) reports."""
    try:
        from hcspec.conformance.run import hypothesis_home

        with sigterm_as_interrupt(), hypothesis_home.private():
            return _run(args)
    except KeyboardInterrupt as exc:  # while importing, before the target was resolved, ...
        from hcspec.conformance.run.timeouts import interrupt_name

        err = Console(stderr=True)
        target = args.target or os.environ.get(ENV_VAR) or DEFAULT_TARGET
        by = interrupt_name(exc)
        report = rp.Report(target=target, kit_version=kit_version(), profile=args.profile,
                           seed=args.seed, device=args.device, interrupted=True,
                           interrupted_by=by, running="setup: resolving the target")
        err.print(f"interrupted ({by}) before the target was resolved", highlight=False)
        _write_reports(args, report, _console(), err)
        return _exit_code(report)


def _run(args: argparse.Namespace) -> int:
    from hcspec.conformance import families as catalogue
    from hcspec.conformance.run.session import Listener, Options, check_implementation
    from hcspec.conformance.strategies import Case
    from hcspec.conformance.subjects.targets import TargetError

    out, err = _console(), Console(stderr=True)
    target = args.target or os.environ.get(ENV_VAR) or DEFAULT_TARGET
    try:
        failures = (expected.load(args.expected_failures, option="--expected-failures",
                                  known=catalogue.BY_ID)
                    if args.expected_failures else None)
        case = Case.from_json(args.case) if args.case else None
    except (OSError, ValueError) as exc:
        return _usage_error(err, str(exc))
    unwritable = {path: problem for path in (args.json, args.junit, args.markdown, args.html)
                  if path and (problem := report_path_problem(path)) is not None}
    if unwritable:
        message = "; ".join(unwritable.values())
        _write_setup_error(args, target, message, out, err, skip=set(unwritable))
        return _usage_error(err, f"{message} (nothing was run)")
    show_progress = not args.no_progress and err.is_terminal
    journal_path = _journal_path(args)
    try:
        finished = _resumed(args, journal_path, target)
        log = None if journal_path is None else journal.Journal.open(journal_path,
                                                                    append=args.resume)
    except (OSError, ValueError) as exc:
        return _usage_error(err, str(exc))
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True,
                        disable=not show_progress)
    task = progress.add_task("resolving target", total=None)

    saver = _failure_saver(args, target)
    resolved_device: list[str] = []

    class RunListener(Listener):
        """The terminal, the journal and --save-failures, told of the run."""

        def on_resolved(self, header: rp.Report) -> None:
            progress.stop()
            terminal.print_preamble(out, header)
            out.file.flush()
            progress.start()

        def on_status(self, text: str) -> None:
            # Said before it is done: a factory or forward that hangs leaves this line last.
            progress.update(task, description=text)
            if not show_progress:  # also under --no-progress: a hang must show where it is
                err.print(f"... {text}", highlight=False, soft_wrap=True)
                err.file.flush()

        def on_setup(self, header: rp.Report) -> None:
            if log is not None:
                log.header(header)
                if args.resume:
                    log.resumed(len(finished))
                    header.warnings.append(f"resumed from the journal {journal_path}: "
                                           f"{len(finished)} results of the earlier run kept")
            resolved_device.append(header.device)
            if saver is not None:
                saver.device = header.device
            # First, so that in a log holding both streams the status lines follow the header.
            # The bar pauses meanwhile: on a shared terminal the header would run into it.
            progress.stop()
            terminal.print_header(out, header, preamble=False)
            out.file.flush()
            progress.start()

        def on_start(self, prop: Property, index: int, total: int) -> None:
            if log is not None:
                log.running(prop.id)  # a run that dies now leaves which property was running
            progress.update(task, description=prop.id, completed=index, total=total)

        def on_result(self, result: rp.PropertyResult) -> None:
            if log is not None:
                log.result(result)  # durable before the run goes on
            progress.advance(task)
            if not show_progress and not args.no_status:
                err.print(f"{result.id}: {result.status}", highlight=False)
                err.file.flush()
            if result.status in (rp.FAILED, rp.ERROR) and (saver is not None or args.pdb):
                progress.stop()
                _take_home(args, saver, result, resolved_device, err)
                progress.start()

    try:
        with progress:
            options = Options(
                profile=args.profile, device=args.device, only=args.only, skip=args.skip,
                seed=args.seed, expected_failures=failures or {}, case=case,
                timeout=args.timeout, world_size=args.world_size, finished=finished,
                max_examples=args.max_examples)
            report = check_implementation(target, options, RunListener())
    except (TargetError, catalogue.SelectionError, ValueError) as exc:
        if log is not None:
            log.close()
        message = source_tree_problem(target, exc) or str(exc)
        if isinstance(exc, TargetError) and not args.target and os.environ.get(ENV_VAR):
            message += f" (TARGET taken from ${ENV_VAR})"
        _write_setup_error(args, target, message, out, err)
        return _usage_error(err, message)
    if log is not None:
        log.end(report)
        log.close()
    terminal.print_failures(out, report, verbose=args.verbose)  # the failures first
    terminal.print_table(out, report)
    terminal.print_notes(out, report, verbose=args.verbose)
    terminal.print_summary(out, report)
    if saver is not None:
        from hcspec.conformance.replay import saved_summary

        for line in saved_summary(saver):
            out.print(escape(line), highlight=False, soft_wrap=True)
    code = _exit_code(report)
    if not _write_reports(args, report, out, err) and code == EXIT_OK:
        code = EXIT_USAGE
    return code


def _journal_path(args: argparse.Namespace) -> Path | None:
    """``--journal``, else the journal beside the first report path asked for
    (:func:`hcspec.conformance.outputs.journal.beside`), else None (no journal)."""
    if getattr(args, "journal", None):
        return Path(args.journal)
    for path in (args.json, args.junit, args.markdown, args.html):
        if path:
            return journal.beside(path)
    return None


def _resumed(args: argparse.Namespace, path: Path | None,
             target: str) -> list[rp.PropertyResult]:
    """The finished results of the journal a ``--resume`` run continues ([] without
    ``--resume``).

    Raises:
        ValueError: no journal path, no such journal, or a journal of another run (target,
            profile, seed or device differ:
            :func:`hcspec.conformance.outputs.journal.resume_problem`).
    """
    if not getattr(args, "resume", False):
        return []
    if path is None:
        raise ValueError("--resume needs the journal: give --journal PATH or the report path "
                         "the earlier run wrote (its journal is beside it)")
    if not path.is_file():
        raise ValueError(f"--resume: there is no journal {path}")
    from hcspec.conformance.run.inspection import resolve_device

    state = journal.read(path)
    here = {"target": target, "profile": args.profile, "seed": args.seed,
            "device": resolve_device(args.device)}
    problem = journal.resume_problem(state, here)
    if problem is not None:
        raise ValueError(f"--resume {path}: {problem}")
    return state.results


def _failure_saver(args: argparse.Namespace, target: str) -> FailureSaver | None:
    """The ``--save-failures`` writer of this run, None without the option."""
    if not getattr(args, "save_failures", None):
        return None
    from hcspec.conformance.replay import FailureSaver

    return FailureSaver(Path(args.save_failures), target, args.profile, args.device,
                        args.seed, args.timeout)


def _take_home(args: argparse.Namespace, saver: FailureSaver | None,
               result: rp.PropertyResult, device: list[str], err: Console) -> None:
    """For one failed (or errored) property: save it (``--save-failures``) and, with
    ``--pdb``, replay its case here and open the debugger at the failing comparison."""
    if saver is not None:
        err.print(f"... saving {result.id}'s failing case to {saver.directory}",
                  highlight=False)
        saver.save(result.id, result.failure)
    if args.pdb and result.failure is not None and result.failure.counterexample:
        from hcspec.conformance.replay import replay
        from hcspec.conformance.run.inspection import prepare
        from hcspec.conformance.strategies import Case

        setup = prepare(args.target or os.environ.get(ENV_VAR) or DEFAULT_TARGET,
                        profile=args.profile, device=device[0] if device else args.device,
                        seed=args.seed, timeout=args.timeout)
        replay(setup, result.id, Case.from_json(result.failure.counterexample),
               post_mortem=True)


SOURCE_TREE_PACKAGES = ("examples", "tests", "tools", "benchmarks")
"""Top-level folders of the hcspec repository that are not installed with the package."""


def source_tree_problem(target: str, exc: BaseException) -> str | None:
    """One line instead of an import traceback when ``target`` names a module of the hcspec
    source tree (``examples.conformance_adapter:make``) that is not importable here, e.g.
    from an installed wheel; None otherwise."""
    top = target.partition(":")[0].partition(".")[0]
    missing = (f"there is no module '{top}", f"No module named '{top}")
    if top not in SOURCE_TREE_PACKAGES or not any(m in str(exc) for m in missing):
        return None
    return (f"TARGET {target!r} is part of the hcspec source tree ({top}/ is not installed "
            "with the package): run it from a clone of the repository")


def report_path_problem(path: str) -> str | None:
    """Why a report cannot be written to ``path``, or None when it looks writable: the path
    is a directory, its directory does not exist (or is a file), or it is not writable.
    Checked before a run, so that a typo costs no run; the write at the end still reports
    what this cannot foresee."""
    file = Path(path)
    where = f"cannot write the report to {path}"
    if file.is_dir():
        return f"{where}: it is a directory"
    folder = file.parent
    if not folder.is_dir():
        what = "is not a directory" if folder.exists() else "does not exist"
        return f"{where}: the directory {folder} {what}"
    if file.exists() and not os.access(file, os.W_OK):
        return f"{where}: the file is not writable"
    if not file.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"{where}: the directory {folder} is not writable"
    return None


def _write_setup_error(args: argparse.Namespace, target: str, message: str, out: Console,
                       err: Console, skip: set[str] | None = None) -> None:
    """A usage error still writes the requested reports (except the paths in ``skip``, known
    to be unwritable): no results, ``setup_error`` set (so a CI job that collects them sees
    the reason instead of a missing file)."""
    report = rp.Report(target=target, kit_version=kit_version(), profile=args.profile,
                       seed=args.seed, device=args.device, setup_error=message)
    _write_reports(args, report, out, err, skip=skip)


def _write_reports(args: argparse.Namespace, report: rp.Report, out: Console,
                   err: Console, skip: set[str] | None = None) -> bool:
    """Write the JSON, JUnit, Markdown and HTML reports that ``--json``/``--junit``/
    ``--markdown``/``--html`` ask for (except the paths in ``skip``); an unwritable path is
    reported on ``err``. Returns False when any requested report could not be written."""
    written = True
    for path, write in ((args.json, report.write_json), (args.junit, _junit_writer(report)),
                        (getattr(args, "markdown", None), _markdown_writer(report)),
                        (getattr(args, "html", None), _html_writer(report))):
        if not path or path in (skip or ()):
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


def _markdown_writer(report: rp.Report) -> Callable[[str], None]:
    def write(path: str) -> None:
        Path(path).write_text(md.to_markdown(report), encoding="utf-8")
    return write


def _html_writer(report: rp.Report) -> Callable[[str], None]:
    def write(path: str) -> None:
        from hcspec.conformance.outputs.html_report import write_html

        write_html([report], path)
    return write
