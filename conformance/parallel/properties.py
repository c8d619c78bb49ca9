"""The ``parallel`` family: each property one self-contained declaration next to its check.

A declaration (:class:`ParallelProperty`) has the id, the statement, the spec theorem (None: the
family checks a sharded run against the unsharded one, not a theorem), the requirements that
decide applicability before anything runs (each with its reason) and the check, a function of
an :class:`Evaluation` (the unsharded results and every rank's results) that raises
:class:`ParallelFailure` naming the rank and the case. The fields are those of the common
catalogue's declarations, so the family can move into the common registry.

Tolerances (:mod:`hcspec.conformance.tolerances`): the sharded run differs from the unsharded
one only in the order of sums (the all-reduced partial sums over d, the branch's gather), so
values and gradients compare by scaled error within :func:`~hcspec.conformance.tolerances.law`
of the working dtype (float64: 2.2e-11); parameters at init must be bitwise equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import torch

from hcspec.conformance import tolerances
from hcspec.conformance.parallel.cases import ParallelCase
from hcspec.conformance.parallel.worker import upper_ranks
from hcspec.reference.sharded import split_axis

FAMILY: Final = "parallel"


class ParallelFailure(AssertionError):
    """A ``parallel`` property does not hold; the message names the rank(s) and the case."""


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


@dataclass(frozen=True)
class Setup:
    """What decides applicability: the declared splits, whether the unsharded impl names its
    parameters, the world size."""

    splits: tuple[str, ...]
    has_parameters: bool
    world_size: int


@dataclass
class Evaluation:
    """The material a check works on.

    Attributes:
        cases: the cases every rank completed. world_size; dtype (the working dtype).
        unsharded: case index -> :class:`Unsharded`.
        ranks: rank -> case index -> that rank's record (see :mod:`.worker`).
        worst: (label, error, tolerance) of the largest error/tolerance ratio seen.
        checked: how many (case, rank) pairs were compared.
    """

    cases: Sequence[ParallelCase]
    world_size: int
    dtype: torch.dtype
    unsharded: dict[int, Unsharded]
    ranks: dict[int, dict[int, dict[str, Any]]]
    worst: tuple[str, float, float] = ("", 0.0, 0.0)
    checked: int = 0

    @property
    def tolerance(self) -> float:
        """:func:`hcspec.conformance.tolerances.law` of the working dtype."""
        return tolerances.law(self.dtype)

    def record(self, case: ParallelCase, rank: int) -> dict[str, Any]:
        """Rank ``rank``'s record of ``case``."""
        return self.ranks[rank][case.index]

    def gathered(self, case: ParallelCase, key: str,
                 ranks: Sequence[int] | None = None) -> torch.Tensor | None:
        """The ranks' ``key`` tensors concatenated along the split axis in rank order (None
        when a rank has none)."""
        parts = [self.record(case, r).get(key) for r in (ranks or range(self.world_size))]
        if any(p is None for p in parts):
            return None
        return torch.cat([p for p in parts if p is not None], dim=split_axis(case.split))

    def expect(self, label: str, errors: dict[int, float], tolerance: float,
               detail: str = "") -> None:
        """Record the per-rank ``errors`` of ``label`` (rank -1: the gathered tensor) and fail
        naming the worst rank and every other rank beyond ``tolerance``.

        Raises:
            ParallelFailure: an error exceeds ``tolerance`` or is NaN.
        """
        self.checked += 1
        for error in errors.values():
            if not self.worst[0] or _ratio((label, error, tolerance)) > _ratio(self.worst):
                self.worst = (label, error, tolerance)
        bad = {r: e for r, e in errors.items() if math.isnan(e) or e > tolerance}
        if not bad:
            return
        worst_rank = max(bad, key=lambda r: math.inf if math.isnan(bad[r]) else bad[r])
        who = "gathered over the ranks" if worst_rank < 0 else f"rank {worst_rank}"
        others = sorted(r for r in bad if r != worst_rank and r >= 0)
        also = f" (also ranks {others})" if others else ""
        extra = f"; {detail}" if detail else ""
        raise ParallelFailure(f"{label}, {who}{also}: error {bad[worst_rank]:.3g} > tolerance "
                              f"{tolerance:.3g}{extra}")


