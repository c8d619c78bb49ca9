"""Structured results of a conformance run and their JSON form.

JSON report (``hc-conformance run --json PATH``)::

    {"target", "kit_version", "profile", "seed", "device",
     "results": [{"id", "status", "examples", "seconds", "message", ...}],
     "summary": {status: count}, ...}

``status`` is one of :data:`STATUSES`. Extra keys (the header, achieved errors, counterexamples,
reproduction commands, family scores) are additive; :meth:`Report.from_dict` reads a report
back (for ``hc-conformance report``).

A result's ``failure`` (:class:`hcspec.conformance.outputs.failure.Failure`) is its one record of
why it failed. Its ``message``, ``achieved``, ``counterexample``, ``reproduce``, ``traceback``,
``shrunk_from`` and ``shrink_runs`` keys are written from it for readers of the JSON (a CI
script reading ``message``) and never read back. ``schema_version`` 2 says so; a report of
an earlier version (1, or none) is migrated when read (:func:`migrate`): a failure result
without ``failure`` gets one built from those keys, so every output renders one record.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hcspec.conformance.outputs.failure import Failure

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

JSON_SCHEMA_VERSION: Final = 2
"""Version 2: a result's failure keys are derived from ``failure`` (see the module
docstring); version 1 reports are read through :func:`migrate`."""


TEST_ID_PREFIX: Final = "hcspec.conformance"
"""The first part of every property's test id, under every route: pytest's node id
(``hcspec.conformance::shape.output`` under ``--hc-target``), JUnit's classname and name
(from ``hc-conformance run --junit`` and from pytest's ``--junitxml`` alike: classname
``hcspec.conformance``, name ``shape.output``)."""


def test_id(property_id: str) -> str:
    """A property's test id, the same under pytest and the CLI:
    ``hcspec.conformance::<property id>``.

    >>> test_id("shape.output")
    'hcspec.conformance::shape.output'
    """
    return f"{TEST_ID_PREFIX}::{property_id}"


def kit_version() -> str:
    """The installed hcspec version, or the source tree's."""
    try:
        return importlib.metadata.version("hcspec")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"


_FAILURE_STATUSES: Final[frozenset[str]] = frozenset({FAILED, ERROR, XFAIL, TIMEOUT})
"""Statuses whose result holds a :class:`~hcspec.conformance.outputs.failure.Failure`."""

_DERIVED: Final = ("message", "achieved", "counterexample", "reproduce", "traceback",
                   "shrunk_from", "shrink_runs")
"""JSON keys of a result that are read from its failure (written for readers of the JSON;
never read back: :meth:`PropertyResult.from_dict` reads ``failure``)."""


