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


def _reason(exc: BaseException) -> str:
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
            row.skipped = _reason(exc)
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


# --- forward only: native targets (llama.cpp's ggml) beside the reference --------------------
GGML_THREADS = (1, 2)
"""The ggml CPU thread counts of the forward-only rows."""

GGML_COMMAND = ("python -m hcspec.conformance.native.build  # once\n"
                "OMP_NUM_THREADS=1 python -m benchmarks.connection --ggml")
"""The command that measures the forward-only section (docs/benchmarks.md)."""


@dataclass
class ForwardRow:
    """One forward-only subject: median seconds of its forward (branch included), its ratio to
    the baseline's forward in the same run, and the forward roofline bound's ratio."""

    name: str
    forward: float | None = None
    iqr: tuple[float, float] | None = None
    relative: float | None = None
    bound: float | None = None
    note: str = ""
    skipped: str = ""


def forward_bound(config: Config, limits: Any) -> float:
    """Seconds of the forward roofline bound of one mHC connection at ``config``
    (:mod:`benchmarks.roofline`: ``max(bytes / copy bandwidth, FLOPs / matmul rate)``, bytes:
    the state read and written, ``x_in`` and ``F`` once each, the weight parameters; FLOPs:
    the forward count per token, branch excluded)."""
    from benchmarks import roofline

    tokens = config.batch * config.tokens
    item = torch.empty((), dtype=config.dtype).element_size()
    state, stream = tokens * config.n * config.d * item, tokens * config.d * item
    params = roofline.weight_parameter_count("mhc", config.n, config.d) * item
    flops = roofline.forward_flops_per_token("mhc", config.n, config.d) or 0
    return roofline.bound_seconds((2 * state + 2 * stream + params, tokens * flops), limits)


def measure_ggml_forward(config: Config, rounds: int, warmup: int = 2,
                         threads: Iterable[int] = GGML_THREADS) -> list[ForwardRow]:
    """The forward of ``reference:mhc-fast`` (torch, ``inference_mode``) and of ggml's fused
    DeepSeek-V4 step, round-robin in this process, each around the same branch
    ``F(h) = h ⊙ w``: for each thread count, one prepared ggml graph of the whole step with
    ``F`` inside (:func:`hcspec.conformance.native.ggml_steps.step_graph`, computed again each
    round), and, at 1 thread, the step as the kit's target calls it (``read``, ``F`` in NumPy,
    ``write``: two graphs built per call), without the worker process, whose pickling would be
    timed otherwise. float32. A ggml row is skipped with the reason when no ggml build is
    found."""
    import time

    import numpy as np

    from benchmarks.roofline import measure_limits
    from benchmarks.subjects import ScaleBranch
    from hcspec.conformance.adapters.llama_cpp import SETTINGS
    from hcspec.reference import targets as reference_targets

    inputs = Inputs.make(config)
    x = inputs.x.detach()
    branch = ScaleBranch(config.d, config.dtype, config.device)
    impl = reference_targets.mhc(config.n, config.d, dtype=config.dtype, device=config.device,
                                 seed=0, implementation="fast")
    runs: dict[str, Any] = {}

    def reference() -> None:
        with torch.inference_mode():
            impl.forward(x, branch)

    runs[BASELINE] = reference
    rows = [ForwardRow(BASELINE, note="torch, inference_mode")]
    graphs: list[Any] = []
    try:
        from hcspec.conformance.native import ggml, ggml_steps

        ggml.load()
        rng = np.random.default_rng(0)
        n, d = config.n, config.d
        fn = (rng.standard_normal(((n + 2) * n, n * d)) * 0.02).astype(np.float32)
        scale, base = np.ones(3, np.float32), np.zeros((n + 2) * n, np.float32)
        tokens = x.reshape(-1, n, d).to(torch.float32).numpy()
        w = np.ones(d, np.float32)
        for count in threads:
            s = ggml_steps.Settings(SETTINGS.hc_eps, SETTINGS.norm_eps, SETTINGS.sinkhorn_iters,
                              ggml.Backend("CPU", count))
            graph, _ = ggml_steps.step_graph(tokens, fn, scale, base, w, s)
            graphs.append(graph)
            name = f"llama_cpp:deepseek-v4 ({count} thread{'s' if count > 1 else ''})"
            runs[name] = graph.run
            rows.append(ForwardRow(name, note="ggml CPU: one graph (mixes, fused hc_comb, "
                                              "hc_pre, F, hc_post) built once, computed"))
        one_shot = ggml_steps.Settings(SETTINGS.hc_eps, SETTINGS.norm_eps, SETTINGS.sinkhorn_iters,
                                 ggml.Backend("CPU", 1))

        def per_call() -> None:
            x_in, post, comb = ggml_steps.read(tokens, fn, scale, base, one_shot)
            ggml_steps.write(tokens, x_in * w, post, comb, one_shot)

        name = "llama_cpp:deepseek-v4 (1 thread, per call)"
        runs[name] = per_call
        rows.append(ForwardRow(name, note="as the kit's target calls it, without its worker: "
                                          "two graphs built, allocated, filled and freed per "
                                          "call, F in NumPy"))
    except (ImportError, OSError) as exc:
        rows.append(ForwardRow("llama_cpp:deepseek-v4", skipped=_reason(exc)))
    for fn_ in runs.values():
        for _ in range(warmup):
            fn_()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    for k in range(rounds):
        for name in order[k % len(order):] + order[:k % len(order)]:
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    for graph in graphs:
        graph.close()
    limits = measure_limits(64, 1024, 5, config.device)
    bound = forward_bound(config, limits)
    for row in rows:
        if row.skipped:
            continue
        row.forward = Timing.median(seconds[row.name])
        row.iqr = Timing.iqr(seconds[row.name])
        row.bound = bound / row.forward
    baseline_forward = rows[0].forward
    for row in rows:
        if row.forward is not None and baseline_forward:
            row.relative = row.forward / baseline_forward
    return rows


