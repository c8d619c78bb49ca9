"""The ``parallel`` family: the target run sharded across ``torch.distributed`` ranks equals
the same target run unsharded in one process.

Each property is declared with :func:`~hcspec.conformance.machinery.declaration.declare` like
every other; what sets the family apart is its requirement
:data:`~hcspec.conformance.machinery.requirements.DISTRIBUTED`: the runner hands such
properties declare the family's setup hook
(:func:`hcspec.conformance.parallel.harness.setup_run`), which the session calls once per run:
it runs the ranks once (spawned by ``--world-size N``, or the launcher's under torchrun) and
gives every check the results as ``ctx.prepared`` (read through :func:`_run`). A
single-process run reports the family not applicable, with that reason.

Cases: each case of the run (:func:`hcspec.conformance.parallel.cases.make_cases`: for each
declared split, three tiny shapes whose T and d divide by the world size) is one explicit
example; nothing is explored or shrunk (every case costs a round of collectives on every
rank). The expected values are the target's own unsharded run, chunked by the kit's layout
(:func:`hcspec.conformance.parallel.protocol.local_chunk`), never the reference's.

Tolerances (:mod:`hcspec.conformance.rules`): the sharded run differs from the unsharded one
only in the order of sums (the all-reduced partial sums over d, the branch's gather), so
values and gradients compare by scaled error under ``self_consistency`` (float64: the law's
2.2e-11); parameters at init must be bitwise equal (``exact``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import torch

from hcspec.conformance.author import (
    DISTRIBUTED,
    NAMED_PARAMETERS,
    RANKS_START,
    SHARDING,
    TWO_RANKS,
    Case,
    Context,
    PropertyFailure,
    declare,
    metrics,
    rules,
)
from hcspec.conformance.parallel import harness
from hcspec.conformance.parallel.cases import ParallelCase
from hcspec.conformance.parallel.protocol import split_axis
from hcspec.conformance.parallel.worker import upper_ranks

SHARDED: Final = (DISTRIBUTED, SHARDING)
"""What every property of the family needs first: ranks, and a target that shards."""


def _examples(ctx: Context) -> Sequence[Case]:
    """The run's cases (none outside a multi-process run)."""
    run = harness.of(ctx.prepared)
    return [] if run is None else run.examples()


def _run(ctx: Context) -> harness.DistributedRun:
    """The multi-process run the family's setup hook prepared.

    Raises:
        hcspec.conformance.parallel.harness.RanksFailed: there is none (a check reached
            outside a multi-process run).
    """
    run = harness.of(ctx.prepared)
    if run is None:
        raise harness.RanksFailed("no multi-process run was prepared for this property")
    return run


def _case(ctx: Context, case: Case) -> ParallelCase:
    """The run's case for ``case``, after checking every rank completed it.

    Raises:
        hcspec.conformance.parallel.harness.RanksFailed: the ranks (or the unsharded run)
            failed: an error of the property, naming the rank, the case and the step.
    """
    run = _run(ctx)
    mine: ParallelCase = run.case_of(case)
    run.records(mine)
    return mine


def _record(ctx: Context, case: ParallelCase, rank: int) -> dict[str, Any]:
    record: dict[str, Any] = _outcome(ctx).ranks[rank][case.index]
    return record


def _outcome(ctx: Context) -> harness.RankOutcome:
    outcome = _run(ctx).outcome
    if outcome is None:
        raise harness.RanksFailed("the ranks did not run")
    return outcome


def _where(case: ParallelCase) -> str:
    return f"case {case.index} ({case.describe()})"


def _expect(ctx: Context, label: str, errors: dict[int, float], detail: str = "") -> None:
    """Record the per-rank ``errors`` of ``label`` (rank -1: the gathered tensor) under the
    property's rule, naming the worst rank and every other rank beyond the allowance.

    Raises:
        PropertyFailure: an error exceeds the allowance or is NaN.
    """
    allowed = ctx.record.allowance().allowance
    bad = {r: e for r, e in errors.items() if math.isnan(e) or e > allowed}
    pool = bad or errors
    worst = max(pool, key=lambda r: math.inf if math.isnan(pool[r]) else pool[r])
    who = "gathered over the ranks" if worst < 0 else f"rank {worst}"
    others = sorted(r for r in bad if r != worst and r >= 0)
    also = f" (also ranks {others})" if others else ""
    ctx.record.expect(f"{label}, {who}{also}", errors[worst], detail=detail)