def _ratio(worst: tuple[str, float, float]) -> float:
    _, error, tolerance = worst
    if math.isnan(error):
        return math.inf
    if tolerance == 0:
        return math.inf if error > 0 else 0.0
    return error / tolerance


def _max_abs(got: torch.Tensor, want: torch.Tensor) -> float:
    if got.shape != want.shape:
        return math.inf
    diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
    return float(diff.max()) if diff.numel() else 0.0


def _chunks(full: torch.Tensor, case: ParallelCase, world: int) -> list[torch.Tensor]:
    return list(full.chunk(world, dim=split_axis(case.split)))


def _per_rank(ev: Evaluation, case: ParallelCase, key: str,
              want: torch.Tensor) -> dict[int, float]:
    errors = {}
    for rank, chunk in enumerate(_chunks(want, case, ev.world_size)):
        got = ev.record(case, rank).get(key)
        errors[rank] = math.inf if got is None else tolerances.scaled_error(
            got, chunk, float(want.abs().max()) if want.numel() else 0.0)
    return errors


# --- checks --------------------------------------------------------------------------------------
def check_replicated_init(ev: Evaluation) -> None:
    """Every rank's parameters, as built, are those of the unsharded impl built from the same
    seed: replicated ones equal, sharded ones equal to their declared part (bitwise)."""
    for case in ev.cases:
        full = ev.unsharded[case.index].params_init
        errors: dict[int, float] = {}
        details: dict[int, str] = {}
        for rank in range(ev.world_size):
            init = ev.record(case, rank)["init"]
            missing = sorted(set(full) - set(init))
            unknown = sorted(set(init) - set(full))
            if missing or unknown:
                raise ParallelFailure(
                    f"case {case.index} ({case.describe()}), rank {rank}: parameter_shards() "
                    f"does not map the unsharded parameters one to one (missing {missing}, "
                    f"unknown {unknown})")
            errors[rank] = 0.0
            for name, info in init.items():
                want = full[name] if info["index"] is None else full[name].flatten()[
                    info["index"]]
                error = _max_abs(info["local"], want)
                if error > errors[rank] or math.isnan(error):
                    errors[rank] = error
                    details[rank] = f"{name} ({info['placement']})"
        worst = max(errors, key=lambda r: errors[r])
        ev.expect(f"case {case.index} ({case.describe()}): parameters at init", errors, 0.0,
                  f"worst parameter {details.get(worst, '?')}: every rank must build the "
                  "same parameters from the same seed (a rank-dependent seed or init?)")


def check_forward(ev: Evaluation) -> None:
    """The ranks' outputs, gathered in rank order, equal the unsharded forward."""
    for case in ev.cases:
        want = ev.unsharded[case.index].output
        ev.expect(f"case {case.index} ({case.describe()}): gathered forward vs unsharded",
                  _per_rank(ev, case, "output", want), ev.tolerance, _FORWARD_HINT[case.split])


_FORWARD_HINT: Final[dict[str, str]] = {
    "tokens": "each rank's chunk compared with the same tokens of the unsharded output (the "
              "weights are per token and need no collective: different parameters, or a "
              "branch not given the whole sequence?)",
    "hidden": "each rank's chunk compared with the same columns of the unsharded output (a "
              "reduction over d not all-reduced: the RMS/LayerNorm statistics or a partial "
              "projection?)",
}


def _order(got: torch.Tensor, want: torch.Tensor, case: ParallelCase, world: int,
           tolerance: float) -> str:
    """Which of ``want``'s chunks each chunk of ``got`` equals (a gather-order diagnosis)."""
    if got.shape != want.shape:
        return ""
    mine, theirs = _chunks(got, case, world), _chunks(want, case, world)
    order = []
    for chunk in mine:
        match = [j for j, ref in enumerate(theirs)
                 if tolerances.scaled_error(chunk, ref) <= tolerance]
        order.append(str(match[0]) if match else "?")
    return f"; its chunks are the expected chunks [{', '.join(order)}]"


