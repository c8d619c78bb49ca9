"""Measuring one training step: time (interleaved, medians), peak memory, saved activations.

Machines here are shared and noisy, so every subject of a comparison is built in the same
process and timed round by round: each round runs one step of every subject, in an order
shuffled afresh every round (seeded, so runs repeat), so a change in load hits all of them alike
and no subject always runs straight after the same neighbour (after a memory-heavy subject the
next one's forward pays for the freed pages); ratios are taken per configuration from the same
run. Figures are medians over rounds; the spread is reported as the interquartile range.

Memory, two exact measures of torch's own allocations (allocator slack, page granularity and
BLAS workspaces are outside both):

* **peak** — the highest total of live tensor bytes during one forward+backward, above what
  was live when it started: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the running
  sum of the allocation and free events that ``torch.profiler`` records with
  ``profile_memory=True``. It includes the output, the gradients and every temporary.
* **saved** — bytes of the distinct storages autograd keeps between forward and backward
  (``torch.autograd.graph.saved_tensors_hooks``), the step's inputs and parameters excluded.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile


@dataclass
class Step:
    """One training step of a subject: ``forward()`` builds the graph and returns the output,
    ``backward`` is then called with ``upstream``; ``leaves`` get their ``.grad`` cleared.

    Attributes:
        forward: the forward pass, zero arguments. upstream: the output's gradient.
        leaves: tensors whose ``.grad`` a step fills (inputs, parameters).
        note: shown next to the subject's figures (e.g. "replicated input").
    """

    forward: Callable[[], torch.Tensor]
    upstream: torch.Tensor
    leaves: list[torch.Tensor]
    note: str = ""

    def run(self) -> None:
        """One forward + backward, then clear the gradients."""
        out = self.forward()
        torch.autograd.backward(out, self.upstream)
        self.clear()

    def clear(self) -> None:
        """Drop the leaves' gradients (so the next step allocates them afresh, as in training
        with ``zero_grad(set_to_none=True)``)."""
        for leaf in self.leaves:
            leaf.grad = None


@dataclass
class Timing:
    """Per-round seconds of one subject: ``forward`` and the whole ``step`` (fwd + bwd)."""

    forward: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)

    @staticmethod
    def median(values: Sequence[float]) -> float:
        """Median (raises ``statistics.StatisticsError`` on an empty list)."""
        return statistics.median(values)

    @staticmethod
    def iqr(values: Sequence[float]) -> tuple[float, float]:
        """25th and 75th percentiles (the extremes for fewer than 4 values)."""
        if len(values) < 4:
            return min(values), max(values)
        quartiles = statistics.quantiles(values, n=4)
        return quartiles[0], quartiles[2]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_interleaved(steps: dict[str, Step], rounds: int, warmup: int,
                     device: str) -> dict[str, Timing]:
    """Time every step, one of each per round in a freshly shuffled order (module docstring).

    Args:
        steps: subject name -> step. rounds: timed rounds (≥ 1). warmup: untimed rounds.
        device: ``cpu`` or ``cuda[:i]`` (CUDA is synchronised around each phase).

    Returns:
        subject name -> :class:`Timing` with ``rounds`` entries each.

    Raises:
        ValueError: ``rounds`` < 1 or ``warmup`` < 0.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 and warmup >= 0, got {rounds} and {warmup}")
    names = list(steps)
    for _ in range(warmup):
        for name in names:
            steps[name].run()
    timings = {name: Timing() for name in names}
    shuffler = random.Random(0)
    for _ in range(rounds):
        order = shuffler.sample(names, len(names))
        for name in order:
            step = steps[name]
            _sync(device)
            start = time.perf_counter()
            out = step.forward()
            _sync(device)
            forward_end = time.perf_counter()
            torch.autograd.backward(out, step.upstream)
            _sync(device)
            end = time.perf_counter()
            del out
            step.clear()
            timings[name].forward.append(forward_end - start)
            timings[name].step.append(end - start)
    return timings


class MemoryUnavailable(RuntimeError):
    """This torch cannot report allocation events (the reason is the message)."""


def peak_bytes(step: Step, device: str) -> int:
    """Peak live tensor bytes during one step, above the bytes live at its start.

    Raises:
        MemoryUnavailable: on CPU, when the profiler's event list has no memory events
            (a torch without kineto memory profiling).
    """
    step.clear()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        step.run()
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - held)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step.run()
    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        raise MemoryUnavailable("torch.profiler exposes no kineto results")
    events = sorted((e.start_ns(), e.nbytes()) for e in results.events()
                    if e.name() == "[memory]")
    if not events:
        raise MemoryUnavailable("torch.profiler recorded no memory events")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def saved_bytes(step: Step) -> int:
    """Bytes of the distinct storages autograd saves for backward in one step, the step's
    leaves (inputs, parameters) excluded."""
    step.clear()
    excluded = {leaf.untyped_storage().data_ptr() for leaf in step.leaves}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = step.forward()
    torch.autograd.backward(out, step.upstream)
    step.clear()
    return sum(storages.values())
