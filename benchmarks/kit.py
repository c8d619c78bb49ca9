"""The kit's own speed: ``hc-conformance run`` per target and profile, and ``hc-spec prove``.

Each run is a fresh process, as a user starts it — ``python -m hcspec.conformance run TARGET
--profile P --device cpu --no-progress --json FILE`` (the ``hc-conformance`` console script
runs the same ``hcspec.conformance.cli:main``), and ``python -m hcspec.spec prove`` — so the
wall time
includes the interpreter and the imports. Examples per second = the examples the JSON report
counts (explicit + hypothesis, over all properties) ÷ wall time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import markdown as md

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class KitRun:
    """One timed command: wall seconds, exit code, and what its report said."""

    label: str
    profile: str
    wall: float
    returncode: int
    examples: int | None = None
    summary: str = ""
    error: str = ""


def _env(threads: int, extra_paths: list[str]) -> dict[str, str]:
    paths = [str(ROOT), *extra_paths, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p),
            "OMP_NUM_THREADS": str(threads)}


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def run_kit(target: str, profile: str, threads: int, extra_paths: list[str],
            timeout: float, python: Path | None = None, venv: str = "") -> KitRun:
    """Time one ``hc-conformance run`` of ``target`` under ``profile``, with this interpreter or
    ``python`` (a third-party venv's, named ``venv`` in the table's label)."""
    label = f"{target} ({venv})" if venv else target
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [str(python or sys.executable), "-m", "hcspec.conformance", "run", target,
                   "--profile", profile,
                   "--device", "cpu", "--no-progress", "--json", str(report)]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, env=_env(threads, extra_paths), capture_output=True,
                                  text=True, timeout=timeout, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return KitRun(label, profile, time.perf_counter() - start, -1,
                          error=f"timed out after {timeout:.0f} s")
        wall = time.perf_counter() - start
        run = KitRun(label, profile, wall, done.returncode)
        if not report.exists():
            run.error = _tail(done.stderr) or _tail(done.stdout) or "no report written"
            return run
        data = json.loads(report.read_text())
    run.examples = sum(int(r.get("examples", 0)) for r in data.get("results", []))
    summary = data.get("summary", {})
    run.summary = ", ".join(f"{v} {k}" for k, v in summary.items() if v)
    if not summary.get("passed"):  # nothing ran: say why (e.g. the factory could not build)
        first = next((r for r in data.get("results", []) if r.get("message")), None)
        if first is not None:
            run.summary += f": {first['id']}: {_tail(first['message'])}"
    return run


def run_prove(threads: int, only: list[str] | None, timeout: float) -> KitRun:
    """Time ``hc-spec prove`` (all theorems, or ``only``)."""
    command = [sys.executable, "-m", "hcspec.spec", "prove", *(["--only", *only] if only else [])]
    label = "hc-spec prove" + (f" --only {' '.join(only)}" if only else "")
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=_env(threads, []), capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return KitRun(label, "–", time.perf_counter() - start, -1,
                      error=f"timed out after {timeout:.0f} s")
    run = KitRun(label, "–", time.perf_counter() - start, done.returncode)
    proven = re.search(r"(\d+)/(\d+) proven in ([\d.]+) s", done.stdout)
    if proven:
        run.summary = f"{proven.group(1)}/{proven.group(2)} proven, {proven.group(3)} s in-process"
    else:
        run.error = _tail(done.stderr) or _tail(done.stdout)
    return run


def table(runs: list[KitRun], skipped: list[tuple[str, str]]) -> md.Table:
    """The kit table; ``skipped`` lists (target, reason) for peers that do not import."""
    t = md.Table("The kit itself (fresh process per run, wall time)",
                 ["command", "profile", "wall s", "examples", "examples/s", "exit", "result"])
    for run in runs:
        rate = (f"{run.examples / run.wall:.0f}" if run.examples is not None and run.wall > 0
                else "–")
        t.add(run.label, run.profile, f"{run.wall:.1f}",
              "–" if run.examples is None else str(run.examples), rate, str(run.returncode),
              run.error or run.summary)
    for target, reason in skipped:
        t.add(target, "–", "–", "–", "–", "–", f"skipped: {reason}")
    t.notes = ["exit 1 with failures is the kit reporting findings in a third-party target, "
               "not a benchmark error; wall time includes interpreter start and imports. A "
               "third-party target that does not import here runs `ci` in the venv that holds it "
               "(named after the target), where `--venvs` chose one."]
    return t
