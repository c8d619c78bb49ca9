"""What each rank runs: join the process group, run every case sharded, save the results.

:func:`rank_main` is the function the harness starts in each process (``torch.multiprocessing``).
It never raises: an exception is recorded with the rank, the case and the step, the rank stops
(its peers may be waiting in a collective it will not join; they fail or time out), and the
process group is destroyed on every exit path. Each rank writes one file,
``rank{r}.pt`` (:func:`results_path`), and keeps ``rank{r}.progress`` up to date with the step
it is in, so a rank that hangs can be named with its case and step.
"""

from __future__ import annotations

import datetime
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist

from hcspec.conformance.parallel import cases as cs
from hcspec.conformance.parallel.protocol import (
    ShardedImpl,
    check_sharded,
    local_chunk,
    sharding_splits,
    split_axis,
)


@dataclass(frozen=True)
class Job:
    """Everything a rank needs (picklable when ``factory`` is a module-level function).

    Attributes:
        factory: the target's factory (with the sharding capability).
        cases: the cases, run in order.
        world_size: the number of ranks.
        dtype, device: of the impls and tensors (``cuda``: rank r uses device r).
        backend: ``gloo`` or ``nccl``.
        store: a file path for ``torch.distributed``'s FileStore rendezvous (spawned ranks;
            '' under a launcher, whose group the ranks have joined already).
        out_dir: where the ranks write their results and progress ('' under a launcher: the
            results go back by ``gather_object``, no progress file).
        collective_timeout: seconds a collective may wait before the backend raises.
    """

    factory: Callable[..., Any]
    cases: tuple[cs.ParallelCase, ...]
    world_size: int
    dtype: torch.dtype
    device: str
    backend: str
    store: str
    out_dir: str
    collective_timeout: float


def results_path(out_dir: str | Path, rank: int) -> Path:
    """The file rank ``rank`` saves its results to."""
    return Path(out_dir) / f"rank{rank}.pt"


def progress_path(out_dir: str | Path, rank: int) -> Path:
    """The file holding the step rank ``rank`` is in."""
    return Path(out_dir) / f"rank{rank}.progress"


class _Progress:
    def __init__(self, job: Job, rank: int) -> None:
        self.path = progress_path(job.out_dir, rank) if job.out_dir else None
        self.case: cs.ParallelCase | None = None
        self.step = "joining the process group"

    def at(self, step: str, case: cs.ParallelCase | None = None) -> None:
        if case is not None:
            self.case = case
        self.step = step
        where = f"case {self.case.index} ({self.case.describe()}), " if self.case else ""
        if self.path is not None:
            self.path.write_text(f"{where}{step}", encoding="utf-8")


def _device(job: Job, rank: int) -> str:
    return f"cuda:{rank}" if job.device == "cuda" else job.device


def _index_map(shard: Any, shape: tuple[int, ...]) -> torch.Tensor | None:
    """The flat indices into the full parameter that this rank's sharded part holds."""
    if shard.placement != "sharded":
        return None
    index = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.int64).reshape(shape)
    mapped: torch.Tensor = shard.shard(index)
    return mapped.clone()


def _shard(job: Job, case: cs.ParallelCase, device: str, group: dist.ProcessGroup,
           perturbed: bool) -> tuple[Any, ShardedImpl]:
    impl = job.factory(case.n, case.d, layer_index=case.layer_index, dtype=job.dtype,
                       device=device, seed=case.seed)
    if case.split not in sharding_splits(impl):
        raise ValueError(f"the impl does not declare the split {case.split!r}")
    if perturbed:
        cs.perturb(impl, case)
    return impl, check_sharded(impl.shard(case.split, group))


def _init_record(job: Job, case: cs.ParallelCase, device: str,
                 group: dist.ProcessGroup) -> dict[str, Any]:
    impl, sharded = _shard(job, case, device, group, perturbed=False)
    shapes = {name: tuple(p.shape) for name, p in cs.named_parameters(impl)}
    record: dict[str, Any] = {}
    for shard in sharded.parameter_shards():
        record[shard.name] = {
            "local": shard.local.detach().to("cpu").clone(),
            "placement": shard.placement,
            "gradient": shard.gradient,
            "index": _index_map(shard, shapes[shard.name]) if shard.name in shapes else None,
        }
    return record