def _max_abs(got: torch.Tensor, want: torch.Tensor) -> float:
    if got.shape != want.shape:
        return math.inf
    diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
    return float(diff.max()) if diff.numel() else 0.0


def _chunks(full: torch.Tensor, case: ParallelCase, world: int) -> list[torch.Tensor]:
    return list(full.chunk(world, dim=split_axis(case.split)))


def _per_rank(ctx: Context, case: ParallelCase, key: str,
              want: torch.Tensor) -> dict[int, float]:
    errors = {}
    world = _run(ctx).world_size
    for rank, chunk in enumerate(_chunks(want, case, world)):
        got = _record(ctx, case, rank).get(key)
        errors[rank] = math.inf if got is None else metrics.scaled_error(
            got, chunk, float(want.abs().max()) if want.numel() else 0.0)
    return errors


def _gathered(ctx: Context, case: ParallelCase, key: str,
              ranks: Sequence[int]) -> torch.Tensor | None:
    """The ranks' ``key`` tensors concatenated along the split axis in rank order (None when
    a rank has none)."""
    parts = [_record(ctx, case, r).get(key) for r in ranks]
    if any(p is None for p in parts):
        return None
    return torch.cat([p for p in parts if p is not None], dim=split_axis(case.split))


@declare(
    "parallel.replicated_init",
    statement="every rank starts from the unsharded impl's parameters for the same seed (or "
              "their declared part)",
    requires=(*SHARDED, NAMED_PARAMETERS, RANKS_START), tolerance=rules.EXACT,
    examples=_examples, setup=harness.setup_run, explore=False, shrink=False)
def check_replicated_init(ctx: Context, case: Case) -> None:
    """Every rank's parameters, as built, are those of the unsharded impl built from the same
    seed: replicated ones equal, sharded ones equal to their declared part (bitwise)."""
    pc = _case(ctx, case)
    full = _run(ctx).unsharded[pc.index].params_init
    errors: dict[int, float] = {}
    details: dict[int, str] = {}
    for rank in range(_run(ctx).world_size):
        init = _record(ctx, pc, rank)["init"]
        missing = sorted(set(full) - set(init))
        unknown = sorted(set(init) - set(full))
        if missing or unknown:
            raise PropertyFailure(
                f"{_where(pc)}, rank {rank}: parameter_shards() does not map the unsharded "
                f"parameters one to one (missing {missing}, unknown {unknown})")
        errors[rank] = 0.0
        for name, info in init.items():
            want = full[name] if info["index"] is None else full[name].flatten()[info["index"]]
            error = _max_abs(info["local"], want)
            if error > errors[rank] or math.isnan(error):
                errors[rank] = error
                details[rank] = f"{name} ({info['placement']})"
    worst = max(errors, key=lambda r: errors[r])
    _expect(ctx, f"{_where(pc)}: parameters at init", errors,
            f"worst parameter {details.get(worst, '?')}: every rank must build the same "
            "parameters from the same seed (a rank-dependent seed or init?)")


_FORWARD_HINT: Final[dict[str, str]] = {
    "tokens": "each rank's chunk compared with the same tokens of the unsharded output (the "
              "weights are per token and need no collective: different parameters, or a "
              "branch not given the whole sequence?)",
    "hidden": "each rank's chunk compared with the same columns of the unsharded output (a "
              "reduction over d not all-reduced: the RMS/LayerNorm statistics or a partial "
              "projection?)",
}


@declare(
    "parallel.forward",
    statement="the sharded forward, gathered in rank order, equals the unsharded forward",
    requires=(*SHARDED, RANKS_START), tolerance=rules.SELF_CONSISTENCY, examples=_examples,
    setup=harness.setup_run,
    explore=False, shrink=False)
