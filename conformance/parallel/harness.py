"""Run the ``parallel`` family: spawn the ranks, run the target unsharded here, compare.

:func:`check_parallel` resolves the target (hcspec's reference built-ins get their sharding
capability from :mod:`.reference_targets`), runs every case unsharded in this process, starts
``world_size`` processes with ``torch.multiprocessing`` (``fork`` on the CPU, ``spawn`` for
CUDA, which cannot be forked), each joining one ``torch.distributed`` process group (gloo on
the CPU, NCCL on CUDA) through a FileStore in a private temporary directory, and evaluates the
properties of :mod:`.properties` on what the ranks saved.

Failure handling: a rank that raises records the case and the step and stops; a rank still
running at the deadline (waiting in a collective its peers never join) is terminated and
named with the step it was in; the earliest error is the one reported, in every affected
property, once. The processes are reaped and the temporary directory removed on every exit
path, including ``KeyboardInterrupt``.
"""

from __future__ import annotations

import fnmatch
import math
import platform
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import ProcessException, start_processes

from hcspec.conformance import report as rp
from hcspec.conformance import targets as tg
from hcspec.conformance.parallel import cases as cs
from hcspec.conformance.parallel import worker
from hcspec.conformance.parallel.properties import (
    BY_ID,
    FAMILY,
    PROPERTIES,
    Evaluation,
    ParallelFailure,
    ParallelProperty,
    Setup,
    Unsharded,
)
from hcspec.conformance.parallel.protocol import ShardingError, sharding_splits
from hcspec.conformance.parallel.reference_targets import SHARDED_BUILTINS
from hcspec.conformance.protocol import check_required

DEFAULT_TIMEOUT: Final = 300.0
"""Seconds the whole sharded run may take before the ranks are terminated."""

MAX_CPU_WORLD_SIZE: Final = 8
"""The most gloo ranks the harness starts on one machine."""


@dataclass
class RankOutcome:
    """What came back from the ranks.

    Attributes:
        ranks: rank -> case index -> record, for the cases that rank completed.
        problem: the earliest failure (which rank, which case, which step), or None.
        traceback: its traceback, when it was an exception.
        seconds: wall time of the processes, start to reaped.
    """

    ranks: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    problem: str | None = None
    traceback: str | None = None
    seconds: float = 0.0


def _start_method(device: str) -> str:
    return "fork" if device == "cpu" and platform.system() == "Linux" else "spawn"


def run_ranks(job_args: dict[str, Any], world_size: int, timeout: float) -> RankOutcome:
    """Start ``world_size`` ranks on ``job_args`` (the fields of :class:`.worker.Job` but the
    paths), wait at most ``timeout`` seconds, reap them and read their results."""
    outcome = RankOutcome()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hcspec-parallel-") as tmp:
        job = worker.Job(store=str(Path(tmp) / "store"), out_dir=tmp,
                         world_size=world_size, **job_args)
        context = start_processes(  # type: ignore[no-untyped-call]
            worker.rank_main, args=(job,), nprocs=world_size, join=False,
            start_method=_start_method(job.device))
        crashed: str | None = None
        hung: list[int] = []
        try:
            deadline = time.monotonic() + timeout
            while not context.join(timeout=0.05):
                if time.monotonic() > deadline:
                    hung = [r for r, p in enumerate(context.processes) if p.is_alive()]
                    break
        except ProcessException as exc:  # a rank died without saving (signal, exit code)
            crashed = str(exc).strip()
        finally:
            # Terminate every rank before waiting on any: a rank whose peer is gone first
            # would otherwise see the closed connection, fail and save that as its result.
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
            for process in context.processes:
                process.join(5)
                if process.is_alive():
                    process.kill()
                    process.join()
        outcome.seconds = time.perf_counter() - start
        _collect(outcome, tmp, world_size, timeout if hung else None, crashed, hung)
    return outcome