def check_branch_gathered(ev: Evaluation) -> None:
    """On every rank the branch is called once, on ``x_in`` gathered over the group in rank
    order (the whole sequence under ``tokens``, the whole hidden vector under ``hidden``)."""
    for case in ev.cases:
        want = ev.unsharded[case.index].branch_input
        errors: dict[int, float] = {}
        detail = ""
        for rank in range(ev.world_size):
            inputs = ev.record(case, rank)["branch_inputs"]
            if len(inputs) != 1:
                raise ParallelFailure(f"case {case.index} ({case.describe()}), rank {rank}: "
                                      f"the branch was called {len(inputs)} times, expected once")
            got = inputs[0]
            if got.shape != want.shape:
                raise ParallelFailure(
                    f"case {case.index} ({case.describe()}), rank {rank}: the branch received "
                    f"{list(got.shape)}, expected the gathered {list(want.shape)} (a "
                    "token-mixing sublayer must see the whole sequence)")
            errors[rank] = tolerances.scaled_error(got, want)
            if errors[rank] > ev.tolerance and not detail:
                detail = _order(got, want, case, ev.world_size, ev.tolerance)
        ev.expect(f"case {case.index} ({case.describe()}): branch input vs the unsharded "
                  "x_in", errors, ev.tolerance, "the gathered chunks must be in rank order"
                  + detail)


def check_input_gradients(ev: Evaluation) -> None:
    """The ranks' ``∂L/∂X`` chunks, gathered, equal the unsharded input gradient."""
    for case in ev.cases:
        want = ev.unsharded[case.index].input_grad
        if want is None:
            raise ParallelFailure(f"case {case.index}: the unsharded forward gave the input no "
                                  "gradient")
        ev.expect(f"case {case.index} ({case.describe()}): gathered ∂L/∂X vs unsharded",
                  _per_rank(ev, case, "input_grad", want), ev.tolerance)


def check_parameter_gradients(ev: Evaluation) -> None:
    """After the declared reduction, every rank's parameter gradients equal the unsharded
    ones (replicated: the whole gradient; sharded: its declared part)."""
    for case in ev.cases:
        unsharded = ev.unsharded[case.index]
        for name, full in sorted(unsharded.param_grads.items()):
            want_full = torch.zeros_like(unsharded.params_init[name]) if full is None else full
            errors: dict[int, float] = {}
            owner = ""
            for rank in range(ev.world_size):
                record = ev.record(case, rank)
                info = record["init"][name]
                owner = info["gradient"]
                want = want_full if info["index"] is None else want_full.flatten()[
                    info["index"]]
                got = record["param_grads"].get(name)
                got = torch.zeros_like(want) if got is None else got
                errors[rank] = tolerances.scaled_error(got, want,
                                                       float(want_full.abs().max()))
            how = ("the kit summed it over the group, as the framework would"
                   if owner == "framework" else
                   "declared gradient='target': the target must complete it itself")
            ev.expect(f"case {case.index} ({case.describe()}): ∂L/∂{name}", errors,
                      ev.tolerance, how)


