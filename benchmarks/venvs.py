"""Third-party rows from other environments: one process per venv, merged into one table.

The implementations people run need environments that cannot share one venv (transformers
releases, NeMo Automodel's pinned transformers, MLX). ``python -m benchmarks --venvs all`` runs,
after its own connection section, one *part* per venv: ``VENV/bin/python -m benchmarks --part
NAME ...``, which measures in that one process the part's built-in targets (by target prefix)
**and the reference rows again** (``branch only``, ``residual``, ``reference:mhc``,
``reference:mhc-fast``), interleaved as every connection table is (:mod:`benchmarks.measure`),
and writes its rows as JSON (every configuration but ``large``,
:data:`benchmarks.run.PARENT_ONLY`, whose third-party rows would take most of the run). The
parent merges them: a part's row replaces the parent's "skipped: not importable" row of the
same name, or is appended. Every row keeps the ratio to
``reference:mhc-fast`` taken **in its own process** (:attr:`benchmarks.connection.Row.relative`)
and says which run it comes from, so the table's rule holds: ratios within one run, absolute
times only as context.

The venvs are built once by ``bash benchmarks/build_venvs.sh`` (layered on the active venv, so
torch and hcspec are the parent's); a part whose venv is missing is reported as not run, with the
command that builds it. Nothing here installs anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.connection import ConfigResult, Row
from benchmarks.subjects import BRANCH_ONLY, MHC_PYTORCH_RAW, RESIDUAL, builtin_target_names

ROOT = Path(__file__).resolve().parents[1]

REFERENCE_ROWS = (BRANCH_ONLY, RESIDUAL, "reference:mhc", "reference:mhc-fast")
"""Measured again in every part, so every third-party row has a same-process ratio."""


@dataclass(frozen=True)
class Part:
    """One environment: ``name`` (``--part``), its venv folder (relative to the repository
    root), the target prefixes it measures, and what it holds (shown in the report)."""

    name: str
    venv: str
    prefixes: tuple[str, ...]
    holds: str
    extra_subjects: tuple[str, ...] = ()
    torch_memory: bool = True  # False: the implementation allocates outside torch (MLX)

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return ROOT / self.venv / "bin" / "python"

    def subjects(self) -> list[str]:
        """The reference rows, then every built-in target of the part's prefixes."""
        mine = [n for n in builtin_target_names() if n.split(":", 1)[0] in self.prefixes]
        return [*REFERENCE_ROWS, *mine, *self.extra_subjects]


PARTS: tuple[Part, ...] = (
    Part("pkgs", ".venv-bench-pkgs",
         ("hyper_connections", "mhc_pytorch", "x_transformers", "nano_deepseek_v4",
          "tile_kernels"),
         "hyper-connections 0.4.11, mhc-pytorch 0.2.3, x-transformers 2.31.10, "
         "nano-deepseek-v4 0.2.0, tile-kernels 1.0.0 (torch references only)",
         (MHC_PYTORCH_RAW,)),
    Part("tf523", ".venv-bench-tf523", ("transformers",), "transformers 5.23.0"),
    Part("nemo", ".venv-bench-nemo", ("nemo_automodel",),
         "nemo-automodel 0.7.0, transformers 5.18.0"),
    Part("mlx", ".venv-bench-mlx", ("mlx_lm",), "mlx 0.32.4 (cpu), mlx-lm 0.32.2",
         torch_memory=False),
)
BY_NAME = {p.name: p for p in PARTS}


def chosen(spec: str) -> list[Part]:
    """``all`` or comma-separated part names -> the parts, in :data:`PARTS` order.

    Raises:
        ValueError: an unknown name.
    """
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names == ["all"]:
        return list(PARTS)
    unknown = sorted(set(names) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown venv part(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(BY_NAME)} or all")
    return [p for p in PARTS if p.name in names]


@dataclass
class PartRun:
    """What one part gave: its results per configuration name, or why it did not run."""

    part: Part
    results: dict[str, ConfigResult]
    problem: str = ""
    seconds: float = 0.0


def run_part(part: Part, configs: Sequence[str], rounds: int | None, threads: int,
             quick: bool, timeout: float = 5400.0) -> PartRun:
    """Run ``part`` in its venv (a child process) and read back its connection results.

    ``configs``: configuration names; ``rounds``: overrides the plan's rounds (None: the
    plan's). Never raises for a failing child: :attr:`PartRun.problem` says what happened.
    """
    if not part.python.exists():
        return PartRun(part, {}, f"venv {part.venv} not built (bash benchmarks/build_venvs.sh "
                                 f"{part.name})")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "part.json"
        command = [str(part.python), "-m", "benchmarks", "--part", part.name, "--sections",
                   "connection", "--configs", ",".join(configs), "--threads", str(threads),
                   "--out", str(Path(tmp) / "part.md"), "--json", str(out)]
        if rounds is not None:
            command += ["--rounds", str(rounds)]
        if quick:
            command.append("--quick")
        env = {**os.environ, "OMP_NUM_THREADS": str(threads),
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")) if p)}
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return PartRun(part, {}, f"timed out after {timeout:.0f} s",
                           time.perf_counter() - started)
        if done.returncode != 0 or not out.exists():
            lines = (done.stderr or done.stdout).strip().splitlines()
            return PartRun(part, {}, f"exit {done.returncode}: "
                                     f"{lines[-1] if lines else 'no output'}"[:200],
                           time.perf_counter() - started)
        data = json.loads(out.read_text())
    results = {item["config"]: ConfigResult.from_dict(item) for item in data}
    return PartRun(part, results, "", time.perf_counter() - started)


def merge(result: ConfigResult, runs: Sequence[PartRun]) -> ConfigResult:
    """``result`` (the parent's) with every part's rows of the same configuration merged in:
    a part's measured row replaces a skipped parent row of that name or is appended (reference
    rows stay the parent's); a row skipped in every run keeps the first reason. In place;
    returns ``result``."""
    for run in runs:
        theirs = run.results.get(result.config.name)
        if theirs is None:
            continue
        for row in theirs.rows:
            if row.name in REFERENCE_ROWS or row.name.endswith(" recompute"):
                continue
            if not run.part.torch_memory and not row.skipped:
                row.peak = row.saved = None
                row.note = (f"{row.note}; " if row.note else "") + (
                    "through the framework bridge; its own allocations are not torch's, so no "
                    "peak/saved figure")
            mine = next((r for r in result.rows if r.name == row.name), None)
            if mine is None:
                result.rows.append(row)
            elif mine.skipped and not row.skipped:
                result.rows[result.rows.index(mine)] = row
    return result


def reference_time(run: PartRun, config: str) -> Row | None:
    """The part's own ``reference:mhc-fast`` row at ``config`` (its ratio's denominator)."""
    result = run.results.get(config)
    return None if result is None else result.row("reference:mhc-fast")