def _collect(outcome: RankOutcome, tmp: str, world_size: int, timed_out: float | None,
             crashed: str | None, hung: Sequence[int] = ()) -> None:
    """Read the ranks' results into ``outcome``. A rank without results, or in ``hung`` (alive
    at the deadline: what it saved while being terminated is not its result), is reported with
    the step it was at."""
    errors: list[tuple[float, int, dict[str, Any]]] = []
    missing: list[int] = []
    for rank in range(world_size):
        path = worker.results_path(tmp, rank)
        if rank in hung or not path.exists():
            missing.append(rank)
            outcome.ranks[rank] = {}
            continue
        saved = torch.load(path, weights_only=False)
        outcome.ranks[rank] = saved["cases"]
        if saved["error"] is not None:
            errors.append((saved["error"]["time"], rank, saved["error"]))
    if missing:
        steps = {r: _read(worker.progress_path(tmp, r)) for r in missing}
        where = "; ".join(f"rank {r} was at: {steps[r] or 'start-up'}" for r in missing)
        if timed_out is not None:
            outcome.problem = (
                f"ranks {missing} did not finish within {timed_out:g} s and were terminated "
                f"({where}); a rank waiting in a collective that its peers never join hangs "
                "until the timeout")
        else:
            outcome.problem = f"ranks {missing} exited without results ({where}): {crashed}"
        if errors:
            outcome.problem += " — earlier: " + _describe(*min(errors)[1:])
            outcome.traceback = min(errors)[2]["traceback"]
        return
    if errors:
        _, rank, error = min(errors)
        outcome.problem = _describe(rank, error)
        others = sorted(r for _, r, _ in errors if r != rank)
        if others:
            outcome.problem += f" (then ranks {others} failed too)"
        outcome.traceback = error["traceback"]


def _describe(rank: int, error: dict[str, Any]) -> str:
    case = "" if error["case"] is None else f"case {error['case']}, "
    first_line = error["message"].strip().splitlines()[0] if error["message"].strip() else ""
    return f"rank {rank} raised in {case}step '{error['step']}': {error['type']}: {first_line}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def run_unsharded(factory: Callable[..., Any], case: cs.ParallelCase, dtype: torch.dtype,
                  device: str) -> Unsharded:
    """The case run by the target unsharded in this process (same seed, same perturbation,
    same inputs and branch as the ranks)."""
    fresh = factory(case.n, case.d, layer_index=case.layer_index, dtype=dtype, device=device,
                    seed=case.seed)
    params_init = {name: p.detach().to("cpu").clone() for name, p in cs.named_parameters(fresh)}
    impl = factory(case.n, case.d, layer_index=case.layer_index, dtype=dtype, device=device,
                   seed=case.seed)
    cs.perturb(impl, case)
    data = cs.case_data(case, dtype, device)
    x = data.x.clone().requires_grad_(True)
    branch = cs.MixingBranch(data.mixing)
    out = impl.forward(x, branch)
    torch.autograd.backward((out * data.grad_out).sum())
    grads = {name: None if p.grad is None else p.grad.detach().to("cpu").clone()
             for name, p in cs.named_parameters(impl)}
    return Unsharded(out.detach().to("cpu"), None if x.grad is None else x.grad.to("cpu"),
                     grads, params_init, branch.inputs[0].to("cpu"))


def select(only: Iterable[str] | None = None,
           skip: Iterable[str] | None = None) -> list[ParallelProperty]:
    """The properties matching ``only`` (ids, globs or the family name ``parallel``;
    comma-separated items allowed; None: all), minus ``skip``.

    Raises:
        ValueError: a pattern matches no property of the family.
    """
    def patterns(items: Iterable[str] | None) -> list[str]:
        return [p.strip() for item in (items or ()) for p in item.split(",") if p.strip()]

    def matches(pattern: str) -> set[str]:
        if pattern == FAMILY:
            return set(BY_ID)
        found = {pid for pid in BY_ID if fnmatch.fnmatchcase(pid, pattern)}
        if not found:
            raise ValueError(f"{pattern!r} matches no property of the parallel family "
                             f"({', '.join(BY_ID)})")
        return found

    wanted = set(BY_ID) if not patterns(only) else set().union(*map(matches, patterns(only)))
    dropped = set().union(*map(matches, patterns(skip))) if patterns(skip) else set()
    return [p for p in PROPERTIES if p.id in wanted - dropped]


