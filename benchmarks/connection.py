"""Connection cost excluding the branch: time and memory of one connection per subject.

For each configuration every subject of :mod:`benchmarks.subjects` is built in this process,
tried once (a subject that cannot be built or run is skipped with its reason), timed
round-robin (:func:`benchmarks.measure.time_interleaved`), and then measured for peak and saved
memory. "− branch" is the median over rounds of (subject's step − branch-only step) in the same
round; ratios divide such medians from the same run.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from benchmarks import markdown as md
from benchmarks.measure import (
    MemoryUnavailable,
    Step,
    Timing,
    peak_bytes,
    saved_bytes,
    time_interleaved,
)
from benchmarks.subjects import BRANCH_ONLY, Config, Inputs, Subject

BASELINE = "reference:mhc-fast"
"""Ratios in the tables are relative to this subject (falls back to ``reference:mhc``)."""


@dataclass
class Row:
    """Figures of one subject at one configuration (seconds, bytes; None: not measured)."""

    name: str
    origin: str
    kind: str = "?"
    note: str = ""
    skipped: str = ""
    forward: float | None = None
    step: float | None = None
    step_iqr: tuple[float, float] | None = None
    minus_branch: float | None = None
    forward_minus_branch: float | None = None
    peak: int | None = None
    saved: int | None = None
    relative: float | None = None
    run: str = ""


MAIN_RUN = "main"
"""The :attr:`Row.run` of rows measured by the parent process (the others name their venv)."""


@dataclass
class ConfigResult:
    """All rows of one configuration, in subject order."""

    config: Config
    rounds: int
    rows: list[Row] = field(default_factory=list)

    def row(self, name: str) -> Row | None:
        """The measured (not skipped) row called ``name``, if any."""
        return next((r for r in self.rows if r.name == name and not r.skipped), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` (config as its name, description and fields)."""
        c = self.config
        fields = {"name": c.name, "batch": c.batch, "tokens": c.tokens, "n": c.n, "d": c.d,
                  "dtype": str(c.dtype).removeprefix("torch."), "device": c.device,
                  "variants": c.variants}
        return {"config": c.name, "describe": c.describe(), "config_fields": fields,
                "rounds": self.rounds, "rows": [dataclasses.asdict(r) for r in self.rows]}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ConfigResult:
        """The inverse of :meth:`to_dict`.

        Raises:
            KeyError: ``data`` has no ``config_fields`` (written by an older version).
        """
        fields = dict(data["config_fields"])
        fields["dtype"] = getattr(torch, fields["dtype"])
        return ConfigResult(Config(**fields), data["rounds"], ConfigResult.rows_from_dict(data))

    @staticmethod
    def rows_from_dict(data: dict[str, Any]) -> list[Row]:
        """The rows of a :meth:`to_dict` result."""
        rows = []
        for item in data["rows"]:
            iqr = item.get("step_iqr")
            rows.append(Row(**{**item, "step_iqr": tuple(iqr) if iqr else None}))
        return rows

    def baseline(self) -> Row | None:
        """The row ratios are taken against (:data:`BASELINE`, else ``reference:mhc``)."""
        return self.row(BASELINE) or self.row("reference:mhc")


def skip_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _paired_median(values: list[float], base: list[float]) -> float:
    return Timing.median([v - b for v, b in zip(values, base, strict=True)])


def measure_config(config: Config, subjects: Iterable[Subject], rounds: int,
                   warmup: int, run: str = MAIN_RUN) -> ConfigResult:
    """Build, time and measure every subject at ``config`` (see the module docstring); every
    row's :attr:`Row.relative` is its "− branch" median ÷ the baseline's of this process, and
    :attr:`Row.run` is ``run``."""
    result = ConfigResult(config, rounds)
    inputs = Inputs.make(config)
    steps: dict[str, Step] = {}
    for subject in subjects:
        if subject.variant and not config.variants:
            continue
        row = Row(subject.name, subject.origin, run=run)
        result.rows.append(row)
        try:
            step, row.kind = subject.build(config, inputs)
            step.run()  # a first step: errors surface here, not in the timed loop
        except Exception as exc:  # any failure of a third-party build is reported, not fatal
            row.skipped = skip_reason(exc)
            continue
        row.note = step.note
        steps[subject.name] = step
    timings = time_interleaved(steps, rounds, max(0, warmup - 1), config.device)
    base = timings.get(BRANCH_ONLY)
    for row in result.rows:
        timing = timings.get(row.name)
        if timing is None:
            continue
        row.forward = Timing.median(timing.forward)
        row.step = Timing.median(timing.step)
        row.step_iqr = Timing.iqr(timing.step)
        if base is not None:
            row.minus_branch = _paired_median(timing.step, base.step)
            row.forward_minus_branch = _paired_median(timing.forward, base.forward)
    for row in result.rows:
        measured = steps.get(row.name)
        if measured is None:
            continue
        try:
            row.peak = peak_bytes(measured, config.device)
        except MemoryUnavailable as exc:
            row.note = f"{row.note}; peak n/a: {exc}".lstrip("; ")
        row.saved = saved_bytes(measured)
    base_row = result.baseline()
    for row in result.rows:
        if (base_row is not None and base_row.minus_branch and row.minus_branch is not None
                and row.name != BRANCH_ONLY):
            row.relative = row.minus_branch / base_row.minus_branch
    steps.clear()
    gc.collect()
    return result


def table(result: ConfigResult) -> md.Table:
    """The configuration's table (rows in subject order, skipped ones with their reason); the
    "run" column names the process a row was measured in (its ratio is taken there)."""
    config = result.config
    base = result.baseline()
    t = md.Table(
        f"Connection cost, {config.name}: {config.describe()} "
        f"(one state {md.mib(config.state_bytes)} MiB; median of {result.rounds} rounds)",
        ["subject", "kind", "run", "fwd ms", "fwd+bwd ms", "IQR ms", "fwd − branch ms",
         "fwd+bwd − branch ms", f"÷ {base.name if base else BASELINE} (same run)", "peak MiB",
         "saved MiB", "note"],
    )
    for row in result.rows:
        if row.skipped:
            t.add(row.name, row.kind, row.run or MAIN_RUN, *["–"] * 8,
                  f"skipped: {row.skipped}")
            continue
        iqr = "n/a" if row.step_iqr is None else \
            f"{md.ms(row.step_iqr[0])}–{md.ms(row.step_iqr[1])}"
        is_base = row.name == BRANCH_ONLY
        t.add(row.name, row.kind, row.run or MAIN_RUN, md.ms(row.forward), md.ms(row.step), iqr,
              "–" if is_base else md.ms(row.forward_minus_branch),
              "–" if is_base else md.ms(row.minus_branch),
              "–" if is_base else md.ratio(row.relative), md.mib(row.peak), md.mib(row.saved),
              row.note)
    t.notes = ([] if config.variants else
               ["Third-party option variants are measured at the other sizes only."]) + [
        "“− branch”: median over rounds of (subject − branch only) in the same round; "
        "“÷”: that figure divided by the baseline's measured in the same process (run "
        "“main”: the parent; otherwise the named venv, which measures the reference rows "
        "again), below 1 is faster than the baseline. Compare the ratios; absolute times of "
        "different runs are context only.",
        "peak: highest live tensor bytes during one forward+backward above the start "
        "(output, gradients and temporaries included); saved: what autograd keeps for "
        "backward (inputs and parameters excluded).",
    ]
    return t
