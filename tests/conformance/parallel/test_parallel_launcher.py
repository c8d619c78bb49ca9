"""Under torchrun the kit joins the launcher's process group (env:// rendezvous, gloo on the
CPU) instead of starting its own ranks, and rank 0 alone writes the one report; every rank
exits with rank 0's code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hcspec.conformance.parallel import launcher

ROOT = Path(__file__).resolve().parents[3]


def _torchrun(tmp_path: Path, target: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in launcher.LAUNCHER_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "hcspec.conformance", "run", target, "--only", "parallel", "--device", "cpu",
         "--no-progress", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_detect_reads_the_launchers_variables() -> None:
    assert launcher.detect({}) is None
    assert launcher.detect({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "h",
                            "MASTER_PORT": "1", "LOCAL_RANK": "1",
                            "LOCAL_WORLD_SIZE": "2"}) == launcher.Launch(1, 4, 1, 2)
    with pytest.raises(ValueError, match="RANK=4, WORLD_SIZE=4"):
        launcher.detect({"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h",
                         "MASTER_PORT": "1"})


@pytest.mark.slow
def test_torchrun_two_gloo_ranks_write_one_report(tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2 -m hcspec.conformance run reference:mhc --only
    parallel``: every property passes on the launcher's two ranks, one report."""
    report = tmp_path / "parallel.json"
    markdown = tmp_path / "parallel.md"
    done = _torchrun(tmp_path, "reference:mhc", "--json", str(report),
                     "--markdown", str(markdown))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    assert {r["id"]: r["status"] for r in data["results"]} == {
        "parallel.replicated_init": "passed", "parallel.forward": "passed",
        "parallel.branch_gathered": "passed", "parallel.input_gradients": "passed",
        "parallel.parameter_gradients": "passed", "parallel.world_size": "passed",
        "parallel.subgroups": "passed"}
    assert all(r["examples"] == 6 for r in data["results"])
    assert data["conventions"]["parallel.world_size"] == "2 (gloo, under a launcher)"
    assert data["conventions"]["parallel.run"].startswith("2 ranks (gloo, under the launcher)")
    assert "parallel.subgroups" in markdown.read_text(encoding="utf-8")
    assert done.stdout.count("result: OK") == 1  # rank 1 printed nothing
    assert done.stdout.count(f"report written to {report}") == 1
    # rank 0 alone writes the reports and the run journal (hcspec.conformance.outputs.journal)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "parallel.journal.jsonl", "parallel.json", "parallel.md"]


@pytest.mark.slow
def test_torchrun_ranks_exit_with_rank_zeros_code(tmp_path: Path) -> None:
    """A mutant that seeds its init by rank: rank 0 reports the failure and exits 1 first,
    so torchrun's summary names rank 0 (the other rank waits and is stopped by the launcher's
    teardown of a failed job, SIGTERM), and no rank is left hanging."""
    report = tmp_path / "parallel.json"
    done = _torchrun(tmp_path, "tests.mutants._parallel.rank_seeded_init:make",
                     "--json", str(report))
    assert done.returncode == 1, done.stdout + done.stderr
    statuses = {r["id"]: r["status"]
                for r in json.loads(report.read_text(encoding="utf-8"))["results"]}
    assert statuses["parallel.replicated_init"] == "failed"
    pattern = r"rank\s*: (\d+) \(local_rank: \d+\)\n\s*exitcode\s*: (-?\d+)"
    records = re.findall(pattern, done.stderr)
    root_cause = re.findall(pattern, done.stderr.partition("Root Cause")[2])
    assert root_cause == [("0", "1")], done.stderr
    assert all(code in ("1", "-15") for _, code in records), done.stderr