def resolve_device(device: str, world_size: int) -> tuple[str, str, str | None]:
    """``(device, backend, reason)``: ``reason`` says why the run cannot happen here (None
    when it can). ``auto`` picks CUDA/NCCL when there are ``world_size`` CUDA devices, else
    the CPU with gloo.

    Raises:
        ValueError: ``device`` is not ``cpu``, ``cuda`` or ``auto``.
    """
    if device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"device must be cpu, cuda or auto, got {device!r}")
    if not dist.is_available():
        return device, "", "torch.distributed is not available in this torch build"
    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "auto":
        device = "cuda" if cuda_count >= world_size and dist.is_nccl_available() else "cpu"
    if device == "cuda":
        if cuda_count < world_size:
            return device, "nccl", (f"NCCL needs one CUDA device per rank: {world_size} ranks, "
                                    f"{cuda_count} CUDA device(s) here")
        if not dist.is_nccl_available():
            return device, "nccl", "this torch build has no NCCL"
        return device, "nccl", None
    if not dist.is_gloo_available():
        return device, "gloo", "this torch build has no gloo backend"
    if world_size > MAX_CPU_WORLD_SIZE:
        return device, "gloo", f"at most {MAX_CPU_WORLD_SIZE} CPU ranks"
    return device, "gloo", None


def _resolve_factory(target: str | Callable[..., Any] | None) -> tuple[str, Callable[..., Any],
                                                                       str, dict[str, str]]:
    resolved = tg.resolve(target)
    factory = SHARDED_BUILTINS.get(resolved.name, resolved.factory)
    return resolved.name, factory, resolved.description, resolved.versions