@dataclass
class PropertyResult:
    """The outcome of one property. Its :attr:`failure` is the one record of why it failed:
    ``message``, ``counterexample``, ``reproduce``, ``traceback``, ``shrunk_from``,
    ``shrink_runs`` and (for a failure) ``achieved`` are read from it, never stored apart.

    Attributes:
        id, family, statement, theorem: from the catalogue.
        status: one of :data:`STATUSES`.
        examples: cases checked (explicit + hypothesis), not counting rejected ones.
        seconds: wall time.
        note: why a result without a failure is what it is: blocked, not applicable, an
            unexpected pass (xpass), or a pass that did not count some cases ('' otherwise).
        worst: the worst measured comparison of a result without a failure:
            ``{"label", "error", "tolerance", "rule", "floor", "rules"}``, None when the
            property measures nothing numeric.
        rejected: how many cases the factory rejected (unsupported configurations).
        inconclusive: how many cases could not show the property either way (not counted).
        expected_failure: the reason given in the expected-failures file, if any.
        failure: the structured failure (:class:`hcspec.conformance.outputs.failure.Failure`) of a
            failed, error, xfail or timeout result, None otherwise; every output renders it.
        global_state_changes: what running the property changed in torch's global state
            (default dtype, RNG, grad mode, flags; restored by the kit), empty when nothing.
        series: curves the property measured, ``quantity -> case label -> one value per
            step`` (the depth family: ``‖X_l‖ / ‖X_0‖`` after each sublayer l = 0 … L, one
            curve per case), empty when it records none; the HTML report plots them.

    A result without a failure is built with its ``note`` and ``worst``; one of a failure
    status carries its ``failure`` (:func:`failure_from_fields` builds one from flat fields).
    """

    id: str
    family: str
    statement: str
    theorem: str | None
    status: str
    examples: int = 0
    seconds: float = 0.0
    note: str = ""
    worst: dict[str, Any] | None = None
    rejected: int = 0
    inconclusive: int = 0
    expected_failure: str | None = None
    failure: Failure | None = None
    global_state_changes: list[str] = field(default_factory=list)
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    # --- read from the failure ---------------------------------------------------------
    @property
    def message(self) -> str:
        """Why it failed (the failure's message; an xfail's prefixed ``expected failure
        (REASON): ``), or :attr:`note` for a result without a failure."""
        if self.failure is None:
            return self.note
        if self.status == XFAIL:
            return f"expected failure ({self.expected_failure}): {self.failure.message}"
        return self.failure.message

    @property
    def achieved(self) -> dict[str, Any] | None:
        """The figures the error column shows: the failing case's comparison
        (``{"label", "error", "tolerance"}`` plus ``rule`` and ``floor`` when a rule gave the
        allowance; None when the failure is not numeric), or :attr:`worst` without a
        failure."""
        failure = self.failure
        if failure is None:
            return self.worst
        if failure.error is None or failure.tolerance is None:
            return None
        figures: dict[str, Any] = {"label": failure.label or "error", "error": failure.error,
                                   "tolerance": failure.tolerance}
        if failure.rule:
            figures.update(rule=failure.rule, floor=failure.floor)
        return figures

    @property
    def counterexample(self) -> str | None:
        """The minimal failing case as JSON text (``--case`` reads it back), None if none."""
        return self.failure.counterexample if self.failure is not None else None

    @property
    def reproduce(self) -> str | None:
        """The one-line command that reproduces the failure, None if none."""
        return self.failure.reproduce if self.failure is not None else None

    @property
    def traceback(self) -> str | None:
        """The traceback of an unexpected exception (status ``error``) or of the target's
        exception a failure was raised from, else None."""
        return self.failure.traceback if self.failure is not None else None

    @property
    def shrunk_from(self) -> str | None:
        """The explicit example :attr:`counterexample` was shrunk from (JSON), None when it
        was not shrunk."""
        return self.failure.shrunk_from if self.failure is not None else None

    @property
    def shrink_runs(self) -> int:
        """The re-runs the shrinking took (0 when not shrunk)."""
        return self.failure.shrink_runs if self.failure is not None else 0

    @property
    def skip_reason(self) -> str:
        """``status: reason`` for a property that did not run (blocked, not applicable),
        the status named once (``blocked: prerequisite shape.output failed``)."""
        label = self.status.replace("_", " ")
        reason = self.message.removeprefix(f"{self.status}: ") or "(no reason given)"
        return f"{label}: {reason}"

    def set_failure(self, failure: Failure) -> None:
        """Record ``failure`` (what every derived field reads); the note and worst comparison
        of a run without a failure no longer apply."""
        self.failure, self.note, self.worst = failure, "", None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready dict: its fields (the failure as :meth:`Failure.to_dict`)
        and, for readers of the JSON, the keys read from the failure (:data:`_DERIVED`:
        ``message``, ``achieved``, ``counterexample``, ``reproduce``, ``traceback``,
        ``shrunk_from``, ``shrink_runs``) in place of ``note`` and ``worst``."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "note":
                data.update({key: getattr(self, key) for key in _DERIVED})
            elif f.name != "worst":
                data[f.name] = getattr(self, f.name)
        data["failure"] = self.failure.to_dict() if self.failure is not None else None
        return data

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PropertyResult:
        """Read :meth:`to_dict` back (unknown keys ignored). A result with ``failure`` is read
        from it (the derived keys are ignored); one without, of a failure status (a report
        written before failures were structured), gets its failure from the derived keys
        (:func:`failure_from_fields`).

        Raises:
            ValueError: unknown status, or a malformed failure.
        """
        if raw.get("status") not in STATUSES:
            raise ValueError(f"unknown status {raw.get('status')!r} in {raw.get('id')!r}")
        names = {f.name for f in dataclasses.fields(cls)} - {"note", "worst"}
        values = {k: v for k, v in raw.items() if k in names}
        if isinstance(values.get("failure"), dict):
            values["failure"] = Failure.from_dict(values["failure"])
        status, message = values["status"], raw.get("message", "")
        if values.get("failure") is None and status in _FAILURE_STATUSES:
            values["failure"] = failure_from_fields(
                status, message=message, achieved=raw.get("achieved"),
                expected_failure=values.get("expected_failure"),
                counterexample=raw.get("counterexample"), reproduce=raw.get("reproduce"),
                traceback=raw.get("traceback"), shrunk_from=raw.get("shrunk_from"),
                shrink_runs=raw.get("shrink_runs", 0))
        elif values.get("failure") is None:
            values.update(note=message, worst=raw.get("achieved"))
        return cls(**values)


