"""The Sinkhorn–Knopp other-axis allowance as the constraint checks use it: the convergence term
per token (the Birkhoff–Hopf bound for the declared rounds, or none for a declared exact
construction), the allowance of :data:`hcspec.conformance.rules.SINKHORN_OTHER_AXIS` built on
it, the ceilings above which a bound demonstrates nothing, and the choice of the token a check
compares (mHC arXiv:2512.24880 Eq. 9)."""

from __future__ import annotations

import math
from typing import Any

import torch

from hcspec.conformance import metrics, rules
from hcspec.conformance.machinery.base import Context, Inconclusive
from hcspec.conformance.machinery.common import axis_sums, by_exact_axis
from hcspec.conformance.machinery.mhc_weights import MHCWeights, orthostochastic_defect
from hcspec.conformance.strategies import Case
from hcspec.spec.record import birkhoff_permutations


def summed_terms(ctx: Context, n: int) -> int:
    """The summation length of a declared exact construction (``birkhoff``: its K
    permutations, :func:`hcspec.conformance.rules.summation_allowance`); 0 otherwise."""
    f = ctx.conventions.formula
    return len(birkhoff_permutations(f, n)) if f.construction == "birkhoff" else 0


def other_axis_convergence(ctx: Context, w: MHCWeights) -> tuple[torch.Tensor, list[str]]:
    """The convergence part of the bound on ``|sum − 1|`` along the axis Sinkhorn–Knopp did
    not normalise last, per token (``[B, T]`` float64), and what it is, per token
    (flattened); the rule :data:`hcspec.conformance.rules.SINKHORN_OTHER_AXIS` adds the
    rounding of the run's dtype chain.

    A declared ``residual_mixing="identity"`` has ``H_res = I`` exactly: no convergence term.
    Otherwise it is the Birkhoff–Hopf bound for the declared rounds
    (:func:`hcspec.conformance.rules.sinkhorn_convergence`), which is ``inf`` where an entry
    of H_res is 0 (projective diameter Δ infinite).
    """
    if ctx.conventions.residual_mixing == "identity":
        zero = torch.zeros(w.H_res.shape[:-2], dtype=torch.float64)
        return zero, ["declared residual_mixing='identity': H_res = I exactly"] * zero.numel()
    if ctx.conventions.formula.construction == "birkhoff":
        zero = torch.zeros(w.H_res.shape[:-2], dtype=torch.float64)
        K = summed_terms(ctx, w.H_res.shape[-1])
        return zero, [f"declared birkhoff: Σ of {K} weighted permutations is doubly stochastic "
                      "exactly (constructions.birkhoff_exact), only its summation rounds"
                      ] * zero.numel()
    if ctx.conventions.formula.construction == "orthostochastic":
        return orthostochastic_defect(ctx, w)
    iterations = ctx.conventions.formula.sinkhorn.effective_iterations
    conv = rules.sinkhorn_convergence(w.H_res, iterations)
    delta = metrics.projective_diameter(w.H_res).flatten().tolist()
    return conv, [f"bound for {iterations} Sinkhorn–Knopp rounds at projective diameter "
                  f"Δ = {d:.3g}" for d in delta]


def other_axis_bound(ctx: Context, w: MHCWeights, n: int, *, mixing: bool = False,
                     norm: bool = False) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """``(allowance [B, T], convergence [B, T], what each is)``: the allowance of
    :data:`hcspec.conformance.rules.SINKHORN_OTHER_AXIS` per token (its convergence term
    from :func:`other_axis_convergence`), for choosing the token a check compares."""
    conv, why = other_axis_convergence(ctx, w)
    allowed = rules.other_axis_allowances(ctx.precision, conv, n, w.probed,
                                          mixing=mixing, norm=norm,
                                          terms=summed_terms(ctx, n), both=both_axes(ctx))
    return allowed, conv, why


def both_axes(ctx: Context) -> bool:
    """Whether the convergence term bounds both axes' sums (an orthostochastic ``H_res``: the
    Newton–Schulz defect moves rows and columns alike), the rule's ``both`` input."""
    return ctx.conventions.formula.construction == "orthostochastic"


