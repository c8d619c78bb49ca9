"""The mHC weight reader the families share: ``h_pre, h_post, H_res`` in float64 from the
target's ``weights(x)`` when it offers them, else probed (:meth:`Observer.probe
<hcspec.conformance.machinery.observing.Observer.probe>`)."""

from __future__ import annotations

import torch

from hcspec.conformance import metrics, rules
from hcspec.conformance.machinery.base import Context, NotApplicable, f64
from hcspec.conformance.protocol import HyperConnectionImpl, has_logits, has_weights
from hcspec.conformance.strategies import Case


class MHCWeights:
    """h_pre, h_post, H_res (float64) from ``weights(x)`` when offered, else from probing.

    Attributes:
        probed: True when the impl has no ``weights(x)`` and the weights were probed.
        h_pre: ``[B, T, n]`` float64 on the run's device (None when probing could not read
            it); h_post ``[B, T, n]``, H_res ``[B, T, n, n]``, float64.
        source: ``"probed"`` or ``"reported"``, for the messages.
        res_logits: for a declared ``orthostochastic`` construction and a target with
            ``logits(x)``: its ``H̃_res [B, T, n, n]`` in float64 (what the constraints derive
            the Newton–Schulz defect from); else None.

    Raises (from the constructor):
        PropertyFailure: the reported weights have the wrong form, or probing failed
            (:class:`~hcspec.conformance.machinery.observing.Observer`).
    """

    def __init__(self, ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, case: Case):
        self.probed = not has_weights(impl)
        if self.probed:
            p = ctx.observe.probe(impl, x, case)
            self.h_pre: torch.Tensor | None = p.h_pre
            self.h_post, self.H_res = p.h_post, p.H_res
        else:
            h_pre, h_post, H_res = ctx.observe.weights(impl, x)
            self.h_pre, self.h_post, self.H_res = f64(h_pre), f64(h_post), f64(H_res)
        self.source = "probed" if self.probed else "reported"
        self.res_logits: torch.Tensor | None = None
        if ctx.conventions.formula.construction == "orthostochastic" and has_logits(impl):
            with torch.no_grad():
                res = impl.logits(x.clone())[2]
            if isinstance(res, torch.Tensor) and res.shape == self.H_res.shape:
                self.res_logits = f64(res)


def orthostochastic_defect(ctx: Context, w: MHCWeights) -> tuple[torch.Tensor, list[str]]:
    """For a declared ``orthostochastic`` ``H_res``: the bound on every ``|row sum − 1|`` and
    ``|column sum − 1|`` per token (``[B, T]`` float64) and what it is, per token (flattened):
    the Newton–Schulz factor's orthogonality defect ``‖QQᵀ − I‖₂`` (spec
    ``constructions.orthostochastic_inexact``) for the declared iterations at the target's
    own ``H̃_res`` (:func:`hcspec.conformance.metrics.newton_schulz_defect`), plus the
    rounding of the iterations it amplifies (``amplification·(n + 1)·eps`` of the compute
    dtype); the rules add the rounding of the squares and their sums.

    Raises:
        NotApplicable: the target offers no ``logits(x)``: ``H_res`` alone does not show the
            factor's defect.
    """
    if w.res_logits is None:
        raise NotApplicable(
            "H_res is declared orthostochastic: its sums miss 1 by up to ‖QQᵀ − I‖₂ of the "
            "Newton–Schulz factor Q (constructions.orthostochastic_inexact), which H_res alone "
            "does not show, and the target offers no logits(x) to derive it from")
    iterations = ctx.conventions.formula.newton_schulz_iterations
    defect, amplification = metrics.newton_schulz_defect(w.res_logits, iterations)
    n = w.H_res.shape[-1]
    bound = defect + amplification * (n + 1) * rules.eps(ctx.precision.compute)
    why = [f"Newton–Schulz defect ‖QQᵀ − I‖₂ = {d:.3g} after {iterations} iterations at the "
           f"target's H̃_res (+ its rounding, ×{a:.3g})"
           for d, a in zip(defect.flatten().tolist(), amplification.flatten().tolist(),
                           strict=True)]
    return bound, why


def eps_exact_axis(ctx: Context, w: MHCWeights, sums: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For a declared Sinkhorn–Knopp denominator eps δ: ``(error [B, T], previous [B, T])``
    of the exact axis, the error ``max |sum − (1 − δ)|`` per token (the declared formula's
    fixed point, :func:`hcspec.conformance.rules.sinkhorn_eps_center`; ``sums [B, T, n]``)
    and the Birkhoff–Hopf bound one normalisation earlier (the rule's ``previous`` input,
    ``inf`` where Δ is infinite); None without a declared δ (the sums are compared with 1)."""
    f = ctx.conventions.formula
    delta = rules.sinkhorn_eps_center(ctx.precision)
    if delta <= 0.0 or f.construction != "sinkhorn":
        return None
    error = (sums - (1.0 - delta)).abs().amax(dim=-1)
    previous = metrics.birkhoff_hopf_convergence(w.H_res, f.sinkhorn.effective_iterations,
                                                 earlier=1)
    return error, previous.reshape(error.shape)


def worst_eps_token(ctx: Context, w: MHCWeights, n: int, error: torch.Tensor,
                    previous: torch.Tensor) -> int:
    """The flattened token index with the largest ``error`` ÷ its exact-axis allowance at its
    ``previous`` bound (:func:`eps_exact_axis`)."""
    allowed = torch.tensor([rules.exact_axis_allowance(ctx.precision, n, w.probed, c).allowance
                            for c in previous.flatten().tolist()], dtype=torch.float64)
    return int(torch.argmax(error.flatten() / allowed))
