"""Nothing lost when the run dies: every finished result is in the
journal at once, a run killed by SIGKILL leaves its results and the property it was running,
``--resume`` completes it; status lines go to stderr off a terminal; a property past its
time limit reports the stuck line and its thread's Python stack."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from hcspec.conformance import cli
from hcspec.conformance.outputs import journal
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.subjects.targets import resolve
from tests.conformance.signalled import run_signalled

ROOT = Path(__file__).resolve().parents[2]
HANG_CUE = "bad_inputs: this forward hangs now"


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    env.pop("HC_CONFORMANCE_TARGET", None)
    return env


@pytest.mark.slow
def test_a_run_killed_by_sigkill_leaves_its_results_and_resume_completes_it(
        tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "hcspec.conformance", "run",
            "tests.conformance.bad_inputs:hang_in_eval", "--only",
            "state.input_unchanged,state.deterministic_eval", "--profile", "quick", "--device",
            "cpu", "--json", str(tmp_path / "r.json")]
    code, _, err = run_signalled([*argv, "--timeout", "0"], cwd=str(ROOT), env=_env(),
                                 send=(signal.SIGKILL, HANG_CUE))
    assert code == -signal.SIGKILL, err[-2000:]
    assert not (tmp_path / "r.json").exists()  # the kill left no report ...
    state = journal.read(tmp_path / "r.journal.jsonl")  # ... but the journal
    assert [(r.id, r.status) for r in state.results] == [("shape.output", "passed"),
                                                          ("state.input_unchanged", "passed")]
    assert state.running == "state.deterministic_eval" and not state.ended
    partial = state.report()
    assert partial.interrupted and partial.running == "state.deterministic_eval"
    assert cli.main(["report", str(tmp_path / "r.journal.jsonl"), "--html",
                     str(tmp_path / "partial.html")]) == 0  # the journal renders as a report
    assert "while running state.deterministic_eval" in (tmp_path / "partial.html").read_text()
    # --resume: only what had not finished runs (the hang, now under a limit)
    code, out, err = run_signalled([*argv, "--timeout", "2", "--resume"], cwd=str(ROOT),
                                   env=_env(), send=None)
    assert code == 1, out[-2000:] + err[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(r["id"], r["status"]) for r in report["results"]] == [
        ("shape.output", "passed"), ("state.input_unchanged", "passed"),
        ("state.deterministic_eval", "timeout")]
    assert any("resumed from the journal" in w for w in report["warnings"])
    records = [json.loads(line) for line in
               (tmp_path / "r.journal.jsonl").read_text().splitlines()]
    ran = [r["id"] for r in records if r["event"] == "running"]
    assert ran == ["shape.output", "state.input_unchanged", "state.deterministic_eval",
                   "state.deterministic_eval"]  # the finished two did not run again
    assert records[-1] == {"event": "end", "interrupted": False, "verdict": "FAILED"}


def test_each_result_is_in_the_journal_before_the_next_property_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.json"
    seen: list[list[str]] = []
    original = journal.Journal.running

    def running(self: journal.Journal, property_id: str) -> None:
        seen.append([json.loads(line)["event"] for line in
                     self.path.read_text().splitlines()])
        original(self, property_id)

    monkeypatch.setattr(journal.Journal, "running", running)
    code = cli.main(["run", "reference:hc-static", "--only", "shape.output,shape.branch_once",
                     "--profile", "quick", "--device", "cpu", "--no-progress", "--json",
                     str(path)])
    capsys.readouterr()
    assert code == 0
    assert seen == [["header"], ["header", "running", "result"]]
    state = journal.read(tmp_path / "r.journal.jsonl")
    assert state.ended and [r.id for r in state.results] == ["shape.output", "shape.branch_once"]


def test_a_line_cut_short_by_the_kill_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "j.journal.jsonl"
    result = rp.PropertyResult("shape.output", "shape", "s", None, rp.PASSED)
    path.write_text(json.dumps({"event": "running", "id": "shape.output"}) + "\n"
                    + json.dumps({"event": "result", "result": result.to_dict()}) + "\n"
                    + json.dumps({"event": "running", "id": "law.probed"}) + "\n"
                    + '{"event": "result", "res')
    state = journal.read(path)
    assert [r.id for r in state.results] == ["shape.output"]
    assert state.running == "law.probed" and state.lines_skipped == 1


def test_a_journal_renders_as_a_partial_report(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.journal.jsonl"
    header = rp.Report(target="reference:mhc", kit_version="0", profile="ci", seed=0,
                       device="cpu")
    log = journal.Journal.open(path, append=False)
    log.header(header)
    log.running("shape.output")
    log.result(rp.PropertyResult("shape.output", "shape", "s", None, rp.PASSED))
    log.running("law.probed")
    log.close()
    assert cli.main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "**interrupted** (the process died) while running law.probed" in out
    assert "| `shape.output` | passed |" in out


def test_resume_refuses_another_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.json"
    base = ["run", "reference:hc-static", "--only", "shape.output", "--device", "cpu",
            "--no-progress", "--json", str(path)]
    assert cli.main([*base, "--profile", "quick"]) == 0
    capsys.readouterr()
    assert cli.main([*base, "--profile", "ci", "--resume"]) == 2
    assert "profile 'quick' there, 'ci' here" in capsys.readouterr().err
    assert cli.main(["run", "reference:hc-static", "--resume", "--no-progress"]) == 2
    assert "--resume needs the journal" in capsys.readouterr().err


def test_status_lines_go_to_stderr_off_a_terminal_with_no_progress(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "reference:hc-static", "--only", "shape.output", "--profile", "quick",
            "--device", "cpu", "--no-progress"]
    assert cli.main(base) == 0
    assert "shape.output: passed" in capsys.readouterr().err.splitlines()
    assert cli.main([*base, "--no-status"]) == 0
    assert "shape.output: passed" not in capsys.readouterr().err


_RELEASE = threading.Event()


class _HangsInEval:
    """reference:hc-static whose eval-mode forward waits until the test releases it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.training = True

    def eval(self) -> _HangsInEval:
        self.training = False
        self.inner.eval()
        return self

    def train(self, mode: bool = True) -> _HangsInEval:
        self.training = mode
        self.inner.train(mode)
        return self

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        if not self.training:
            _RELEASE.wait()  # the stuck line
        out: torch.Tensor = self.inner.forward(x, branch)
        return out


def hangs_in_eval(n: int, d: int, **kwargs: Any) -> _HangsInEval:
    return _HangsInEval(resolve("reference:hc-static").factory(n, d, **kwargs))


def test_a_hung_forward_reports_its_stuck_line_and_stack() -> None:
    try:
        report = check_implementation(hangs_in_eval, profile="quick", device="cpu",
                                      only=["state.deterministic_eval"], timeout=1.0)
    finally:
        _RELEASE.set()
    result = next(r for r in report.results if r.id == "state.deterministic_eval")
    assert result.status == rp.TIMEOUT and result.failure is not None
    assert "it was stuck at " in result.message
    assert "test_journal.py:" in result.message and "in forward: _RELEASE.wait()" in \
        result.message
    stack = result.failure.traceback or ""
    assert stack.startswith("Python stack of the stuck thread")
    assert "in check_deterministic_eval" in stack or "deterministic" in stack
    assert stack.rstrip().endswith("_RELEASE.wait()  # the stuck line")