def other_axis_given(conv: torch.Tensor, w: MHCWeights, n: int, worst: int,
                      terms: int = 0, **flags: bool) -> dict[str, Any]:
    """The inputs of :data:`hcspec.conformance.rules.SINKHORN_OTHER_AXIS` at token ``worst``
    (``terms``: :func:`summed_terms`, given only when nonzero)."""
    extra: dict[str, Any] = {"terms": terms} if terms else {}
    return {"n": n, "probed": w.probed, "convergence": float(conv.flatten()[worst]), **flags,
            **extra}


def vacuous_ceiling(n: int) -> float:
    """The largest ``|sum − 1|`` along the other axis that any non-negative ``n×n`` matrix
    whose exact axis sums to 1 can have (its other sums lie in ``[0, n]``): a bound at or
    above ``max(n − 1, 1)`` cannot fail, so it demonstrates nothing."""
    return max(n - 1.0, 1.0)


def gain_ceiling(n: int) -> float:
    """The largest norm gain ``‖H x‖₂/‖x‖₂ − 1`` that a non-negative ``n×n`` matrix whose
    exact axis sums to 1 can have (``‖H‖₂ ≤ √(‖H‖₁‖H‖_∞) ≤ √n``, reached by ``H = 1 e_1ᵀ``): an
    allowance at or above ``√n − 1`` (``1`` for ``n = 1``, as :func:`vacuous_ceiling`) cannot
    fail, so it demonstrates nothing."""
    return math.sqrt(n) - 1.0 if n > 1 else 1.0


def worst_demonstrable(err: torch.Tensor, bound: torch.Tensor, what: str,
                        why: list[str], ceiling: float | None = None) -> int:
    """The flattened index of the token with the largest ``err / bound`` among the tokens
    whose bound is finite and below ``ceiling`` (default: none above ``inf``).

    Raises:
        Inconclusive: no token's bound can fail (every H_res has a zero entry, or the logit
            spread makes the Birkhoff–Hopf bound vacuous).
    """
    e, b = err.flatten(), bound.flatten()
    usable = torch.isfinite(b) & (b < (math.inf if ceiling is None else ceiling))
    if not bool(usable.any()):
        worst = int(torch.argmin(b))
        raise Inconclusive(
            f"{what}: no token has a bound that could fail ({why[worst]}: bound "
            f"{float(b[worst]):.3g}; an H_res entry of 0 makes Δ infinite, a large logit "
            "spread makes the bound exceed any possible error), so this case cannot "
            "demonstrate the property")
    ratio = torch.where(b > 0, e / b, torch.where(e > 0, math.inf, 0.0))
    ratio = torch.where(usable, ratio, -1.0)
    return int(torch.argmax(ratio))


def expect_orthostochastic_rows(ctx: Context, case: Case, w: MHCWeights) -> None:
    """``constraints.h_res_exact_axis`` (and ``constraints.extreme_logits``) for a declared
    orthostochastic ``H_res``: the exact-axis sums compared at the worst token of
    ``|sum − 1| / (Newton–Schulz defect + rounding)`` among those whose bound can fail
    (:func:`worst_demonstrable`), through ``ctx.record.expect``.

    Raises:
        Inconclusive: no token's bound can fail (:func:`worst_demonstrable`).
        PropertyFailure: the sum is beyond the defect and the rounding (from the recorder).
    """
    exact_axis = ctx.conventions.formula.sinkhorn.exact_axis
    exact, _ = axis_sums(w.H_res, exact_axis)
    name, _ = by_exact_axis(exact_axis, "row", "column")
    err = (exact - 1).abs().amax(dim=-1)
    defect, why = orthostochastic_defect(ctx, w)
    rounding = ctx.record.allowance(n=case.n, probed=w.probed).allowance
    worst = worst_demonstrable(err, defect + rounding, f"H_res {name} sums", why,
                               vacuous_ceiling(case.n))
    ctx.record.expect(f"max |H_res {name} sum − 1| ({w.source}, orthostochastic)",
                      float(err.flatten()[worst]), n=case.n, probed=w.probed,
                      defect=float(defect.flatten()[worst]), detail=why[worst])
