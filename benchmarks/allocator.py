"""How much of a connection's time is the allocator's: the main configuration re-measured in a
child process with ``THP_MEM_ALLOC_ENABLE=1``.

On Linux, glibc serves blocks of 32 MiB and more with a fresh ``mmap`` each time, so every new
full-size tensor (an output, a gradient) is page-faulted in on first touch, 4 KiB at a time —
the "clone bandwidth" of the machine-limits table. PyTorch's CPU allocator, when the
environment variable ``THP_MEM_ALLOC_ENABLE=1`` is set, aligns large blocks to 2 MiB and asks
for transparent huge pages (``madvise``), 512× fewer faults. The variable must be set before
torch starts, hence the child process; everything else (threads, rounds, sizes, subjects) is
the parent's. The comparison is across two processes, so it carries the machine's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import markdown as md
from benchmarks import roofline
from benchmarks.connection import MAIN_RUN, ConfigResult
from benchmarks.subjects import BRANCH_ONLY, RESIDUAL, is_third_party

ROOT = Path(__file__).resolve().parents[1]


def chosen_subjects(result: ConfigResult) -> list[str]:
    """The residual, the reference mHC rows, and the fastest third-party mHC of ``result``
    measured in this process (the child runs in this environment, not in a venv part's)."""
    names = [RESIDUAL] + [r.name for r in result.rows
                          if r.name.startswith("reference:mhc") and not r.skipped]
    peers = [r for r in result.rows if is_third_party(r.name) and r.kind == "mhc"
             and r.minus_branch is not None and r.run in ("", MAIN_RUN)]
    if peers:
        names.append(min(peers, key=lambda r: r.minus_branch or 0.0).name)
    return names


def compare(result: ConfigResult, rounds: int, args: argparse.Namespace,
            limits: roofline.Limits | None) -> md.Table:
    """Run the child and tabulate parent vs child for :func:`chosen_subjects`."""
    names = chosen_subjects(result)
    t = md.Table(f"Allocator effect, {result.config.name}: {result.config.describe()}, "
                 "fwd+bwd − branch", ["subject", "default ms", "THP_MEM_ALLOC_ENABLE=1 ms",
                                      "default ÷ THP", "peak MiB (THP)",
                                      "achieved ÷ bound (THP)"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "child.json"
        command = [sys.executable, "-m", "benchmarks", "--sections", "connection",
                   "--configs", result.config.name, "--subjects", ",".join(names),
                   "--threads", str(args.threads), "--rounds", str(rounds),
                   "--out", str(Path(tmp) / "child.md"), "--json", str(out)]
        if args.quick:
            command.append("--quick")
        for target in args.target:
            command += ["--target", target]
        for path in args.target_path:
            command += ["--target-path", path]
        env = {**os.environ, "THP_MEM_ALLOC_ENABLE": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")) if p)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT,
                              timeout=3600)
        if done.returncode != 0 or not out.exists():
            lines = (done.stderr or done.stdout).strip().splitlines()
            t.notes = [f"child process failed (exit {done.returncode}): "
                       f"{lines[-1] if lines else 'no output'}"]
            return t
        data = json.loads(out.read_text())
    child = {r.name: r for r in ConfigResult.rows_from_dict(data[0])}
    for name in names:
        parent_row, child_row = result.row(name), child.get(name)
        if parent_row is None or child_row is None or child_row.skipped:
            continue
        ratio = (parent_row.minus_branch / child_row.minus_branch
                 if parent_row.minus_branch and child_row.minus_branch else None)
        bound = None
        if limits is not None and child_row.minus_branch is not None:
            counted = roofline.work(child_row.kind, result.config)
            if counted is not None:
                seconds = max(counted[0] / limits.copy_bandwidth, counted[1] / limits.matmul_rate)
                bound = child_row.minus_branch / seconds
        t.add(name, md.ms(parent_row.minus_branch), md.ms(child_row.minus_branch),
              md.ratio(ratio), md.mib(child_row.peak), md.ratio(bound))
    t.notes = [f"Child: `THP_MEM_ALLOC_ENABLE=1 python -m benchmarks --sections connection "
               f"--configs {result.config.name} --subjects '{','.join(names)}'` (it measures "
               f"'{BRANCH_ONLY}' too, for its own “− branch”); bound from this run's machine "
               "limits."]
    return t
