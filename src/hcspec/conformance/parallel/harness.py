"""Run the ``parallel`` family: spawn the ranks, run the target unsharded here, compare.

:func:`setup_run` (the family's setup hook, called by the session) takes the resolved target
(hcspec's reference built-ins get their sharding capability from :mod:`.reference_targets`),
runs every case unsharded in this process, starts
``world_size`` processes with ``torch.multiprocessing`` (``fork`` on the CPU, ``spawn`` for
CUDA, which cannot be forked), each joining one ``torch.distributed`` process group (gloo on
the CPU, NCCL on CUDA) through a FileStore in a private temporary directory, and evaluates the
properties of :mod:`hcspec.conformance.families.parallel` on what the ranks saved.

Failure handling: a rank that raises records the case and the step and stops; a rank still
running at the deadline (waiting in a collective its peers never join) is terminated and
named with the step it was in; the earliest error is the one reported, in every affected
property, once. The processes are reaped and the temporary directory removed on every exit
path, including ``KeyboardInterrupt``.
"""

from __future__ import annotations

import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import ProcessException, start_processes

from hcspec.conformance.machinery.requirements import SHARDING_CAPABILITY, Distributed
from hcspec.conformance.machinery.setup import Prepared, SetupRequest
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.parallel import cases as cs
from hcspec.conformance.parallel import launcher, worker
from hcspec.conformance.parallel.protocol import SPLITS, ShardingError, sharding_splits
from hcspec.conformance.protocol import check_required
from hcspec.conformance.strategies import Case

MAX_CPU_WORLD_SIZE: Final = 8
"""The most gloo ranks the harness starts on one machine."""


@dataclass(frozen=True)
class Unsharded:
    """The same target run unsharded in one process, for one case.

    Attributes:
        output: ``X' [B, T, n, d]``. input_grad: ``∂L/∂X``. param_grads: name -> ``∂L/∂p``
        (None: no gradient reached it). params_init: name -> the parameter as built (before
        the perturbation). branch_input: what the branch received, ``x_in [B, T, d]``.
    """

    output: torch.Tensor
    input_grad: torch.Tensor | None
    param_grads: dict[str, torch.Tensor | None]
    params_init: dict[str, torch.Tensor]
    branch_input: torch.Tensor


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
    _first_error(outcome, errors)


def _first_error(outcome: RankOutcome, errors: list[tuple[float, int, dict[str, Any]]]) -> None:
    """Report the earliest of the ranks' ``errors`` (time, rank, error) in ``outcome``."""
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


def run_joined(job: worker.Job) -> RankOutcome:
    """Run ``job`` on the ranks of the launcher's group this process joined as rank 0
    (:func:`hcspec.conformance.parallel.launcher.run_everywhere`) and read their results.
    A rank that hangs in a collective fails there after ``job.collective_timeout`` seconds
    (its groups' timeout) and is reported with its step."""
    outcome = RankOutcome()
    start = time.perf_counter()
    gathered = launcher.run_everywhere(job)
    outcome.seconds = time.perf_counter() - start
    errors = []
    for rank, saved in sorted(gathered.items()):
        outcome.ranks[rank] = saved["cases"]
        if saved["error"] is not None:
            errors.append((saved["error"]["time"], rank, saved["error"]))
    _first_error(outcome, errors)
    return outcome


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


MAX_CPU_WORLD_SIZE_REASON: Final = (f"at most {MAX_CPU_WORLD_SIZE} CPU ranks are started on one "
                                    "machine (launch more with torchrun)")


def ranks_problem(device: str, world_size: int, joined: launcher.Launch | None) -> str | None:
    """Why ``world_size`` ranks cannot run on ``device`` (the run's resolved device) here, or
    None. Spawned: gloo on the CPU (at most :data:`MAX_CPU_WORLD_SIZE` ranks), NCCL on CUDA
    with one device per rank; under a launcher (``joined``): one CUDA device per local rank."""
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    if device == "cuda":
        wanted = joined.local_world_size if joined is not None else world_size
        found = torch.cuda.device_count()
        if found < wanted:
            return (f"NCCL needs one CUDA device per rank: {wanted} ranks, {found} CUDA "
                    "device(s) here (--device cpu runs them on gloo)")
        if not dist.is_nccl_available():
            return "this torch build has no NCCL"
        return None
    if not dist.is_gloo_available():
        return "this torch build has no gloo backend"
    if joined is None and world_size > MAX_CPU_WORLD_SIZE:
        return MAX_CPU_WORLD_SIZE_REASON
    return None