def check_forward(ctx: Context, case: Case) -> None:
    """The ranks' outputs, gathered in rank order, equal the unsharded forward."""
    pc = _case(ctx, case)
    want = _run(ctx).unsharded[pc.index].output
    _expect(ctx, f"{_where(pc)}: gathered forward vs unsharded",
            _per_rank(ctx, pc, "output", want), _FORWARD_HINT[pc.split])


def _order(got: torch.Tensor, want: torch.Tensor, case: ParallelCase, world: int,
           allowed: float) -> str:
    """Which of ``want``'s chunks each chunk of ``got`` equals (a gather-order diagnosis)."""
    if got.shape != want.shape:
        return ""
    mine, theirs = _chunks(got, case, world), _chunks(want, case, world)
    order = []
    for chunk in mine:
        match = [j for j, ref in enumerate(theirs)
                 if metrics.scaled_error(chunk, ref) <= allowed]
        order.append(str(match[0]) if match else "?")
    return f"; its chunks are the expected chunks [{', '.join(order)}]"


@declare(
    "parallel.branch_gathered",
    statement="each rank calls the branch once, on x_in gathered over the group in rank order",
    requires=(*SHARDED, RANKS_START), tolerance=rules.SELF_CONSISTENCY, examples=_examples,
    setup=harness.setup_run,
    explore=False, shrink=False)
def check_branch_gathered(ctx: Context, case: Case) -> None:
    """On every rank the branch is called once, on ``x_in`` gathered over the group in rank
    order (the whole sequence under ``tokens``, the whole hidden vector under ``hidden``)."""
    pc = _case(ctx, case)
    world = _run(ctx).world_size
    want = _run(ctx).unsharded[pc.index].branch_input
    allowed = ctx.record.allowance().allowance
    errors: dict[int, float] = {}
    detail = ""
    for rank in range(world):
        inputs = _record(ctx, pc, rank)["branch_inputs"]
        if len(inputs) != 1:
            raise PropertyFailure(f"{_where(pc)}, rank {rank}: the branch was called "
                                  f"{len(inputs)} times, expected once")
        got = inputs[0]
        if got.shape != want.shape:
            raise PropertyFailure(
                f"{_where(pc)}, rank {rank}: the branch received {list(got.shape)}, expected "
                f"the gathered {list(want.shape)} (a token-mixing sublayer must see the whole "
                "sequence)")
        errors[rank] = metrics.scaled_error(got, want)
        if errors[rank] > allowed and not detail:
            detail = _order(got, want, pc, world, allowed)
    _expect(ctx, f"{_where(pc)}: branch input vs the unsharded x_in", errors,
            "the gathered chunks must be in rank order" + detail)


@declare(
    "parallel.input_gradients",
    statement="the sharded ∂L/∂X, gathered, equals the unsharded input gradient",
    requires=(*SHARDED, RANKS_START), tolerance=rules.SELF_CONSISTENCY, examples=_examples,
    setup=harness.setup_run,
    explore=False, shrink=False)
def check_input_gradients(ctx: Context, case: Case) -> None:
    """The ranks' ``∂L/∂X`` chunks, gathered, equal the unsharded input gradient."""
    pc = _case(ctx, case)
    want = _run(ctx).unsharded[pc.index].input_grad
    if want is None:
        raise PropertyFailure(f"case {pc.index}: the unsharded forward gave the input no "
                              "gradient")
    _expect(ctx, f"{_where(pc)}: gathered ∂L/∂X vs unsharded",
            _per_rank(ctx, pc, "input_grad", want))


@declare(
    "parallel.parameter_gradients",
    statement="after the declared reduction every rank's parameter gradients are the "
              "unsharded ones",
    requires=(*SHARDED, NAMED_PARAMETERS, RANKS_START), tolerance=rules.SELF_CONSISTENCY,
    examples=_examples, setup=harness.setup_run, explore=False, shrink=False)
