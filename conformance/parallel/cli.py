"""``hc-conformance run TARGET --world-size N``: the ``parallel`` family from the command line.

:func:`cmd_run_parallel` is what ``conformance/cli.py`` calls when ``--world-size`` is given: it
runs :func:`hcspec.conformance.parallel.check_parallel` (only the parallel family: the other
families run in one process, without ``--world-size``) and prints and writes the report as
``run`` does.
"""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from hcspec.conformance import junit, terminal
from hcspec.conformance.parallel.harness import DEFAULT_TIMEOUT, check_parallel
from hcspec.conformance.targets import DEFAULT_TARGET, ENV_VAR, TargetError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def cmd_run_parallel(args: argparse.Namespace) -> int:
    """Run the parallel family for the parsed ``run`` arguments; return the exit code (0 ok,
    1 a property failed or errored, 2 a usage error: bad TARGET, world size, property id, or
    ``--case``/``--expected-failures``, which the family does not take; 130 interrupted)."""
    out = Console() if Console().is_terminal else Console(width=160)
    err = Console(stderr=True)
    target = args.target or os.environ.get(ENV_VAR) or DEFAULT_TARGET
    if getattr(args, "case", None) or getattr(args, "expected_failures", None):
        err.print("[bold red]error:[/] --case and --expected-failures do not apply to "
                  "--world-size runs", highlight=False)
        return EXIT_USAGE
    try:
        report = check_parallel(target, world_size=args.world_size, device=args.device,
                                seed=args.seed, only=args.only, skip=args.skip,
                                timeout=float(os.environ.get("HC_CONFORMANCE_PARALLEL_TIMEOUT",
                                                             DEFAULT_TIMEOUT)),
                                profile=args.profile)
    except (TargetError, ValueError) as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("interrupted: the ranks were stopped; no report")
        return EXIT_INTERRUPTED
    terminal.print_header(out, report)
    if report.setup_error:
        err.print(f"[bold red]error:[/] {report.setup_error}", highlight=False)
    terminal.print_table(out, report)
    terminal.print_details(out, report, verbose=getattr(args, "verbose", False))
    terminal.print_summary(out, report)
    code = EXIT_OK if report.ok else EXIT_FAILED
    for path, write in ((args.json, report.write_json),
                        (args.junit, lambda p: junit.write_junit(report, p))):
        if path:
            try:
                write(path)
            except OSError as exc:
                err.print(f"[bold red]error:[/] cannot write the report to {path}: {exc}",
                          highlight=False)
                code = EXIT_USAGE if code == EXIT_OK else code
            else:
                out.print(f"report written to {path}", highlight=False)
    return code
