"""Terminal output of the CLI (rich): the run header, the results table, each failure's
minimal counterexample and reproduction command and the summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.failure import explain

STYLES = {
    rp.PASSED: "green", rp.FAILED: "bold red", rp.ERROR: "bold magenta", rp.BLOCKED: "yellow",
    rp.NOT_APPLICABLE: "dim", rp.XFAIL: "cyan", rp.XPASS: "bold red", rp.TIMEOUT: "bold red",
}


def print_preamble(console: Console, report: rp.Report) -> None:
    """The part of the header known before anything of the target runs: kit version, target,
    description, profile, seed, device, versions and the time limit."""
    console.print(f"[bold]hc-conformance[/bold] {escape(report.kit_version)} — target "
                  f"[bold]{escape(report.target)}[/bold]")
    if report.description:
        console.print(f"  {escape(report.description)}")
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    limit = f"{report.timeout:g} s" if report.timeout else "none"
    examples = ("" if report.max_examples is None
                else f" ({report.max_examples} hypothesis examples per property)")
    console.print(f"  profile {report.profile}{examples}, seed {report.seed}, device "
                  f"{report.device}, timeout per property {limit}; {escape(versions)}")


def print_header(console: Console, report: rp.Report, *, preamble: bool = True) -> None:
    """What was resolved: target, kind, versions, device, dtype, profile, seed, conventions
    (without the :func:`print_preamble` lines when ``preamble`` is False, because they were
    printed already)."""
    if preamble:
        print_preamble(console, report)
    console.print(f"  kind {escape(report.kind)}, working dtype {report.dtype}")
    console.print(f"  capabilities: {', '.join(report.capabilities) or 'none'}")
    declared, defaults = report.conventions_split()
    conventions = "; ".join(f"{k}={v}" for k, v in declared.items() if v) or "none"
    folded = f" ({len(defaults)} more at their defaults: see the JSON or HTML report)" \
        if defaults else ""
    console.print(f"  conventions declared: {escape(conventions)}{folded}", soft_wrap=True)
    if report.case is not None:
        console.print(f"  [bold]case[/bold] (one case replayed, --case): {escape(report.case)}",
                      soft_wrap=True)
        defaulted = ", ".join(report.case_at_defaults) or "none"
        console.print(f"    a field --case does not give takes its default; fields at their "
                      f"default here: {escape(defaulted)}", soft_wrap=True)
        if "perturb" in report.case_at_defaults and "param_scale" in report.case_at_defaults:
            console.print("    perturb 0: the parameters stay at the factory's init, where "
                          "e.g. a static HC's H_res = I hides a transpose", soft_wrap=True)
    for warning in report.warnings:
        console.print(f"  [bold yellow]warning:[/] {escape(warning)}")


def _achieved(r: rp.PropertyResult) -> str:
    return md.achieved_text(r.achieved)


def print_table(console: Console, report: rp.Report) -> None:
    """One row per property that applies: id, status, examples, seconds, error / allowance
    (the not-applicable rows are folded: counted and grouped by reason below the table, with
    the blocked ones, :func:`print_reasons`); then the legend of the figures
    (:data:`hcspec.conformance.outputs.markdown.LEGEND`)."""
    table = Table(show_lines=False, header_style="bold")
    table.add_column("property", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("examples", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("error / allowance", justify="right", no_wrap=True)
    for r in report.results:
        if r.status == rp.NOT_APPLICABLE:
            continue
        table.add_row(r.id, f"[{STYLES[r.status]}]{r.status}[/]", str(r.examples),
                      f"{r.seconds:.2f}", _achieved(r))
    console.print(table)
    print_reasons(console, report)
    if report.results:
        console.print(f"[dim]{escape(md.legend_text())}[/]", soft_wrap=True)


REASONED: tuple[str, ...] = (rp.NOT_APPLICABLE, rp.BLOCKED)
"""Statuses of properties that did not run; the table is followed by their reasons."""


def print_reasons(console: Console, report: rp.Report) -> None:
    """Why properties did not run, grouped by reason: one line per (status, reason), then the
    ids it concerns, e.g. ``not applicable: applies to mhc; the target's kind is hc-static``
    followed by the nine constraints ids."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in report.results:
        if r.status in REASONED:
            reason = r.message.removeprefix("blocked: ") or "(no reason given)"
            groups.setdefault((r.status, reason), []).append(r.id)
    folded = sum(1 for r in report.results if r.status == rp.NOT_APPLICABLE)
    if folded:
        console.print(f"[dim]{folded} not applicable (not in the table), by reason:[/]")
    for (status, reason), ids in sorted(groups.items(), key=lambda g: REASONED.index(g[0][0])):
        label = status.replace("_", " ")
        console.print(f"[{STYLES[status]}]{label}[/]: {escape(reason)}", soft_wrap=True)
        console.print(f"  {', '.join(ids)}", style="dim", soft_wrap=True)