def check_parameter_gradients(ctx: Context, case: Case) -> None:
    """After the declared reduction, every rank's parameter gradients equal the unsharded
    ones (replicated: the whole gradient; sharded: its declared part)."""
    pc = _case(ctx, case)
    unsharded = _run(ctx).unsharded[pc.index]
    for name, full in sorted(unsharded.param_grads.items()):
        want_full = torch.zeros_like(unsharded.params_init[name]) if full is None else full
        errors: dict[int, float] = {}
        owner = ""
        for rank in range(_run(ctx).world_size):
            record = _record(ctx, pc, rank)
            info = record["init"][name]
            owner = info["gradient"]
            want = want_full if info["index"] is None else want_full.flatten()[info["index"]]
            got = record["param_grads"].get(name)
            got = torch.zeros_like(want) if got is None else got
            errors[rank] = metrics.scaled_error(got, want, float(want_full.abs().max()))
        how = ("the kit summed it over the group, as the framework would"
               if owner == "framework" else
               "declared gradient='target': the target must complete it itself")
        _expect(ctx, f"{_where(pc)}: ∂L/∂{name}", errors, how)


@declare(
    "parallel.world_size",
    statement="the gathered forward does not depend on the world size (half the ranks vs all)",
    requires=(*SHARDED, TWO_RANKS, RANKS_START), tolerance=rules.SELF_CONSISTENCY,
    examples=_examples, setup=harness.setup_run, explore=False, shrink=False)
def check_world_size(ctx: Context, case: Case) -> None:
    """The gathered forward on half the ranks equals the gathered forward on all of them."""
    pc = _case(ctx, case)
    world = _run(ctx).world_size
    half = list(range(max(1, world // 2)))
    full = _gathered(ctx, pc, "output", range(world))
    part = _gathered(ctx, pc, "half_output", half)
    if full is None or part is None:
        raise PropertyFailure(f"case {pc.index}: a rank has no output")
    _expect(ctx, f"{_where(pc)}: forward on {len(half)} vs {world} ranks",
            {-1: metrics.scaled_error(part, full)})


@declare(
    "parallel.subgroups",
    statement="on a group not starting at rank 0, the sharded forward and ∂L/∂X are the "
              "unsharded ones",
    requires=(*SHARDED, TWO_RANKS, RANKS_START), tolerance=rules.SELF_CONSISTENCY,
    examples=_examples, setup=harness.setup_run, explore=False, shrink=False)
def check_subgroups(ctx: Context, case: Case) -> None:
    """On the upper ranks alone (a group that does not start at rank 0: ranks 2–3 of 4,
    rank 1 of 2), each rank's chunk of the forward and of ``∂L/∂X``, by its rank in that
    group, equals the unsharded one: an impl that picks its chunk by the global rank or
    world size is right on ranks ``[0, k)`` and wrong here."""
    pc = _case(ctx, case)
    upper = upper_ranks(_run(ctx).world_size)
    where = _where(pc)
    for rank in upper:
        error = _record(ctx, pc, rank).get("subgroup_error")
        if error is not None:
            raise PropertyFailure(
                f"{where}, rank {rank}: on the group of ranks {upper} the sharded impl raised "
                f"{error} (its chunk picked by the global rank or world size instead of "
                "dist.get_rank(group) / dist.get_world_size(group)?)")
    unsharded = _run(ctx).unsharded[pc.index]
    for key, want, what in (("subgroup_output", unsharded.output, "forward"),
                            ("subgroup_input_grad", unsharded.input_grad, "∂L/∂X")):
        if want is None:
            raise PropertyFailure(f"{where}: the unsharded forward gave the input no gradient")
        chunks = _chunks(want, pc, len(upper))
        errors = {}
        for local, rank in enumerate(upper):
            got = _record(ctx, pc, rank).get(key)
            errors[rank] = math.inf if got is None else metrics.scaled_error(
                got, chunks[local], float(want.abs().max()) if want.numel() else 0.0)
        _expect(ctx, f"{where}: {what} on the group of ranks {upper} vs unsharded", errors,
                "each rank's chunk by its rank in the group")