class RanksFailed(RuntimeError):
    """The multi-process run could not give a case's records (a rank raised or hung, the
    unsharded run raised, the sample impl was unusable); the message says which."""


def _failed(problem: str, trace: str | None) -> RanksFailed:
    """:class:`RanksFailed` with ``problem``, carrying the traceback where it happened (a
    rank's, the unsharded run's) as a note, so the report's traceback shows it."""
    error = RanksFailed(problem)
    if trace:
        setattr(error, "__notes__", [f"where it happened:\n{trace}"])  # noqa: B010 (add_note)
    return error


@dataclass
class DistributedRun:
    """One multi-process run of the target, shared by the multi-process properties.

    Built by :func:`prepare` (the facts, before any rank starts), filled by :func:`execute`
    (the cases, the unsharded results, the ranks' records). The checks read it as
    ``ctx.prepared`` (:func:`setup_run`, the family's setup hook).

    Attributes:
        facts: what applicability is decided on (:class:`Distributed`).
        factory: the target's factory with the sharding capability.
        device, backend: the run's device and the process group's backend.
        dtype, seed: the working dtype; the run's seed (added to every case's seed).
        cases: the cases (empty until executed). unsharded: case index -> the unsharded run.
        outcome: the ranks' records and the earliest problem (None until executed).
        problem, traceback: why no case can be checked (the sample impl, the unsharded run).
        conventions: what the run adds to the report header (``parallel.*``).
    """

    facts: Distributed
    factory: Callable[..., Any]
    device: str
    backend: str
    dtype: torch.dtype
    seed: int
    cases: list[cs.ParallelCase] = field(default_factory=list)
    unsharded: dict[int, Unsharded] = field(default_factory=dict)
    outcome: RankOutcome | None = None
    problem: str | None = None
    traceback: str | None = None
    conventions: dict[str, str] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """The number of ranks."""
        return self.facts.world_size

    def examples(self) -> list[Case]:
        """The cases as the runner's examples (:meth:`.cases.ParallelCase.as_case`)."""
        return [case.as_case() for case in self.cases]

    def case_of(self, case: Case) -> cs.ParallelCase:
        """The case of this run that ``case`` stands for (matched on every field it has).

        Raises:
            RanksFailed: the run has no such case (a replayed case of another world size or
                seed).
        """
        for mine in self.cases:
            if mine.as_case() == case:
                return mine
        raise RanksFailed(f"the case {case.to_json()} is not one of this run's cases (they "
                          "depend on the world size and the seed)")

    def records(self, case: cs.ParallelCase) -> None:
        """Check that every rank completed ``case``; the last case also reports a problem that
        came after every case completed (a rank that raised on its way out).

        Raises:
            RanksFailed: with the earliest problem (the ranks', the unsharded run's, the sample
                impl's), naming the rank, the case and the step.
        """
        if self.problem is not None:
            raise _failed(self.problem, self.traceback)
        outcome = self.outcome
        if outcome is None:
            raise RanksFailed("the ranks did not run")
        done = all(case.index in outcome.ranks.get(r, {}) for r in range(self.world_size))
        if not done:
            raise _failed(outcome.problem or "the case did not complete on every rank",
                          outcome.traceback)
        if case is self.cases[-1] and outcome.problem is not None:
            raise _failed(outcome.problem, outcome.traceback)

    def annotate(self, report: rp.Report) -> None:
        """Add the run's header lines (``parallel.*`` conventions, the sharding capability)."""
        if self.facts.splits and self.problem is None:
            report.capabilities = sorted({*report.capabilities, SHARDING_CAPABILITY})
        report.conventions.update(self.conventions)


