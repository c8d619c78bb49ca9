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
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

PASSED: Final = "passed"
FAILED: Final = "failed"
ERROR: Final = "error"
BLOCKED: Final = "blocked"
NOT_APPLICABLE: Final = "not_applicable"
XFAIL: Final = "xfail"
XPASS: Final = "xpass"
STATUSES: Final[tuple[str, ...]] = (PASSED, FAILED, ERROR, BLOCKED, NOT_APPLICABLE, XFAIL, XPASS)
UNEXPECTED: Final[frozenset[str]] = frozenset({FAILED, ERROR, XPASS})
"""Statuses that make a run fail (exit code 1). ``blocked`` always follows a failure."""

JSON_SCHEMA_VERSION: Final = 1


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
        expected_failure: the reason given in the expected-failures file, if any.
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
    expected_failure: str | None = None


@dataclass
class Report:
    """A whole run: the header (what was resolved) and one result per property.

    Attributes:
        target: the TARGET string; kit_version; profile; seed; device (``cpu``/``cuda``).
        dtype: the working dtype; kind; capabilities; conventions (as text);
        versions: package versions (python, torch, hypothesis, hcspec, the target's package).
        results: in run order.
        interrupted: the run was interrupted (the results are partial); not_run: ids left.
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

    @property
    def summary(self) -> dict[str, int]:
        """Status -> count (every status present, zeros included)."""
        counts = {status: 0 for status in STATUSES}
        for r in self.results:
            counts[r.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """True when nothing failed unexpectedly (no failed, error or xpass; not interrupted;
        no setup error)."""
        return (not self.interrupted and self.setup_error is None
                and not any(r.status in UNEXPECTED for r in self.results))

    def family_scores(self) -> dict[str, dict[str, int | float | None]]:
        """Per family: passed, checked (passed + failed + error + blocked + xfail + xpass),
        not_applicable, and score = passed / checked (None when nothing was checked)."""
        scores: dict[str, dict[str, int | float | None]] = {}
        for r in self.results:
            entry = scores.setdefault(r.family, {"passed": 0, "checked": 0, "not_applicable": 0})
            if r.status == NOT_APPLICABLE:
                entry["not_applicable"] = int(entry["not_applicable"] or 0) + 1
                continue
            entry["checked"] = int(entry["checked"] or 0) + 1
            if r.status in (PASSED, XFAIL):
                entry["passed"] = int(entry["passed"] or 0) + 1
        for entry in scores.values():
            checked = int(entry["checked"] or 0)
            entry["score"] = (int(entry["passed"] or 0) / checked) if checked else None
        return scores

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as a dict (see the module docstring)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "results"}
        data["schema_version"] = JSON_SCHEMA_VERSION
        data["results"] = [dataclasses.asdict(r) for r in self.results]
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
        result_names = {f.name for f in dataclasses.fields(PropertyResult)}
        for raw in data["results"]:
            if raw.get("status") not in STATUSES:
                raise ValueError(f"unknown status {raw.get('status')!r} in {raw.get('id')!r}")
            report.results.append(
                PropertyResult(**{k: v for k, v in raw.items() if k in result_names}))
        return report

    @classmethod
    def read_json(cls, path: str | Path) -> Report:
        """Read a JSON report file (see :meth:`from_dict`).

        Raises:
            OSError, ValueError: unreadable file, invalid JSON or not a report.
        """
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