def check_parallel(
    target: str | Callable[..., Any] | None = None,
    *,
    world_size: int = 2,
    device: str = "auto",
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    profile: str = "ci",
) -> rp.Report:
    """Run the ``parallel`` family against ``target`` on ``world_size`` ranks.

    Args:
        target: a TARGET string, a factory, or None (``HC_CONFORMANCE_TARGET``).
        world_size: ranks to start (≥ 1; T and d of the cases are multiples of it).
        device: ``cpu`` (gloo), ``cuda`` (NCCL, one device per rank) or ``auto``.
        dtype: the working dtype. seed: added to every case's seed.
        only, skip: property ids, globs or ``parallel``.
        timeout: seconds before the ranks are terminated.
        profile: recorded in the report (the family has one fixed set of cases).

    Returns:
        The report: one result per selected property; not applicable (with the reason) when
        the target has no sharding capability or the device cannot host the ranks.

    Raises:
        hcspec.conformance.targets.TargetError: the target cannot be resolved.
        ValueError: ``world_size`` < 1, unknown device, or ``only``/``skip`` match nothing.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    selected = select(only, skip)
    name, factory, description, versions = _resolve_factory(target)
    device, backend, device_reason = resolve_device(device, world_size)
    versions = {**versions, "python": platform.python_version(), "torch": torch.__version__}
    report = rp.Report(target=name, kit_version=rp.kit_version(), profile=profile, seed=seed,
                       device=device, dtype=str(dtype).removeprefix("torch."),
                       description=description, versions=versions)
    report.conventions["parallel.world_size"] = f"{world_size} ({backend or 'no backend'})"
    try:
        sample = factory(4, 2 * world_size, layer_index=0, dtype=dtype, device="cpu", seed=seed)
        check_required(sample)
        splits = sharding_splits(sample)
    except (ShardingError, TypeError, ValueError) as exc:
        report.setup_error = f"the target's sample impl cannot be used: {exc}"
        return report
    report.kind = str(sample.kind)
    setup = Setup(splits, callable(getattr(sample, "named_parameters", None)), world_size)
    report.capabilities = sorted({"sharding"} if splits else set())
    report.conventions["parallel.splits"] = ", ".join(splits) or "none declared"
    reasons = {p.id: p.unmet(setup) or device_reason for p in selected}
    if all(reasons.values()):
        report.results = [_result(p, rp.NOT_APPLICABLE, reasons[p.id] or "") for p in selected]
        return report
    cases = cs.make_cases(world_size, splits, seed)
    unsharded: dict[int, Unsharded] = {}
    for case in cases:
        try:
            unsharded[case.index] = run_unsharded(factory, case, dtype, device)
        except Exception as exc:  # the target's own failure, unsharded: nothing to compare
            message = (f"the unsharded run raised in case {case.index} ({case.describe()}): "
                       f"{type(exc).__name__}: {exc}")
            report.results = [
                _result(p, rp.NOT_APPLICABLE, reasons[p.id] or "") if reasons[p.id] else
                _result(p, rp.ERROR, message, traceback=_format_traceback()) for p in selected]
            return report
    job_args = {"factory": factory, "cases": tuple(cases), "dtype": dtype, "device": device,
                "backend": backend,
                # longer than the run's deadline, so that the harness names a hung rank first
                "collective_timeout": timeout + 30.0}
    outcome = run_ranks(job_args, world_size, timeout)
    _declare_reductions(report, cases, outcome)
    report.conventions["parallel.run"] = (
        f"{world_size} ranks ({backend}, {_start_method(device)}) ran {len(cases)} cases over "
        f"the splits {', '.join(splits)} in {outcome.seconds:.2f} s")
    done = [c for c in cases if all(c.index in outcome.ranks[r] for r in range(world_size))]
    for prop in selected:
        if reasons[prop.id]:
            report.results.append(_result(prop, rp.NOT_APPLICABLE, reasons[prop.id] or ""))
            continue
        report.results.append(_evaluate(prop, done, world_size, dtype, unsharded, outcome,
                                        name))
    return report


def _declare_reductions(report: rp.Report, cases: Sequence[cs.ParallelCase],
                        outcome: RankOutcome) -> None:
    """Put the declared parameter map, per split, in the header (as rank 0 declared it)."""
    groups: dict[str, set[str]] = {}
    for case in cases:
        record = outcome.ranks.get(0, {}).get(case.index)
        for name, info in (record or {}).get("init", {}).items():
            who = ("the framework (the kit sums it over the group, as DDP does)"
                   if info["gradient"] == "framework" else "the target")
            groups.setdefault(f"{case.split}: {info['placement']}, gradient completed by "
                              f"{who}", set()).add(name)
    for i, (how, names) in enumerate(sorted(groups.items())):
        report.conventions[f"parallel.parameters[{i}]"] = f"{how}: {', '.join(sorted(names))}"


def _result(prop: ParallelProperty, status: str, message: str, **extra: Any,
            ) -> rp.PropertyResult:
    return rp.PropertyResult(id=prop.id, family=prop.family, statement=prop.statement,
                             theorem=prop.theorem, status=status, message=message, **extra)


def _evaluate(prop: ParallelProperty, done: Sequence[cs.ParallelCase], world_size: int,
              dtype: torch.dtype, unsharded: dict[int, Unsharded], outcome: RankOutcome,
              target: str) -> rp.PropertyResult:
    start = time.perf_counter()
    ev = Evaluation(done, world_size, dtype, unsharded, outcome.ranks)
    reproduce = (f"hc-conformance run {target} --world-size {world_size} --only {prop.id}")
    status, message, trace = rp.PASSED, "", None
    try:
        prop.check(ev)
    except ParallelFailure as exc:
        status, message = rp.FAILED, str(exc)
    except Exception as exc:  # the check met something it cannot read: the target's output
        status, message = rp.ERROR, f"{type(exc).__name__}: {exc}"
        trace = _format_traceback()
    if status == rp.PASSED and outcome.problem is not None:
        status, message, trace = rp.ERROR, outcome.problem, outcome.traceback
    elif status == rp.PASSED and not done:
        status, message = rp.ERROR, "no case completed on every rank"
    label, error, tolerance = ev.worst
    achieved = ({"label": label, "error": error if math.isfinite(error) else str(error),
                 "tolerance": tolerance} if label else None)
    return _result(prop, status, message, examples=ev.checked,
                   seconds=time.perf_counter() - start, achieved=achieved,
                   reproduce=None if status == rp.PASSED else reproduce, traceback=trace)


def _format_traceback() -> str:
    import traceback

    return traceback.format_exc()


def assert_parallel_conforms(target: str | Callable[..., Any] | None = None, *,
                             world_size: int = 2, **options: Any) -> rp.Report:
    """:func:`check_parallel`, for pytest: returns the report when nothing failed
    unexpectedly, else raises ``AssertionError`` with every failure (property, message).

    Raises:
        AssertionError: a property failed or errored, or the setup failed.
        As :func:`check_parallel` for bad arguments.
    """
    report = check_parallel(target, world_size=world_size, **options)
    if report.ok:
        return report
    lines = [f"{report.target} on {world_size} ranks: the parallel family failed"]
    if report.setup_error:
        lines.append(f"setup: {report.setup_error}")
    lines += [f"{r.id} {r.status}: {r.message}" for r in report.results
              if r.status in rp.UNEXPECTED]
    raise AssertionError("\n".join(lines))

