"""The declared Sinkhorn–Knopp variant as the kit computes it, and its backward: the shared
machinery of the variant family and of the finite-difference checks (gradients, stack) that
name an undeclared implicit Sinkhorn backward as a failure's cause.

:class:`Variant` applies a variant in float64 with the kit's formulas; :func:`kit_gradients`
is its unrolled and fixed-point VJP; :func:`implicit_gradient_cause` is the diagnosis the
gradient checks attach; :data:`UNROLLED` the requirement of checks that compare with finite
differences of the truncated forward.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from hcspec.conformance import metrics, rules, salts, sinkhorn_formulas, strategies
from hcspec.conformance.properties.base import Context, f64
from hcspec.conformance.properties.cases import Case
from hcspec.conformance.properties.common import axis_sums
from hcspec.conformance.properties.errors import PropertyFailure
from hcspec.conformance.properties.requirements import Requirement
from hcspec.conformance.protocol import (
    LOGITS,
    WEIGHTS,
    Conventions,
    HyperConnectionImpl,
    Weights,
    has_logits,
)


@dataclass(frozen=True)
class Variant:
    """One Sinkhorn–Knopp variant (the fields of :func:`sinkhorn_formulas.sinkhorn_variant`) and
    whether the result is transposed."""

    start: str
    count: str
    exact_axis: str
    additive_eps: float
    denominator_eps: float
    iterations: int
    transposed: bool = False
    logits_transposed: bool = False

    @classmethod
    def declared(cls, c: Conventions) -> Variant:
        """The variant ``c`` declares."""
        return cls(c.sinkhorn_variant, c.sinkhorn_iterations_count, c.sinkhorn_exact_axis,
                   c.sinkhorn_additive_eps, c.sinkhorn_denominator_eps, c.iterations)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """``H_res`` of this variant at ``logits [..., n, n]`` (float64)."""
        source = logits.transpose(-1, -2) if self.logits_transposed else logits
        H = sinkhorn_formulas.sinkhorn_variant(
            source, self.iterations, start=self.start,  # type: ignore[arg-type]
            count=self.count, exact_axis=self.exact_axis,  # type: ignore[arg-type]
            additive_eps=self.additive_eps, denominator_eps=self.denominator_eps)
        return H.transpose(-1, -2) if self.transposed else H

    def describe(self) -> str:
        """In words, e.g. ``exp-first, 20 rounds (rows exact), no eps``."""
        first = {"exp": "exp-first", "softmax": "softmax-first", "sigmoid": "sigmoid-first"}
        counted = {"rounds": "rounds", "rounds_from_softmax": "rounds from the softmax",
                   "normalisations": "normalisations"}
        eps = ("no eps" if self.additive_eps == 0 and self.denominator_eps == 0 else
               f"eps {self.additive_eps:g} added, {self.denominator_eps:g} in the denominators")
        text = (f"{first[self.start]}, {self.iterations} {counted[self.count]} "
                f"({self.exact_axis} exact), {eps}")
        text += ", applied to H̃ᵀ" if self.logits_transposed else ""
        return text + (", transposed (Hᵀ)" if self.transposed else "")

    def differences(self, declared: Variant) -> str:
        """What differs from ``declared``, in the words of a report."""
        parts = []
        if self.start != declared.start:
            parts.append(f"the {self.start}-first variant, not the declared {declared.start}-first")
        if self.iterations != declared.iterations or not self._same_count(declared):
            parts.append(f"{self.iterations} {self.count}, not the declared "
                         f"{declared.iterations} {declared.count}")
        if self.exact_axis != declared.exact_axis:
            parts.append(f"{self.exact_axis} normalised last, not the declared "
                         f"{declared.exact_axis}")
        if (self.additive_eps, self.denominator_eps) != (declared.additive_eps,
                                                         declared.denominator_eps):
            parts.append(f"eps {self.additive_eps:g} added / {self.denominator_eps:g} in the "
                         f"denominators, not the declared {declared.additive_eps:g} / "
                         f"{declared.denominator_eps:g}")
        if self.transposed != declared.transposed:
            parts.append("Hᵀ (the transpose of the declared variant's H_res: orientation)")
        if self.logits_transposed != declared.logits_transposed:
            parts.append("the declared variant applied to H̃ᵀ (the logits read in the other "
                         "orientation)")
        return "; ".join(parts)

    def _same_count(self, declared: Variant) -> bool:
        """The same counting, where a softmax start counted from the softmax is the natural
        reading of a declared count of rounds."""
        return self.count == declared.count or (
            self.start == "softmax" != declared.start and self.count == "rounds_from_softmax"
            and declared.count == "rounds")

    def distance(self, declared: Variant) -> int:
        """How many of the fields differ from ``declared`` (the diagnosis prefers the
        explanation with the fewest)."""
        differing = [f.name for f in dataclasses.fields(self) if f.name != "count"
                     and getattr(self, f.name) != getattr(declared, f.name)]
        return len(differing) + (0 if self._same_count(declared) else 1)


def target_logits(impl: HyperConnectionImpl, x: torch.Tensor) -> Weights:
    """``impl.logits(x)``, checked for shapes ``[B,T,n]``, ``[B,T,n]``, ``[B,T,n,n]``.

    Raises:
        PropertyFailure: no ``logits`` or a result of another form.
    """
    if not has_logits(impl):
        raise PropertyFailure("the impl has no logits(x), although the run's first impl "
                              "offered it")
    got: object = impl.logits(x)
    batch, tokens, n, _ = x.shape
    shapes = ((batch, tokens, n), (batch, tokens, n), (batch, tokens, n, n))
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(
            isinstance(t, torch.Tensor) and tuple(t.shape) == s
            for t, s in zip(got, shapes, strict=True))):
        raise PropertyFailure("logits(x) must return (H̃_pre [B,T,n], H̃_post [B,T,n], "
                              "H̃_res [B,T,n,n]) tensors")
    return (got[0], got[1], got[2])


FIXED_POINT_FACTOR = 10.0
"""The declared-implicit tolerance: law + this × n × (column error) / (1 − σ₂(H)²)."""


def start_log(logits: torch.Tensor, v: Variant) -> torch.Tensor:
    """``log M⁰`` of the variant (the fixed-point gradient is taken w.r.t. it)."""
    axis = sinkhorn_formulas.softmax_axis(v.count, v.exact_axis, v.iterations)  # type: ignore[arg-type]
    return torch.log(sinkhorn_formulas.positive_start(logits, v.start, axis,  # type: ignore[arg-type]
                                             v.additive_eps))


def kit_gradients(logits: torch.Tensor, G: torch.Tensor, v: Variant,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(unrolled, fixed-point, H)``: the VJPs of ``⟨G, H_res⟩`` w.r.t. ``H̃_res`` in float64
    — autograd through the declared truncated forward, and implicit differentiation at its
    result chained through ``log M⁰`` — and the forward's ``H``."""
    L = logits.detach().clone().requires_grad_(True)
    H = v.apply(L)
    (unrolled,) = torch.autograd.grad((H * G).sum(), L)
    L2 = logits.detach().clone().requires_grad_(True)
    log_start = start_log(L2, v)
    Hd = H.detach()
    (implicit,) = torch.autograd.grad(log_start, L2,
                                      grad_outputs=sinkhorn_formulas.fixed_point_vjp(Hd, G))
    return unrolled, implicit, Hd


