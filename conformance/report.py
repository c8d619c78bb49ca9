"""Structured results of a conformance run and their JSON form.

JSON report (``hc-conformance run --json PATH``)::

    {"target", "kit_version", "profile", "seed", "device",
     "results": [{"id", "status", "examples", "seconds", "message", ...}],
     "summary": {status: count}, ...}

``status`` is one of :data:`STATUSES`. Extra keys (the header, achieved errors, counterexamples,
reproduction commands, family scores) are additive; :meth:`Report.from_dict` reads a report
back (for ``hc-conformance report``).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hcspec.conformance.failure import Failure, explain

PASSED: Final = "passed"
FAILED: Final = "failed"
ERROR: Final = "error"
BLOCKED: Final = "blocked"
NOT_APPLICABLE: Final = "not_applicable"
XFAIL: Final = "xfail"
XPASS: Final = "xpass"
TIMEOUT: Final = "timeout"
STATUSES: Final[tuple[str, ...]] = (PASSED, FAILED, ERROR, BLOCKED, NOT_APPLICABLE, XFAIL, XPASS,
                                    TIMEOUT)
UNEXPECTED: Final[frozenset[str]] = frozenset({FAILED, ERROR, XPASS, TIMEOUT})
"""Statuses that make a run fail (exit code 1). ``blocked`` always follows a failure."""

JSON_SCHEMA_VERSION: Final = 1


def kit_version() -> str:
    """The installed hcspec version, or the source tree's."""
    try:
        return importlib.metadata.version("hcspec")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"


