"""Forward only: llama.cpp's ggml (native, no backward) beside ``reference:mhc-fast``, with the
forward roofline bound of one mHC connection (:mod:`benchmarks.roofline`). A section of its own,
printed as Markdown by ``python -m benchmarks.ggml_forward`` (docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmarks import markdown as md
from benchmarks import roofline
from benchmarks.connection import BASELINE, skip_reason
from benchmarks.measure import Timing
from benchmarks.roofline import measure_limits
from benchmarks.subjects import Config, Inputs, ScaleBranch
from hcspec.conformance.adapters.llama_cpp import SETTINGS
from hcspec.reference import targets as reference_targets

GGML_THREADS = (1, 2)
"""The ggml CPU thread counts of the forward-only rows."""

GGML_COMMAND = ("python -m hcspec.conformance.native.build  # once\n"
                "OMP_NUM_THREADS=1 python -m benchmarks.ggml_forward")
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
        rows.append(ForwardRow("llama_cpp:deepseek-v4", skipped=skip_reason(exc)))
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
    """``python -m benchmarks.ggml_forward [--config main|small] [--rounds N]``: the
    forward-only table of ggml's fused DeepSeek-V4 step beside ``reference:mhc-fast``, printed
    as Markdown."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ggml_forward")
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