def fixed_point_tolerance(ctx: Context, H: torch.Tensor, exact_axis: str) -> float:
    """``law + FIXED_POINT_FACTOR · n · e / (1 − σ₂²)``: ``e`` the largest sum error along
    the axis not normalised last (the forward's measured convergence), ``σ₂`` the largest
    second singular value of ``H`` (the conditioning of the fixed-point system; an implicit
    backward evaluated at another point within ``e`` of the fixed point differs by O(e)
    divided by the spectral gap)."""
    _, other = axis_sums(H, exact_axis)
    e = float((other - 1).abs().max())
    sigma = torch.linalg.svdvals(H)
    second = float(sigma[..., 1].max()) if H.shape[-1] > 1 else 0.0
    gap = max(1.0 - second * second, 1e-12)
    return rules.SINKHORN_FIXED_POINT.apply(
        ctx.precision,
        conditioning=FIXED_POINT_FACTOR * H.shape[-1] * e / gap).allowance


def gradient_errors(ctx: Context, case: Case) -> tuple[float, float, float, str]:
    """``(error against the unrolled gradient, error against the fixed-point gradient, the
    fixed-point tolerance, the declared rounds in words)`` of the target's
    ``∂⟨G, H_res(x)⟩/∂x`` at the case."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case).requires_grad_(True)
    res = target_logits(impl, x)[2]
    H = ctx.observe.weights(impl, x)[2]
    G = strategies.gaussian(tuple(H.shape), case.seed, salts.SINKHORN_UPSTREAM.at(),
                            torch.float64, "cpu")
    if not res.requires_grad:
        raise PropertyFailure("logits(x) is not differentiable w.r.t. x (the capability "
                              "promises it): the kit cannot chain its Sinkhorn gradient")
    if not H.requires_grad:
        raise PropertyFailure(
            "weights(x) carries no autograd graph: its H_res does not require grad although "
            "logits(x) does, so ∂⟨G, H_res⟩/∂x is zero (the weights capability promises "
            "weights differentiable w.r.t. x)",
            hint="weights(x) detached or computed under no_grad, or the Sinkhorn gradient "
                 "stopped (H_res computed from detached logits)?")
    (target,) = torch.autograd.grad((H * G.to(H)).sum(), x, retain_graph=True,
                                    allow_unused=True)
    target = torch.zeros_like(x) if target is None else target
    v = Variant.declared(ctx.conventions)
    unrolled_k, implicit_k, H64 = kit_gradients(f64(res), G, v)
    unrolled, implicit = (torch.autograd.grad(res, x, grad_outputs=k.to(res), retain_graph=True)[0]
                          for k in (unrolled_k, implicit_k))
    return (metrics.scaled_error(target, unrolled), metrics.scaled_error(target, implicit),
            fixed_point_tolerance(ctx, H64, v.exact_axis), f"{v.iterations} {v.count}")


UNROLLED = Requirement(
    "sinkhorn_gradient unrolled",
    "compares with finite differences of the truncated forward; the impl declares "
    "sinkhorn_gradient='implicit' (the gradient of the Sinkhorn limit, checked by "
    "variant.sinkhorn_gradient)",
    lambda s: s.conventions.sinkhorn_gradient == "unrolled")
"""For the finite-difference checks: the Sinkhorn backward is declared to be the truncated
forward's."""