def print_failures(console: Console, report: rp.Report, verbose: bool = False) -> None:
    """The failures first, one card each (failed, error, timeout, xpass), before the table:
    a rule, the property and its status, then its explanation
    (:func:`hcspec.conformance.outputs.failure.explain`)."""
    failing = [r for r in report.results if r.status in rp.UNEXPECTED]
    if not failing:
        return
    console.print(f"\n[bold red]{len(failing)} failure{'s' if len(failing) > 1 else ''}[/]")
    for r in failing:
        console.rule(style="red")
        _explain(console, r, verbose)
    console.rule(style="red")


def print_notes(console: Console, report: rp.Report, verbose: bool = False) -> None:
    """After the table: with ``verbose`` the properties that did not fail but carry a
    message (blocked, not applicable, a pass with a note), one by one; then what the target
    changed in torch's global state (restored)."""
    for r in report.results:
        if verbose and r.message and r.status not in rp.UNEXPECTED:
            _explain(console, r, verbose)
    _global_state(console, report)


def _explain(console: Console, r: rp.PropertyResult, verbose: bool) -> None:
    console.print(f"[{STYLES[r.status]}]{r.status.upper()}[/] [bold]{r.id}[/bold] — "
                  f"{escape(r.statement)}")
    if r.failure is None:
        console.print(f"  {escape(r.message)}", soft_wrap=True)
        return
    # an error's traceback and a timeout's stack always; the traceback of the target's
    # exception behind a failure (a factory or forward that raised) under -v
    for key, text in explain(r.failure, traceback=verbose or r.status in (rp.ERROR,
                                                                           rp.TIMEOUT)):
        if key == "traceback":
            console.print(escape(text), style="dim", soft_wrap=True)
        elif key == "message":
            console.print(f"  {escape(text)}", soft_wrap=True)
        else:
            console.print(f"  {key}: {escape(text)}", soft_wrap=True)


def _global_state(console: Console, report: rp.Report) -> None:
    changed = [r for r in report.results if r.global_state_changes]
    if changed:
        console.print("\n[bold yellow]global state:[/] the target changed torch's global state "
                      "(the kit restored it after each property):", soft_wrap=True)
        for r in changed:
            console.print(f"  {r.id}: {escape('; '.join(r.global_state_changes))}",
                          soft_wrap=True)


def print_details(console: Console, report: rp.Report, verbose: bool = False) -> None:
    """Each failure (failed, error, timeout, xpass) explained
    (:func:`hcspec.conformance.outputs.failure.explain`: message, the failing case's error and
    allowance, hint, minimal counterexample, shrunk-from, reproduction, an error's traceback,
    a timeout's stuck stack, and with ``verbose`` the traceback of the target's exception
    behind a failure); blocked and not-applicable reasons when ``verbose``; then what the
    target changed in torch's global state (restored). The CLI prints the failures before
    the table instead (:func:`print_failures`, :func:`print_notes`)."""
    for r in report.results:
        if r.status not in rp.UNEXPECTED and not (verbose and r.message):
            continue
        console.print()
        _explain(console, r, verbose)
    _global_state(console, report)


def print_summary(console: Console, report: rp.Report) -> None:
    """Counts per status and the per-family score (passed / checked; expected failures are
    counted apart, not as passed)."""
    counts = ", ".join(f"{n} {s}" for s, n in report.summary.items() if n)
    console.print(f"\n[bold]summary[/bold]: {counts or 'nothing ran'}")
    parts = [f"{family} {md.family_score_text(entry)}"
             for family, entry in report.family_scores().items()]
    console.print("families (passed/checked): " + ", ".join(parts))
    if report.interrupted:
        console.print(f"[bold yellow]interrupted[/] ({report.interrupted_by or 'SIGINT'}) while "
                      f"running {escape(report.running or 'nothing')}; not run: "
                      f"{', '.join(report.not_run) or 'none'}", soft_wrap=True)
    colour = {"OK": "bold green", "INTERRUPTED": "bold yellow"}.get(report.verdict, "bold red")
    console.print(f"result: [{colour}]{report.verdict}[/]")