def upper_ranks(world_size: int) -> list[int]:
    """The ranks of the subgroup that does not start at rank 0: the upper half,
    ``[W − max(1, W // 2), W)`` (ranks 2–3 of 4, rank 1 of 2)."""
    return list(range(world_size - max(1, world_size // 2), world_size))


def _run_subgroup(job: Job, case: cs.ParallelCase, device: str, group: dist.ProcessGroup,
                  data: Any, progress: _Progress) -> dict[str, Any]:
    """The perturbed impl sharded over ``group`` (the upper ranks), forward and backward of
    ``⟨G', X'⟩`` on this rank's chunk by its rank *in the group*: ``subgroup_output``,
    ``subgroup_input_grad``, or ``subgroup_error`` (the exception as text: an impl that picks
    its chunk by the global rank or world size raises here, and the property says so)."""
    progress.at("sharded forward and backward on the upper ranks (subgroup check)")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    try:
        _, sharded = _shard(job, case, device, group, perturbed=True)
        x_local = local_chunk(data.x, case.split, rank, world).clone().requires_grad_(True)
        out = sharded.forward(x_local, cs.MixingBranch(data.mixing))
        if not isinstance(out, torch.Tensor) or out.shape != x_local.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"the sharded forward returned {got}, expected this rank's chunk "
                             f"{tuple(x_local.shape)}")
        grad_out = local_chunk(data.grad_out, case.split, rank, world)
        torch.autograd.backward((out * grad_out).sum())
    except Exception as exc:  # a verdict of parallel.subgroups, not a crash of the run
        return {"subgroup_error": f"{type(exc).__name__}: {exc}"}
    grad = None if x_local.grad is None else x_local.grad.to("cpu").clone()
    return {"subgroup_output": out.detach().to("cpu").clone(), "subgroup_input_grad": grad}


def _run_case(job: Job, case: cs.ParallelCase, rank: int, device: str,
              group: dist.ProcessGroup, half: dist.ProcessGroup | None,
              progress: _Progress, upper: dist.ProcessGroup | None = None) -> dict[str, Any]:
    world = job.world_size
    progress.at("building the impl and checking its initial parameters", case)
    record: dict[str, Any] = {"init": _init_record(job, case, device, group)}
    data = cs.case_data(case, job.dtype, device)
    progress.at("building the perturbed impl and sharding it")
    _, sharded = _shard(job, case, device, group, perturbed=True)
    x_local = local_chunk(data.x, case.split, rank, world).clone().requires_grad_(True)
    branch = cs.MixingBranch(data.mixing)
    progress.at("sharded forward")
    out = sharded.forward(x_local, branch)
    if not isinstance(out, torch.Tensor) or out.shape != x_local.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"the sharded forward returned {got}, expected this rank's chunk "
                         f"{tuple(x_local.shape)}")
    record["output"] = out.detach().to("cpu").clone()
    record["branch_inputs"] = [t.to("cpu") for t in branch.inputs]
    progress.at("sharded backward")
    grad_out = local_chunk(data.grad_out, case.split, rank, world)
    torch.autograd.backward((out * grad_out).sum())
    record["input_grad"] = None if x_local.grad is None else x_local.grad.to("cpu").clone()
    progress.at("reducing the gradients the framework reduces (sum all-reduce)")
    grads: dict[str, torch.Tensor | None] = {}
    for shard in sharded.parameter_shards():
        grad = shard.local.grad
        if shard.gradient == "framework":
            grad = torch.zeros_like(shard.local) if grad is None else grad.clone()
            dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=group)
        grads[shard.name] = None if grad is None else grad.detach().to("cpu").clone()
    record["param_grads"] = grads
    if half is not None:
        progress.at("sharded forward on half the ranks (world-size check)")
        half_world = dist.get_world_size(half)
        _, half_sharded = _shard(job, case, device, half, perturbed=True)
        half_local = local_chunk(data.x, case.split, dist.get_rank(half), half_world)
        with torch.no_grad():
            half_out = half_sharded.forward(half_local, cs.MixingBranch(data.mixing))
        record["half_output"] = half_out.to("cpu").clone()
    if upper is not None:
        record.update(_run_subgroup(job, case, device, upper, data, progress))
    return record


def run_cases(job: Job, rank: int, device: str, progress: _Progress | None = None,
              ) -> dict[str, Any]:
    """Run every case of ``job`` as rank ``rank`` of the default process group (joined
    already), on ``device``; return ``{"rank", "cases", "error", "seconds"}``: case index ->
    record for the cases completed, and the exception that stopped the rank (its case, step,
    type, message, traceback and time) or None. Never raises."""
    progress = progress or _Progress(job, rank)
    results: dict[str, Any] = {"rank": rank, "cases": {}, "error": None, "seconds": 0.0}
    start = time.perf_counter()
    try:
        progress.at("creating the process groups")
        timeout = datetime.timedelta(seconds=job.collective_timeout)
        every = list(range(job.world_size))
        world_group = cast(dist.ProcessGroup, dist.new_group(every, timeout=timeout))
        half_ranks = list(range(max(1, job.world_size // 2)))
        half_group = dist.new_group(half_ranks, timeout=timeout)  # every rank calls new_group
        half = half_group if rank in half_ranks else None
        upper_group = dist.new_group(upper_ranks(job.world_size), timeout=timeout)
        upper = upper_group if rank in upper_ranks(job.world_size) else None
        for case in job.cases:
            split_axis(case.split)
            results["cases"][case.index] = _run_case(job, case, rank, device,
                                                     world_group, half, progress, upper)
        progress.at("done")
    except BaseException as exc:  # recorded for the harness; the rank stops here
        results["error"] = {
            "case": None if progress.case is None else progress.case.index,
            "step": progress.step,
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
            "time": time.time(),
        }
    results["seconds"] = time.perf_counter() - start
    return results


def rank_main(rank: int, job: Job) -> None:
    """The body of spawned rank ``rank``: join the group through the job's FileStore, run
    :func:`run_cases`, save the results (see the module docstring). Never raises."""
    torch.set_num_threads(1)
    progress = _Progress(job, rank)
    results: dict[str, Any] = {"rank": rank, "cases": {}, "error": None, "seconds": 0.0}
    try:
        progress.at("joining the process group")
        device = _device(job, rank)
        if job.device == "cuda":
            torch.cuda.set_device(rank)
        dist.init_process_group(job.backend, init_method=f"file://{job.store}", rank=rank,
                                world_size=job.world_size,
                                timeout=datetime.timedelta(seconds=job.collective_timeout))
        results = run_cases(job, rank, device, progress)
    except BaseException as exc:  # joining failed: recorded for the harness
        results["error"] = {"case": None, "step": progress.step, "type": type(exc).__name__,
                            "message": str(exc), "traceback": traceback.format_exc(),
                            "time": time.time()}
    finally:
        # written under a temporary name, then renamed: a rank terminated at the deadline while
        # saving leaves no partial file for the harness to read
        final = results_path(job.out_dir, rank)
        partial = final.with_suffix(".partial")
        torch.save(results, partial)
        partial.replace(final)
        if dist.is_initialized():
            dist.destroy_process_group()