def implicit_gradient_cause(ctx: Context, case: Case) -> str | None:
    """Why a gradient check failed, when the cause is an undeclared implicit Sinkhorn backward:
    the target's ``∂⟨G, H_res⟩/∂x`` misses the truncated forward's gradient and matches the
    fixed-point gradient the kit computes. None when the target cannot show it (not mHC, no
    ``logits`` or ``weights``) or the cause is another; never raises."""
    if not (ctx.kind == "mhc" and LOGITS in ctx.capabilities and WEIGHTS in ctx.capabilities
            and ctx.conventions.sinkhorn_gradient == "unrolled"):
        return None
    try:
        errors = gradient_errors(ctx, case)
    except Exception:  # a diagnosis only: the failing check's own message stands
        return None
    err_unrolled, err_implicit, fixed_tol, rounds = errors
    if (err_unrolled <= rules.SINKHORN_FIXED_POINT.apply(ctx.precision).allowance
            or not err_implicit <= fixed_tol):
        return None
    return (f"the Sinkhorn backward is the implicit (fixed-point) gradient of the limit (error "
            f"{err_implicit:.3g} against the kit's), not the gradient of the truncated {rounds} "
            f"forward (error {err_unrolled:.3g}); declare sinkhorn_gradient='implicit' if "
            "intended (variant.sinkhorn_gradient)")
