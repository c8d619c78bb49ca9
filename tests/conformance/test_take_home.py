"""A failure you can take home: ``--save-failures DIR`` writes the failing
case, its tensors and a script that replays it in a fresh process without the CLI, printing
the entries that disagree; ``--pdb`` opens the debugger at the failing comparison."""

from __future__ import annotations

import json
import os
import pdb
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import pytest
import torch

from hcspec.conformance import cli
from hcspec.conformance.outputs import capture
from hcspec.conformance.replay import disagreeing_entries

ROOT = Path(__file__).resolve().parents[2]

BUGGY_ADAPTER = '''\
"""A user's mHC layer with a planted bug: entry [..., 0, 0] of the output is off by 1e-3."""
import torch

from hcspec.conformance.subjects.targets import resolve


class Buggy:
    def __init__(self, inner):
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def weights(self, x):
        return self.inner.weights(x)

    def parameters(self):
        return self.inner.parameters()

    def forward(self, x, branch):
        out = self.inner.forward(x, branch)
        bump = torch.zeros_like(out)
        bump[..., 0, 0] = 1e-3
        return out + bump


def make(n, d, **kwargs):
    return Buggy(resolve("reference:mhc").factory(n, d, **kwargs))
'''


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    env.pop("HC_CONFORMANCE_TARGET", None)
    return env


@pytest.mark.slow
def test_a_saved_failure_replays_in_a_fresh_process_and_prints_the_entries(
        tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "buggy_adapter.py").write_text(BUGGY_ADAPTER, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "buggy_adapter:make", "--only",
         "law.reported", "--profile", "quick", "--device", "cpu", "--no-progress",
         "--save-failures", "saved", "--json", "r.json"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    folder = project / "saved" / "law.reported"
    assert sorted(p.name for p in folder.iterdir()) == [
        "case.json", "entries.txt", "replay.py", "tensors.pt"]
    saved = json.loads((folder / "case.json").read_text())
    report = json.loads((project / "r.json").read_text())
    failure = report["results"][-1]["failure"]
    assert saved["case"] == failure["counterexample"] and saved["replayed"] == "failed"
    tensors = torch.load(folder / "tensors.pt", weights_only=True)
    assert tensors["error"] == failure["error"]  # the very comparison that failed
    difference = (tensors["got"] - tensors["expected"]).abs()
    assert float(difference.max()) == pytest.approx(1e-3, rel=1e-9)
    assert torch.nonzero(difference > 1e-6).tolist() == [[0, 0, 0, 0]]
    assert tensors["inputs"]["state"].shape == tensors["got"].shape
    # a fresh process, elsewhere, without the CLI: the script alone reproduces it
    replayed = subprocess.run([sys.executable, str(folder / "replay.py")], cwd=tmp_path,
                              env=_env(), capture_output=True, text=True, timeout=600,
                              check=False)
    assert replayed.returncode == 1, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    lines = replayed.stdout.splitlines()
    assert lines[0].startswith("failed: X' vs H_res X") and f"{failure['error']:.3g}" in lines[0]
    row = next(line.split() for line in lines if line.strip().startswith("(0, 0, 0, 0)"))
    got, expected, diff = float(row[4]), float(row[5]), float(row[6])
    assert got - expected == pytest.approx(1e-3, rel=1e-6) and diff == pytest.approx(1e-3,
                                                                                      rel=1e-3)
    assert "the target's output equals the saved one" in replayed.stdout


def test_disagreeing_entries_are_those_beyond_the_allowance_largest_first() -> None:
    got = torch.tensor([[1.0, 2.0], [3.0, 4.5]], dtype=torch.float64)
    want = torch.tensor([[1.0, 2.1], [3.0, 4.0]], dtype=torch.float64)
    comparison = capture.Comparison(got, want, scale=4.0, error=0.125)
    entries = disagreeing_entries(comparison, allowance=0.02)  # 0.02 × 4 = 0.08 absolute
    assert [(e.index, e.got, e.expected) for e in entries] == [((1, 1), 4.5, 4.0),
                                                               ((0, 1), 2.0, 2.1)]
    assert entries[0].allowance == pytest.approx(0.08)
    assert disagreeing_entries(comparison, allowance=0.2) == []


def test_nothing_is_captured_outside_a_replay() -> None:
    capture.note_comparison(torch.zeros(2), torch.ones(2), 1.0, 1.0)  # no capture active
    with capture.capturing() as captured:
        capture.note_comparison(torch.zeros(2), torch.ones(2), None, 1.0)
    assert len(captured.comparisons) == 1 and captured.comparisons[0].scale == 1.0


def test_pdb_opens_at_the_failing_comparison(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "buggy_adapter.py").write_text(BUGGY_ADAPTER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    opened: list[TracebackType | None] = []
    monkeypatch.setattr(pdb, "post_mortem", opened.append)
    try:
        code = cli.main(["run", "buggy_adapter:make", "--only", "law.reported", "--profile",
                         "quick", "--device", "cpu", "--no-progress", "--pdb"])
    finally:
        sys.modules.pop("buggy_adapter", None)
    capsys.readouterr()
    assert code == 1 and len(opened) == 1
    frames = []
    entry = opened[0]
    while entry is not None:
        frames.append(entry.tb_frame)
        entry = entry.tb_next
    assert frames[-1].f_code.co_name == "expect"  # Recorder.expect: the failing comparison
    check = frames[-2]  # `up` from there: the check, with the compared tensors at hand
    assert check.f_code.co_name == "check_reported" and "out" in check.f_locals
