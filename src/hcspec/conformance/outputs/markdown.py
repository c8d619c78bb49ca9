"""The Markdown form of a conformance run (``hc-conformance run --markdown``, ``report``):
a report (:func:`to_markdown`) or several (:func:`reports_to_markdown`), and the short texts
the other outputs share (the achieved error, its floor, the legend, a family's score)."""

from __future__ import annotations

from typing import Any, Final

from hcspec.conformance.outputs.failure import explain
from hcspec.conformance.outputs.report import (
    BLOCKED,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    TIMEOUT,
    UNEXPECTED,
    XFAIL,
    XPASS,
    PropertyResult,
    Report,
)


# --- Markdown --------------------------------------------------------------------------------
def _md(text: object) -> str:
    """``text`` safe inside a Markdown table cell (pipes escaped, one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _unfailed_lines(r: PropertyResult) -> list[str]:
    """The section of a shown result that has no failure (an unexpected pass): why it is
    shown, and the worst comparison it measured."""
    lines = [f"- message: {_md(r.message)}"]
    if r.worst:
        lines.append(f"- worst: {_md(r.worst['label'])}: error "
                     f"{r.worst['error']:.3g}, allowance {r.worst['tolerance']:.3g}")
    return lines


_CODE = frozenset({"minimal counterexample", "reproduce"})
"""Explanation lines shown as code in Markdown."""


def floor_text(achieved: dict[str, Any]) -> str:
    """`` (E/F× floor)``: the achieved error over its rule's floor, '' when no positive floor
    was recorded (older reports, exact conditions)."""
    floor = achieved.get("floor")
    error = achieved.get("error")
    if not isinstance(floor, (int, float)) or not floor > 0 or not isinstance(
            error, (int, float)) or not error:
        return ""
    return f" ({error / floor:.2g}× floor)"


LEGEND: Final = (
    ("error", "what the check measured, e.g. the largest difference from the expected "
              "value relative to max(1, its magnitude)"),
    ("floor", "what a correct implementation errs by there, in the run's precision (the "
              "rounding unit, or the error of the spec's own closed form computed the same "
              "way)"),
    ("allowance", "the most error the property's rule allows, a multiple of the floor; a "
                  "property fails when error > allowance. 'error = k × floor' on a failure "
                  "says how far past a correct implementation's error it is"),
)
"""The three figures every report shows, one word each (the terminal, HTML and Markdown
print this legend)."""


def legend_text() -> str:
    """:data:`LEGEND` as one paragraph (``error: …; floor: …; allowance: …``)."""
    return "; ".join(f"{word}: {meaning}" for word, meaning in LEGEND) + "."


UNBOUNDED_TOLERANCE: Final = 1e300
"""A tolerance at or above this (or not finite) bounds nothing: a reported figure (HC's
growth over depth, whose "tolerance" is the largest float so the run keeps the largest)."""


def achieved_text(achieved: dict[str, Any] | None) -> str:
    """``E / A`` (error / allowance) of a result's ``achieved``; ``E (reported, no bound)``
    where the allowance bounds nothing (:data:`UNBOUNDED_TOLERANCE`), so no report shows an
    allowance that cannot fail next to "passed"; '' without ``achieved``. The floor is left
    to the failure's figures and the legend (:data:`LEGEND`): "4.2e+05× floor" on a pass
    read as alarming."""
    if not achieved:
        return ""
    error, tolerance = achieved.get("error"), achieved.get("tolerance")
    if isinstance(tolerance, (int, float)) and not tolerance < UNBOUNDED_TOLERANCE:
        return f"{error:.2g} (reported, no bound)"
    return f"{error:.2g} / {tolerance:.2g}"


def _achieved_text(r: PropertyResult) -> str:
    return achieved_text(r.achieved)


def family_score_text(entry: dict[str, int | float | None]) -> str:
    """One family's score as the terminal and Markdown show it: ``passed/checked``, with the
    expected failures counted apart (``7/9 (1 expected failure)``: 7 passed of 9 checked, one
    of the other two failed as expected), or ``n/a`` when nothing was checked."""
    if entry["score"] is None:
        return "n/a"
    text = f"{entry['passed']}/{entry['checked']}"
    xfail = int(entry.get("expected_failures") or 0)
    if xfail:
        text += f" ({xfail} expected failure{'s' if xfail > 1 else ''})"
    return text


def to_markdown(report: Report, heading_level: int = 2) -> str:
    """One report as Markdown: a heading with the target, the header (description, kind,
    versions, profile, seed, device, dtype, capabilities, declared conventions), the summary
    and family scores, a table of every property (status, examples, seconds, achieved error /
    tolerance, message) and, for each failure (failed, error, xpass, xfail), its message, the
    achieved error, the minimal counterexample and the reproduction command.

    Raises:
        ValueError: ``heading_level`` outside 1–5.
    """
    if not 1 <= heading_level <= 5:
        raise ValueError(f"heading_level: expected 1-5, got {heading_level}")
    h = "#" * heading_level
    lines = [f"{h} `{report.target}`", ""]
    if report.description:
        lines += [report.description, ""]
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    lines += [
        f"- kind `{report.kind}`; profile `{report.profile}`, seed {report.seed}, device "
        f"`{report.device}`, working dtype `{report.dtype}`",
        f"- versions: {versions}",
        f"- capabilities: {', '.join(report.capabilities) or 'none'}",
    ]
    if report.case is not None:
        lines.append(f"- one case replayed (`--case`): `{report.case}`; fields at their default "
                     f"(a field `--case` does not give takes its default): "
                     f"{', '.join(report.case_at_defaults) or 'none'}")
    if report.setup_error:
        lines.append(f"- setup error: {report.setup_error}")
    lines += [f"- **warning**: {_md(w)}" for w in report.warnings]
    if report.interrupted:
        lines.append(f"- **interrupted** ({report.interrupted_by or 'SIGINT'}) while running "
                     f"{report.running or 'nothing'}; not run: "
                     f"{', '.join(report.not_run) or 'none'}")
    declared, defaults = report.conventions_split()
    lines += ["", "Declared conventions:", "", "| field | value |", "| --- | --- |"]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in declared.items()]
    if defaults:
        lines += ["", f"At their defaults ({len(defaults)}): "
                  + "; ".join(f"{_md(k)}={_md(v)}" for k, v in defaults.items())]
    counts = ", ".join(f"{n} {s}" for s, n in report.summary.items() if n)
    families = ", ".join(f"{family} {family_score_text(entry)}"
                         for family, entry in report.family_scores().items())
    lines += ["", f"Summary: {counts or 'nothing ran'} — "
              f"{report.verdict}. Families (passed/checked): {families}.", ""]
    lines += [f"_{legend_text()}_", ""]
    lines += ["| property | status | examples | seconds | error / allowance | note |",
              "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in report.results:
        status = f"**{r.status}**" if r.status in UNEXPECTED or r.status == XFAIL else r.status
        note = r.message if r.status in (BLOCKED, NOT_APPLICABLE) else ""
        lines.append(f"| `{r.id}` | {status} | {r.examples} | {r.seconds:.2f} | "
                     f"{_achieved_text(r)} | {_md(note)} |")
    shown = [r for r in report.results if r.status in (FAILED, ERROR, XPASS, XFAIL, TIMEOUT)]
    if shown:
        lines += ["", f"{h}# Failures of `{report.target}`", ""]
    for r in shown:
        lines += [f"**`{r.id}`** ({r.status}) — {r.statement}", ""]
        if r.failure is None:  # an xpass: nothing failed
            lines += _unfailed_lines(r)
        else:
            if r.status == XFAIL:
                lines.append(f"- expected failure: {_md(r.expected_failure or '')}")
            for key, text in explain(r.failure):
                lines.append(f"- {key}: `{_md(text)}`" if key in _CODE else f"- {key}: {_md(text)}")
            if r.status == ERROR and r.failure.traceback:
                last = r.failure.traceback.strip().splitlines()[-1]
                lines.append(f"- exception: `{_md(last)}`")
        lines.append("")
    changed = [r for r in report.results if r.global_state_changes]
    if changed:
        lines += ["Global torch state changed by the target (restored by the kit): "
                  + "; ".join(f"`{r.id}`: {_md(', '.join(r.global_state_changes))}"
                              for r in changed), ""]
    return "\n".join(lines).rstrip() + "\n"


def reports_to_markdown(reports: list[Report], title: str | None = None,
                        preamble: str | None = None) -> str:
    """Several reports as one Markdown document: an optional ``# title`` and ``preamble``
    (Markdown, e.g. install notes and the classification of the findings), a summary table
    with one row per target, then :func:`to_markdown` of each report."""
    parts: list[str] = []
    if title:
        parts += [f"# {title}", ""]
    if preamble:
        parts += [preamble.strip(), ""]
    timeouts = any(report.summary[TIMEOUT] for report in reports)  # a column only then
    extra, rule = (" timeout |", " ---: |") if timeouts else ("", "")
    parts += ["| target | passed | failed | error | xfail | xpass | blocked | not applicable "
              f"|{extra} result |",
              f"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |{rule} --- |"]
    for report in reports:
        c = report.summary
        cell = f" {c[TIMEOUT]} |" if timeouts else ""
        parts.append(
            f"| `{report.target}` | {c[PASSED]} | {c[FAILED]} | {c[ERROR]} | {c[XFAIL]} | "
            f"{c[XPASS]} | {c[BLOCKED]} | {c[NOT_APPLICABLE]} |{cell} "
            f"{report.verdict} |")
    parts.append("")
    for report in reports:
        parts.append(to_markdown(report, heading_level=2))
    return "\n".join(parts).rstrip() + "\n"