@dataclass
class PropertyResult:
    """The outcome of one property.

    Attributes:
        id, family, statement, theorem: from the catalogue.
        status: one of :data:`STATUSES`.
        examples: cases checked (explicit + hypothesis), not counting rejected ones.
        seconds: wall time.
        message: why it failed / is blocked / not applicable / expected to fail ('' on a pass).
        achieved: the worst measured quantity: ``{"label", "error", "tolerance"}`` (also on a
            pass), or None when the property measures nothing numeric.
        counterexample: the minimal failing case as JSON text (``--case`` reads it back).
        reproduce: a one-line command that reproduces the failure.
        traceback: the traceback of an unexpected exception (status ``error``).
        rejected: how many cases the factory rejected (unsupported configurations).
        inconclusive: how many cases could not show the property either way (not counted).
        expected_failure: the reason given in the expected-failures file, if any.
        shrunk_from: the failing explicit example ``counterexample`` was shrunk from (JSON),
            None when it was not shrunk; shrink_runs: the re-runs the shrinking took.
        failure: the structured failure (:class:`hcspec.conformance.failure.Failure`) of a
            failed, error, xfail or timeout result, None otherwise; every output renders it.
            ``message``, ``counterexample``, ``reproduce``, ``traceback``, ``shrunk_from`` and,
            when the failure is numeric, ``achieved`` repeat its fields (set together by
            :meth:`set_failure`), so the table's error column shows the failing case's figures.
        global_state_changes: what running the property changed in torch's global state
            (default dtype, RNG, grad mode, flags; restored by the kit), empty when nothing.
        series: curves the property measured, ``quantity -> case label -> one value per
            step`` (the depth family: ``‖X_l‖ / ‖X_0‖`` after each sublayer l = 0 … L, one
            curve per case), empty when it records none; the HTML report plots them.
    """

    id: str
    family: str
    statement: str
    theorem: str | None
    status: str
    examples: int = 0
    seconds: float = 0.0
    message: str = ""
    achieved: dict[str, Any] | None = None
    counterexample: str | None = None
    reproduce: str | None = None
    traceback: str | None = None
    rejected: int = 0
    inconclusive: int = 0
    expected_failure: str | None = None
    shrunk_from: str | None = None
    shrink_runs: int = 0
    failure: Failure | None = None
    global_state_changes: list[str] = field(default_factory=list)
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def skip_reason(self) -> str:
        """``status: reason`` for a property that did not run (blocked, not applicable),
        the status named once (``blocked: prerequisite shape.output failed``)."""
        label = self.status.replace("_", " ")
        reason = self.message.removeprefix(f"{self.status}: ") or "(no reason given)"
        return f"{label}: {reason}"

    def set_failure(self, failure: Failure) -> None:
        """Record ``failure`` and the fields that repeat it: message, counterexample,
        reproduction, traceback, shrunk-from and the achieved error (the failing case's
        figures; None when the failure is not a numeric comparison)."""
        self.failure = failure
        self.message = failure.message
        self.counterexample = failure.counterexample
        self.reproduce = failure.reproduce
        self.traceback = failure.traceback
        self.shrunk_from, self.shrink_runs = failure.shrunk_from, failure.shrink_runs
        self.achieved = (None if failure.error is None or failure.tolerance is None else
                         {"label": failure.label or "error", "error": failure.error,
                          "tolerance": failure.tolerance})
        if self.achieved is not None and failure.rule:
            self.achieved.update(rule=failure.rule, floor=failure.floor)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready dict (the failure as :meth:`Failure.to_dict`)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["failure"] = self.failure.to_dict() if self.failure is not None else None
        return data

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PropertyResult:
        """Read :meth:`to_dict` back (unknown keys ignored).

        Raises:
            ValueError: unknown status, or a malformed failure.
        """
        if raw.get("status") not in STATUSES:
            raise ValueError(f"unknown status {raw.get('status')!r} in {raw.get('id')!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in raw.items() if k in names}
        if isinstance(values.get("failure"), dict):
            values["failure"] = Failure.from_dict(values["failure"])
        return cls(**values)


@dataclass
class Report:
    """A whole run: the header (what was resolved) and one result per property.

    Attributes:
        target: the TARGET string; kit_version; profile; seed; device (``cpu``/``cuda``).
        dtype: the working dtype; kind; capabilities; conventions (as text);
        versions: package versions (python, torch, hypothesis, hcspec, the target's package).
        results: in run order.
        interrupted: the run was interrupted (the results are partial); not_run: ids that did
            not finish (the running one first); running: what was running (a property id, or
            ``setup: …`` when the target was being built or inspected); interrupted_by:
            ``SIGINT`` or ``SIGTERM``.
        timeout: the per-property limit in seconds (None: none).
        global_state_changes: what the target's factory or forward changed in torch's global
            state while the sample impl was inspected (restored; also in ``warnings``).
        warnings: run-level findings about the target as built (a sample impl that could not
            be built or whose conventions could not be read, a forward that is not
            deterministic in the mode the factory builds it), shown in the header.
        case: the one case replayed (``--case``), every field filled in, as JSON; None for
            a normal run. case_at_defaults: the names of its fields that hold their default
            value (``--case`` fills a field it does not give with the default).
    """

    target: str
    kit_version: str
    profile: str
    seed: int
    device: str
    dtype: str = ""
    kind: str = ""
    description: str = ""
    capabilities: list[str] = field(default_factory=list)
    conventions: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    results: list[PropertyResult] = field(default_factory=list)
    interrupted: bool = False
    not_run: list[str] = field(default_factory=list)
    setup_error: str | None = None
    warnings: list[str] = field(default_factory=list)
    case: str | None = None
    case_at_defaults: list[str] = field(default_factory=list)
    running: str | None = None
    interrupted_by: str | None = None
    timeout: float | None = None
    global_state_changes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, int]:
        """Status -> count (every status present, zeros included)."""
        counts = {status: 0 for status in STATUSES}
        for r in self.results:
            counts[r.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """True when nothing failed unexpectedly (no failed, error, timeout or xpass; not
        interrupted; no setup error)."""
        return (not self.interrupted and self.setup_error is None
                and not any(r.status in UNEXPECTED for r in self.results))

    @property
    def verdict(self) -> str:
        """``OK`` (:attr:`ok`), ``FAILED`` (a failure, error, timeout, xpass or setup error) or
        ``INTERRUPTED`` (stopped by a signal before a failure was seen: incomplete, not a
        failure)."""
        if self.ok:
            return "OK"
        failed = self.setup_error is not None or any(r.status in UNEXPECTED
                                                     for r in self.results)
        return "INTERRUPTED" if self.interrupted and not failed else "FAILED"

    def family_scores(self) -> dict[str, dict[str, int | float | None]]:
        """Per family: passed (status ``passed`` only), expected_failures (``xfail``: failed
        as the expected-failures file says; not counted as passed), checked (every status but
        not applicable), not_applicable, and score = passed / checked (None when nothing was
        checked)."""
        scores: dict[str, dict[str, int | float | None]] = {}
        for r in self.results:
            entry = scores.setdefault(r.family, {"passed": 0, "expected_failures": 0,
                                                 "checked": 0, "not_applicable": 0})
            if r.status == NOT_APPLICABLE:
                entry["not_applicable"] = int(entry["not_applicable"] or 0) + 1
                continue
            entry["checked"] = int(entry["checked"] or 0) + 1
            if r.status == PASSED:
                entry["passed"] = int(entry["passed"] or 0) + 1
            elif r.status == XFAIL:
                entry["expected_failures"] = int(entry["expected_failures"] or 0) + 1
        for entry in scores.values():
            checked = int(entry["checked"] or 0)
            entry["score"] = (int(entry["passed"] or 0) / checked) if checked else None
        return scores

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as a dict (see the module docstring)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "results"}
        data["schema_version"] = JSON_SCHEMA_VERSION
        data["results"] = [r.to_dict() for r in self.results]
        data["summary"] = self.summary
        data["families"] = self.family_scores()
        data["ok"] = self.ok
        return data

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as indented JSON.

        Raises:
            OSError: the file cannot be written.
        """
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n",
                              encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """Read a report written by :meth:`to_dict` (derived keys are recomputed).

        Raises:
            ValueError: a required key is missing or a status is unknown.
        """
        missing = [k for k in ("target", "kit_version", "profile", "seed", "device", "results")
                   if k not in data]
        if missing:
            raise ValueError(f"not a conformance report: missing keys {missing}")
        names = {f.name for f in dataclasses.fields(cls)} - {"results"}
        report = cls(**{k: v for k, v in data.items() if k in names})
        for raw in data["results"]:
            report.results.append(PropertyResult.from_dict(raw))
        return report

    @classmethod
    def read_json(cls, path: str | Path) -> Report:
        """Read a JSON report file (see :meth:`from_dict`).

        Raises:
            OSError, ValueError: unreadable file, invalid JSON or not a report.
        """
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


# --- Markdown --------------------------------------------------------------------------------
def _md(text: object) -> str:
    """``text`` safe inside a Markdown table cell (pipes escaped, one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _legacy_failure_lines(r: PropertyResult) -> list[str]:
    """The failure section of a result read from a report without ``failure`` (as such
    reports were always rendered, so committed pages stay as they are)."""
    lines = [f"- message: {_md(r.message)}"]
    if r.achieved:
        lines.append(f"- worst: {_md(r.achieved['label'])}: error "
                     f"{r.achieved['error']:.3g}, tolerance {r.achieved['tolerance']:.3g}")
    if r.counterexample:
        lines.append(f"- minimal counterexample: `{r.counterexample}`")
    if r.shrunk_from:
        lines.append(f"- shrunk from the explicit example `{r.shrunk_from}` "
                     f"({r.shrink_runs} re-runs)")
    if r.reproduce:
        lines.append(f"- reproduce: `{r.reproduce}`")
    if r.status == ERROR and r.traceback:
        last = r.traceback.strip().splitlines()[-1]
        lines.append(f"- exception: `{_md(last)}`")
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


UNBOUNDED_TOLERANCE: Final = 1e300
"""A tolerance at or above this (or not finite) bounds nothing: a reported figure (HC's
growth over depth, whose "tolerance" is the largest float so the run keeps the largest)."""


def achieved_text(achieved: dict[str, Any] | None) -> str:
    """``E / T (E/F× floor)`` of a result's ``achieved``; ``E (reported, no bound)`` where
    the tolerance bounds nothing (:data:`UNBOUNDED_TOLERANCE`), so no report shows a
    tolerance that cannot fail next to "passed"; '' without ``achieved``."""
    if not achieved:
        return ""
    error, tolerance = achieved.get("error"), achieved.get("tolerance")
    if isinstance(tolerance, (int, float)) and not tolerance < UNBOUNDED_TOLERANCE:
        return f"{error:.2g} (reported, no bound)"
    return f"{error:.2g} / {tolerance:.2g}{floor_text(achieved)}"


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
    lines += ["", "Declared conventions:", "", "| field | value |", "| --- | --- |"]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in report.conventions.items()]
    counts = ", ".join(f"{n} {s}" for s, n in report.summary.items() if n)
    families = ", ".join(f"{family} {family_score_text(entry)}"
                         for family, entry in report.family_scores().items())
    lines += ["", f"Summary: {counts or 'nothing ran'} — "
              f"{report.verdict}. Families (passed/checked): {families}.", ""]
    lines += ["| property | status | examples | seconds | error / tolerance | note |",
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
        if r.failure is None:  # a report written before failures were structured
            lines += _legacy_failure_lines(r)
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