def check_world_size(ev: Evaluation) -> None:
    """The gathered forward on half the ranks equals the gathered forward on all of them."""
    half = list(range(max(1, ev.world_size // 2)))
    for case in ev.cases:
        full = ev.gathered(case, "output")
        part = ev.gathered(case, "half_output", half)
        if full is None or part is None:
            raise ParallelFailure(f"case {case.index}: a rank has no output")
        ev.expect(f"case {case.index} ({case.describe()}): forward on {len(half)} vs "
                  f"{ev.world_size} ranks", {-1: tolerances.scaled_error(part, full)},
                  ev.tolerance)


def check_subgroups(ev: Evaluation) -> None:
    """On the upper ranks alone (a group that does not start at rank 0: ranks 2–3 of 4,
    rank 1 of 2), each rank's chunk of the forward and of ``∂L/∂X``, by its rank in that
    group, equals the unsharded one: an impl that picks its chunk by the global rank or
    world size is right on ranks ``[0, k)`` and wrong here."""
    upper = upper_ranks(ev.world_size)
    for case in ev.cases:
        where = f"case {case.index} ({case.describe()})"
        for rank in upper:
            error = ev.record(case, rank).get("subgroup_error")
            if error is not None:
                raise ParallelFailure(
                    f"{where}, rank {rank}: on the group of ranks {upper} the sharded impl "
                    f"raised {error} (its chunk picked by the global rank or world size "
                    "instead of dist.get_rank(group) / dist.get_world_size(group)?)")
        unsharded = ev.unsharded[case.index]
        for key, want, what in (("subgroup_output", unsharded.output, "forward"),
                                ("subgroup_input_grad", unsharded.input_grad, "∂L/∂X")):
            if want is None:
                raise ParallelFailure(f"{where}: the unsharded forward gave the input no "
                                      "gradient")
            chunks = _chunks(want, case, len(upper))
            errors = {}
            for local, rank in enumerate(upper):
                got = ev.record(case, rank).get(key)
                errors[rank] = math.inf if got is None else tolerances.scaled_error(
                    got, chunks[local], float(want.abs().max()) if want.numel() else 0.0)
            ev.expect(f"{where}: {what} on the group of ranks {upper} vs unsharded", errors,
                      ev.tolerance, "each rank's chunk by its rank in the group")


# --- declarations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Requirement:
    """A condition for a property to apply, with the reason shown when it does not."""

    name: str
    reason: str
    met: Callable[[Setup], bool]


SHARDING_REQUIRED = Requirement(
    "sharding", "the target declares no sharding capability (impl.shard_splits and "
    "impl.shard(split, group); see hcspec.conformance.parallel.protocol)",
    lambda s: bool(s.splits))
NAMED_PARAMETERS = Requirement(
    "named_parameters", "the unsharded impl has no named_parameters(), so its parameters "
    "cannot be matched with the ranks' parameter_shards()", lambda s: s.has_parameters)
TWO_RANKS = Requirement("world_size>=2", "needs at least 2 ranks to compare world sizes",
                        lambda s: s.world_size >= 2)


@dataclass(frozen=True)
class ParallelProperty:
    """One property of the ``parallel`` family (see the module docstring)."""

    id: str
    statement: str
    check: Callable[[Evaluation], None]
    requirements: tuple[Requirement, ...] = (SHARDING_REQUIRED,)
    theorem: str | None = None
    tolerance: str = "scaled error ≤ tolerances.law(dtype)"
    family: str = field(default=FAMILY)

    def unmet(self, setup: Setup) -> str | None:
        """The reason of the first unmet requirement, or None when the property applies."""
        for requirement in self.requirements:
            if not requirement.met(setup):
                return requirement.reason
        return None


PROPERTIES: Final[tuple[ParallelProperty, ...]] = (
    ParallelProperty(
        "parallel.replicated_init",
        "every rank starts from the parameters of the unsharded impl built from the same seed "
        "(replicated ones identical, sharded ones their declared part)",
        check_replicated_init, (SHARDING_REQUIRED, NAMED_PARAMETERS),
        tolerance="bitwise equal"),
    ParallelProperty(
        "parallel.forward",
        "the sharded forward, gathered in rank order, equals the unsharded forward",
        check_forward),
    ParallelProperty(
        "parallel.branch_gathered",
        "the branch is called once per rank, on x_in gathered over the group in rank order "
        "(the whole sequence under the token split)",
        check_branch_gathered),
    ParallelProperty(
        "parallel.input_gradients",
        "the sharded ∂L/∂X, gathered, equals the unsharded input gradient",
        check_input_gradients),
    ParallelProperty(
        "parallel.parameter_gradients",
        "after the declared reduction every rank's parameter gradients equal the unsharded "
        "ones (or their declared part)",
        check_parameter_gradients, (SHARDING_REQUIRED, NAMED_PARAMETERS)),
    ParallelProperty(
        "parallel.world_size",
        "the gathered forward does not depend on the world size (half the ranks vs all)",
        check_world_size, (SHARDING_REQUIRED, TWO_RANKS)),
    ParallelProperty(
        "parallel.subgroups",
        "on a process group that does not start at rank 0 (the upper ranks), the sharded "
        "forward and ∂L/∂X equal the unsharded ones",
        check_subgroups, (SHARDING_REQUIRED, TWO_RANKS)),
)

BY_ID: Final[dict[str, ParallelProperty]] = {p.id: p for p in PROPERTIES}