def ggml_table(config: Config, rounds: int, rows: list[ForwardRow]) -> md.Table:
    """The forward-only section's table."""
    t = md.Table(f"Forward only, {config.name}: {config.describe()} (median of {rounds} "
                 "rounds, branch included)",
                 ["subject", "fwd ms", "IQR ms", f"÷ {BASELINE} fwd (same run)",
                  "bound ÷ achieved", "note"])
    for row in rows:
        if row.skipped:
            t.add(row.name, "–", "–", "–", "–", f"skipped: {row.skipped}")
            continue
        iqr = "n/a" if row.iqr is None else f"{md.ms(row.iqr[0])}–{md.ms(row.iqr[1])}"
        t.add(row.name, md.ms(row.forward), iqr, md.ratio(row.relative),
              md.ratio(row.bound), row.note)
    t.notes = [
        "Forward only: ggml's ops have no backward. “÷”: median forward over the baseline's "
        "median forward in the same run (below 1 is faster). “bound ÷ achieved”: the forward "
        "roofline bound of one mHC connection (benchmarks.roofline's machine limits; state "
        "read and written, x_in and F once, weight parameters; the forward FLOP count) over "
        "the median forward. The ggml rows call the library in-process through ctypes: "
        "“N threads” computes one prepared graph of the whole step (buffers allocated once, "
        "as llama.cpp reuses its compute buffers; the state already in ggml's memory); "
        "“per call” builds, fills and frees two graphs per step as the kit's target does "
        "(its worker process round trip is not timed). Command:",
        GGML_COMMAND.replace("\n", "; "),
    ]
    return t


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.connection --ggml [--config main|small] [--rounds N]``: the
    forward-only table of ggml's fused DeepSeek-V4 step beside ``reference:mhc-fast``, printed
    as Markdown."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.connection")
    parser.add_argument("--ggml", action="store_true", required=True)
    parser.add_argument("--config", choices=("small", "main"), default="main")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    config = (Config("main", 4, 512, 4, 1024) if args.config == "main"
              else Config("small", 2, 64, 4, 256))
    rows = measure_ggml_forward(config, args.rounds)
    print(ggml_table(config, args.rounds, rows).markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
