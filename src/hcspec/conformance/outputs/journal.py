"""The run's journal: nothing is lost when the process dies.

An append-only file of JSON lines beside the reports (``r.json`` → ``r.journal.jsonl``;
``--journal PATH`` elsewhere), written as the run goes: the header once the target is
inspected, ``running`` before each property starts, each finished result at once, and
``end`` when the run is over. Every line is flushed and ``fsync``-ed before the run goes
on, so a process killed by SIGKILL, SIGSEGV or the OOM killer leaves every finished result
and the property that was running (:func:`read`). ``hc-conformance run --resume`` reads it
back and runs only what had not finished (the header must be the same run: target, profile,
seed, device).

Records (one JSON object per line, ``"event"`` first):

* ``{"event": "header", "report": {...}}`` — the report's header, without results;
* ``{"event": "running", "id": "law.probed"}`` — a property starts;
* ``{"event": "result", "result": {...}}`` — a property finished (``PropertyResult.to_dict``);
* ``{"event": "resumed", "finished": N}`` — a ``--resume`` run took over;
* ``{"event": "end", "interrupted": false}`` — the run is over (the reports follow).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from hcspec.conformance.outputs import report as rp

SUFFIX: Final = ".journal.jsonl"
"""The journal's name beside a report: ``r.json`` → ``r.journal.jsonl``."""

SAME_RUN: Final = ("target", "profile", "seed", "device")
"""The header fields a ``--resume`` run must share with the journal's run."""


def beside(report_path: str | Path) -> Path:
    """The journal's path beside ``report_path`` (its suffix replaced by :data:`SUFFIX`)."""
    path = Path(report_path)
    return path.with_name(path.stem + SUFFIX) if path.suffix else path.with_name(
        path.name + SUFFIX)


class Journal:
    """An open journal, appended to line by line (each line flushed and fsync-ed).

    Raises:
        OSError: the file cannot be opened or written (from :meth:`open` and the writers).
    """

    def __init__(self, path: Path, stream: IO[str]) -> None:
        self.path = path
        self._stream = stream

    @classmethod
    def open(cls, path: str | Path, *, append: bool) -> Journal:
        """Open ``path``: truncated for a new run, appended to with ``append`` (``--resume``)."""
        target = Path(path)
        return cls(target, target.open("a" if append else "w", encoding="utf-8"))

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and make it durable (flush, then ``os.fsync``)."""
        self._stream.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._stream.flush()
        os.fsync(self._stream.fileno())

    def header(self, report: rp.Report) -> None:
        """The run's header (the report without results)."""
        data = report.to_dict()
        data.pop("results", None)
        self.write({"event": "header", "report": data})

    def running(self, property_id: str) -> None:
        """``property_id`` starts."""
        self.write({"event": "running", "id": property_id})

    def result(self, result: rp.PropertyResult) -> None:
        """One finished result."""
        self.write({"event": "result", "result": result.to_dict()})

    def resumed(self, finished: int) -> None:
        """A ``--resume`` run takes over with ``finished`` results from the journal."""
        self.write({"event": "resumed", "finished": finished})

    def end(self, report: rp.Report) -> None:
        """The run is over."""
        self.write({"event": "end", "interrupted": report.interrupted,
                    "verdict": report.verdict})

    def close(self) -> None:
        """Close the file."""
        self._stream.close()


@dataclass
class State:
    """What a journal holds.

    Attributes:
        header: the run's header (a report's fields, no results), None before the target
            was inspected.
        results: the finished results, in order (a property finished twice: the last).
        running: the property that had started and not finished when the journal ends (the
            one a killed run was running), None when none.
        ended: the run reached its end.
        lines_skipped: lines that could not be read (a line cut short by the kill).
    """

    header: dict[str, Any] | None = None
    results: list[rp.PropertyResult] = field(default_factory=list)
    running: str | None = None
    ended: bool = False
    lines_skipped: int = 0

    def report(self) -> rp.Report:
        """A report of what the journal holds: the header, the finished results, and, when
        the run did not end, ``interrupted`` with ``running`` set (``interrupted_by``
        ``the process died``: it ended without a word, read from the journal)."""
        data = dict(self.header or {"target": "?", "kit_version": rp.kit_version(),
                                    "profile": "?", "seed": 0, "device": "?"})
        data["results"] = [r.to_dict() for r in self.results]
        report = rp.Report.from_dict(data)
        if not self.ended:
            report.interrupted, report.interrupted_by = True, "the process died"
            report.running = self.running
        return report


def read(path: str | Path) -> State:
    """Read a journal (a line cut short by a kill is skipped and counted).

    Raises:
        OSError: the file cannot be read.
    """
    state = State()
    by_id: dict[str, rp.PropertyResult] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            event = record["event"]
        except (ValueError, KeyError, TypeError):
            state.lines_skipped += 1
            continue
        if event == "header":
            state.header = record["report"]
        elif event == "running":
            state.running = record["id"]
        elif event == "result":
            result = rp.PropertyResult.from_dict(record["result"])
            by_id[result.id] = result
            if state.running == result.id:
                state.running = None
        elif event == "end":
            state.ended, state.running = True, None
        elif event == "resumed":
            state.ended, state.running = False, None
    state.results = list(by_id.values())
    return state


def resume_problem(state: State, header: dict[str, Any]) -> str | None:
    """Why ``state`` cannot be resumed by the run whose header is ``header`` (a field of
    :data:`SAME_RUN` differs, or the journal has no header), None when it can."""
    if state.header is None:
        return "the journal has no header (the earlier run stopped before its first property)"
    differ = [f"{key} {state.header.get(key)!r} there, {header.get(key)!r} here"
              for key in SAME_RUN if state.header.get(key) != header.get(key)]
    if differ:
        return "the journal is of another run: " + "; ".join(differ)
    return None