def prepare(factory: Callable[..., Any], *, device: str, dtype: torch.dtype, seed: int,
            world_size: int, joined: launcher.Launch | None = None) -> DistributedRun:
    """The facts of a run of ``factory`` (the target's factory with the sharding capability)
    on ``world_size`` ranks, from a sample impl built on the CPU (nothing runs yet).

    A sample the kit cannot use (the factory raises, ``shard_splits`` is malformed) is the
    run's ``problem``: the properties report it as an error.
    """
    backend = launcher.backend_for(device)
    problem = ranks_problem(device, world_size, joined)
    run = DistributedRun(Distributed(world_size, problem=problem), factory, device, backend,
                         dtype, seed)
    run.conventions["parallel.world_size"] = (
        f"{world_size} ({backend}{', under a launcher' if joined is not None else ''})")
    try:
        sample = factory(4, 2 * world_size, layer_index=0, dtype=dtype, device="cpu", seed=seed)
        check_required(sample)
        splits = sharding_splits(sample)
    except (ShardingError, TypeError, ValueError) as exc:
        run.problem = f"the target's sample impl cannot be used: {exc}"
        run.facts = Distributed(world_size, ("?",), True, problem)  # decided by the error
        run.conventions["parallel.splits"] = "unknown (the sample impl cannot be used)"
        return run
    run.facts = Distributed(world_size, splits,
                            callable(getattr(sample, "named_parameters", None)), problem)
    run.conventions["parallel.splits"] = ", ".join(splits) or "none declared"
    return run


def execute(run: DistributedRun, timeout: float | None) -> None:
    """Run every case unsharded here, then on the ranks (spawned here, or the launcher's
    group this process joined as rank 0), within ``timeout`` seconds (None: no limit), and
    keep the results in ``run``. Nothing is raised for the target's failures: they are the
    run's ``problem`` or its outcome's. ``KeyboardInterrupt`` (SIGINT, SIGTERM) stops the
    ranks, reaps them and propagates."""
    if run.problem is not None or run.facts.problem is not None:
        return
    splits = tuple(s for s in SPLITS if s in run.facts.splits)
    run.cases = cs.make_cases(run.world_size, splits, run.seed)
    for case in run.cases:
        try:
            run.unsharded[case.index] = run_unsharded(run.factory, case, run.dtype, run.device)
        except Exception as exc:  # the target's own failure, unsharded: nothing to compare
            run.problem = (f"the unsharded run raised in case {case.index} ({case.describe()}): "
                           f"{type(exc).__name__}: {exc}")
            run.traceback = traceback.format_exc()
            return
    limit = float("inf") if timeout is None else timeout
    # the collectives' own limit: longer than the run's deadline, so that the harness names a
    # hung spawned rank first; under a launcher it is what stops a hung collective
    collective = 3600.0 * 24 if timeout is None else timeout + 30.0
    joined = launcher.joined()
    if joined is not None:
        job = worker.Job(factory=run.factory, cases=tuple(run.cases),
                         world_size=run.world_size, dtype=run.dtype, device=run.device,
                         backend=run.backend, store="", out_dir="",
                         collective_timeout=collective)
        run.outcome = run_joined(job)
        how = "under the launcher"
    else:
        job_args = {"factory": run.factory, "cases": tuple(run.cases), "dtype": run.dtype,
                    "device": run.device, "backend": run.backend,
                    "collective_timeout": collective}
        run.outcome = run_ranks(job_args, run.world_size, limit)
        how = _start_method(run.device)
    _declare_reductions(run.conventions, run.cases, run.outcome)
    run.conventions["parallel.run"] = (
        f"{run.world_size} ranks ({run.backend}, {how}) ran {len(run.cases)} cases over the "
        f"splits {', '.join(run.facts.splits)} in {run.outcome.seconds:.2f} s")


def setup_run(request: SetupRequest) -> DistributedRun | None:
    """The parallel family's setup hook (``declare(..., setup=setup_run)``,
    :data:`hcspec.conformance.machinery.setup.FamilySetup`): in a run with ranks
    (``request.world_size``), the facts of the target's sharding (:func:`prepare`), and the
    ranks run once (:func:`execute`, within ``request.timeout``) when one of the family's
    selected properties applies; None in a single-process run. ``KeyboardInterrupt`` stops
    the ranks and propagates."""
    if request.world_size is None:
        return None
    run = prepare(request.target.sharding_factory, device=request.device, dtype=request.dtype,
                  seed=request.seed, world_size=request.world_size, joined=launcher.joined())
    if request.applies(run):
        execute(run, request.timeout)
    return run


def of(prepared: Prepared | None) -> DistributedRun | None:
    """``prepared`` (a check's ``ctx.prepared``) as this harness's run, None when it is none."""
    return prepared if isinstance(prepared, DistributedRun) else None


def _declare_reductions(conventions: dict[str, str], cases: Sequence[cs.ParallelCase],
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
        conventions[f"parallel.parameters[{i}]"] = f"{how}: {', '.join(sorted(names))}"