def failure_from_fields(status: str, *, message: str, achieved: dict[str, Any] | None = None,
                        expected_failure: str | None = None, counterexample: str | None = None,
                        reproduce: str | None = None, traceback: str | None = None,
                        shrunk_from: str | None = None, shrink_runs: int = 0) -> Failure:
    """The :class:`Failure` of a result given as flat fields (a result of a report written
    before failures were structured, or built by a caller that has no exception): the
    message (an xfail's ``expected failure (REASON): `` prefix removed), the achieved
    comparison's figures, and the rest as given.

    Raises:
        ValueError: ``status`` is not a failure status (failed, error, xfail, timeout).
    """
    if status not in _FAILURE_STATUSES:
        raise ValueError(f"a {status!r} result has no failure")
    if status == XFAIL and expected_failure is not None:
        message = message.removeprefix(f"expected failure ({expected_failure}): ")
    figures = achieved or {}

    def number(key: str) -> float | None:
        value = figures.get(key)
        return float(value) if isinstance(value, (int, float, str)) and not isinstance(
            value, bool) else None

    kind = {ERROR: "error", TIMEOUT: "timeout"}.get(status, "failed")
    exception = {ERROR: (message.partition(":")[0] if ":" in message else "Exception"),
                 TIMEOUT: "TimedOut"}.get(status, "PropertyFailure")
    return Failure(kind=kind, exception=exception, message=message,
                   label=str(figures["label"]) if "label" in figures else None,
                   error=number("error"), tolerance=number("tolerance"),
                   rule=str(figures["rule"]) if figures.get("rule") else None,
                   floor=number("floor"), counterexample=counterexample,
                   shrunk_from=shrunk_from, shrink_runs=shrink_runs, reproduce=reproduce,
                   traceback=traceback)


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
        max_examples: the hypothesis examples per property after the explicit ones (the
            profile's, or ``--max-examples``); None in a report of an earlier kit.
        declared_conventions: the names of the conventions the target declared (those that
            differ from the defaults; ``conventions`` holds every field): the reports show
            these and fold the rest. None (a report of an earlier kit): unknown, all shown.
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
    declared_conventions: list[str] | None = None
    max_examples: int | None = None

    def conventions_split(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(declared, at their defaults)``: :attr:`conventions` split by
        :attr:`declared_conventions` (all declared when that is None)."""
        if self.declared_conventions is None:
            return dict(self.conventions), {}
        chosen = set(self.declared_conventions)
        return ({k: v for k, v in self.conventions.items() if k in chosen},
                {k: v for k, v in self.conventions.items() if k not in chosen})

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

        A report of an earlier schema version is migrated first (:func:`migrate`).

        Raises:
            ValueError: a required key is missing, a status is unknown, or the report's
                schema version is newer than this kit's.
        """
        missing = [k for k in ("target", "kit_version", "profile", "seed", "device", "results")
                   if k not in data]
        if missing:
            raise ValueError(f"not a conformance report: missing keys {missing}")
        data = migrate(data)
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


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A report dict of any schema version up to :data:`JSON_SCHEMA_VERSION`, as the current
    version (``data`` itself is not changed). Version 1 (or none): a result of a failure
    status (failed, error, xfail, timeout) without ``failure`` gets one built from its
    ``message``, ``achieved``, ``counterexample``, ``reproduce``, ``traceback``,
    ``shrunk_from`` and ``shrink_runs`` (:func:`failure_from_fields`).

    Raises:
        ValueError: the version is newer than this kit's, or not a number.
    """
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > JSON_SCHEMA_VERSION:
        raise ValueError(f"report schema_version {version!r}: this kit reads versions up to "
                         f"{JSON_SCHEMA_VERSION} (a newer kit wrote it?)")
    if version == JSON_SCHEMA_VERSION:
        return data
    results = []
    for raw in data["results"]:
        if raw.get("failure") is None and raw.get("status") in _FAILURE_STATUSES:
            failure = failure_from_fields(
                raw["status"], message=str(raw.get("message") or ""),
                achieved=raw.get("achieved"), expected_failure=raw.get("expected_failure"),
                counterexample=raw.get("counterexample"), reproduce=raw.get("reproduce"),
                traceback=raw.get("traceback"), shrunk_from=raw.get("shrunk_from"),
                shrink_runs=int(raw.get("shrink_runs") or 0))
            raw = {**raw, "failure": failure.to_dict()}
        results.append(raw)
    return {**data, "results": results, "schema_version": JSON_SCHEMA_VERSION}


