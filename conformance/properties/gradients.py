"""Gradients family: finite differences vs autograd in float64 (w.r.t. the input and the
exposed parameters), autograd vs the spec's closed-form backward
(:func:`hcspec.spec.numeric.backward`)
on the reported (or, for static HC, probed) weights, and finite gradients at extreme logits.

Loss: ``L = ⟨G', X'⟩`` for a random upstream gradient ``G'``, so ``∂L/∂X'`` = ``G'``.
Closed form (DESIGN.md §1, spec ``backward.closed_form``): ``g_z = G'ᵀ h_post``,
``g_in = Jᵀ g_z``, ``∂L/∂X = H_resᵀ G' + h_pre g_inᵀ`` plus, for input-dependent weights, the
chain through ``weights(x)`` with cotangents ``∂L/∂H_res = G' Xᵀ``, ``∂L/∂h_post = G' z``,
``∂L/∂h_pre = X g_in``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from hcspec.conformance import probes, strategies, tolerances
from hcspec.conformance.properties.base import (
    Context,
    NotApplicable,
    Property,
    PropertyFailure,
    f64,
    np64,
)
from hcspec.conformance.properties.common import (
    branch64,
    law_tol,
    shift,
    standard_examples,
    standard_strategy,
)
from hcspec.conformance.protocol import KINDS, PARAMETERS, WEIGHTS, Branch, HyperConnectionImpl
from hcspec.conformance.strategies import SMOOTH_BRANCHES, Case
from hcspec.spec import numeric

ALL = frozenset(KINDS)
BASE = ("shape.output", "shape.branch_once")
DIRECTIONS = 3


def _need_float64(ctx: Context) -> None:
    if ctx.dtype != torch.float64:
        raise NotApplicable(
            "the gradient checks run in float64 (finite differences, the spec's closed form at "
            f"1e-11); the factory rejected float64 (runs in {ctx.dtype})")


def _loss(impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch,
          G: torch.Tensor) -> torch.Tensor:
    """``⟨G', X'⟩``; fails when the output is not connected to autograd although the input or
    the parameters require grad (e.g. an output rebuilt under ``no_grad``)."""
    given = x.clone()  # as probes.forward_on_copy, kept to recognise it in the output
    out = impl.forward(given, branch)
    loss = (out * G).sum()
    if torch.is_grad_enabled() and not loss.requires_grad:
        returned_input = (isinstance(out, torch.Tensor)
                          and out.data_ptr() == given.data_ptr())
        hint = (" — it returned the very tensor it was given, overwritten in place (see "
                "state.input_unchanged)" if returned_input else "")
        raise PropertyFailure(
            "forward's output is not connected to autograd (requires_grad is False although "
            f"the input or the parameters require grad): no gradient can reach them{hint}")
    return loss


def _magnitude(impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch,
               G: torch.Tensor) -> float:
    """``Σ|G'_i X'_i|``: the size of the terms of ``L`` (its rounding error scales with it)."""
    with torch.no_grad():
        return float((probes.forward_on_copy(impl, x, branch) * G).abs().sum())


def _trainable(impl: HyperConnectionImpl) -> list[torch.Tensor]:
    params = [p for p in impl.parameters()  # type: ignore[attr-defined]
              if isinstance(p, torch.Tensor) and p.is_floating_point() and p.requires_grad]
    if not params:
        raise NotApplicable("no exposed parameter requires grad")
    return params


def _directional(ctx: Context, loss_at: Callable[[float], float], scale: float) -> float:
    """Central difference of ``t ↦ loss_at(t)`` at 0 with :func:`tolerances.fd_step`; for an
    impl computing in float32 (or coarser) inside, Richardson-extrapolated from steps h and h/2
    (truncation O(h⁴), so a step large enough to rise above float32 rounding stays accurate)."""
    h = tolerances.fd_step(ctx.tol_dtype, scale)
    central = (loss_at(h) - loss_at(-h)) / (2 * h)
    if not tolerances.fd_richardson(ctx.tol_dtype):
        return central
    half = (loss_at(h / 2) - loss_at(-h / 2)) / h
    return (4 * half - central) / 3


def check_fd_input(ctx: Context, case: Case) -> None:
    """Directional central differences of ⟨G', X'⟩ w.r.t. x match autograd (float64)."""
    _need_float64(ctx)
    impl = ctx.make(case)
    x = ctx.state(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    xg = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(_loss(impl, xg, fn, G), xg)
    ctx.require(grad is not None and bool(torch.isfinite(grad).all()),
                "autograd gradient w.r.t. x is missing or non-finite")
    cancellation = tolerances.fd_cancellation(ctx.tol_dtype, _magnitude(impl, x, fn, G))
    for k in range(DIRECTIONS):
        v = ctx.tangent(strategies.gaussian(x.shape, case.seed, 40 + k, ctx.dtype, ctx.device))

        def loss_at(t: float, v: torch.Tensor = v) -> float:
            with torch.no_grad():
                return float(_loss(impl, x + t * v, fn, G))

        fd = _directional(ctx, loss_at, case.scale)
        ad = float((grad * v).sum())
        denominator = tolerances.fd_denominator(ctx.tol_dtype, ad, case.scale)
        ctx.expect("directional derivative w.r.t. x: finite differences vs autograd",
                   abs(fd - ad) / denominator,
                   tolerances.fd_directional(ctx.tol_dtype) + cancellation / denominator,
                   f"fd {fd:.6g}, autograd {ad:.6g}")


def check_fd_parameters(ctx: Context, case: Case) -> None:
    """Directional central differences of ⟨G', X'⟩ w.r.t. the exposed parameters match
    autograd (float64)."""
    _need_float64(ctx)
    impl = ctx.make(case)
    params = _trainable(impl)
    x = ctx.state(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, fn, G), params, allow_unused=True)
    grads = tuple(torch.zeros_like(p) if g is None else g for p, g in zip(params, grads,
                                                                          strict=True))
    saved = [p.detach().clone() for p in params]
    cancellation = tolerances.fd_cancellation(ctx.tol_dtype, _magnitude(impl, x, fn, G))
    try:
        for k in range(DIRECTIONS):
            vs = [strategies.gaussian(p.shape, case.seed, 60 + 7 * k + i, p.dtype, str(p.device))
                  for i, p in enumerate(params)]

            def loss_at(t: float, vs: list[torch.Tensor] = vs) -> float:
                with torch.no_grad():
                    for p, s, v in zip(params, saved, vs, strict=True):
                        p.copy_(s + t * v)
                    return float(_loss(impl, x, fn, G))

            fd = _directional(ctx, loss_at, 1.0)
            ad = float(sum((g * v).sum() for g, v in zip(grads, vs, strict=True)))
            denominator = tolerances.fd_denominator(ctx.tol_dtype, ad, case.scale)
            ctx.expect("directional derivative w.r.t. the parameters: finite differences vs "
                       "autograd", abs(fd - ad) / denominator,
                       tolerances.fd_directional(ctx.tol_dtype) + cancellation / denominator,
                       f"fd {fd:.6g}, autograd {ad:.6g}")
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)


def _closed_form(ctx: Context, case: Case, X: torch.Tensor, G: torch.Tensor,
                 h_pre: torch.Tensor, h_post: torch.Tensor,
                 H_res: torch.Tensor) -> numeric.ConnectionGrads:
    x_in = torch.from_numpy(numeric.aggregate(np64(X), np64(h_pre))).requires_grad_(True)
    z = branch64(ctx, case)(ctx.branch_input(x_in))
    g_z = torch.from_numpy(numeric.branch_cotangent(np64(G), np64(h_post)))
    (g_in,) = torch.autograd.grad(z, x_in, grad_outputs=g_z)  # Jᵀ g_z (norm included)
    return numeric.backward(np64(G), np64(X), np64(h_pre), np64(h_post), np64(H_res),
                            np64(z), np64(g_in))


def check_closed_form(ctx: Context, case: Case) -> None:
    """Autograd's ∂L/∂x (and ∂L/∂θ) equal the spec's closed form on weights(x), chained
    through weights(x) for input-dependent weights."""
    _need_float64(ctx)
    impl = ctx.make(case)
    x = ctx.state(case).requires_grad_(True)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    weights = ctx.weights(impl, x)
    h_pre, h_post, H_res = (f64(w) for w in weights)
    spec = _closed_form(ctx, case, f64(x), f64(G), h_pre, h_post, H_res)
    cotangents = tuple(torch.from_numpy(g).to(device=x.device, dtype=x.dtype)
                       for g in (spec.h_pre, spec.h_post, spec.H_res))
    params = ([p for p in impl.parameters()  # type: ignore[attr-defined]
               if isinstance(p, torch.Tensor) and p.is_floating_point() and p.requires_grad]
              if PARAMETERS in ctx.capabilities else [])
    live = [(w, c) for w, c in zip(weights, cotangents, strict=True) if w.requires_grad]
    chained_x = torch.zeros_like(x)
    chained_p = [torch.zeros_like(p) for p in params]
    if live:
        got = torch.autograd.grad([w for w, _ in live], [x, *params],
                                  grad_outputs=[c for _, c in live], allow_unused=True)
        chained_x = got[0] if got[0] is not None else chained_x
        chained_p = [torch.zeros_like(p) if g is None else g
                     for p, g in zip(params, got[1:], strict=True)]
    want_x = torch.from_numpy(spec.X) + f64(chained_x)
    auto = torch.autograd.grad(_loss(impl, x, fn, G), [x, *params], allow_unused=True)
    auto_x = auto[0] if auto[0] is not None else torch.zeros_like(x)
    tol = law_tol(ctx)
    ctx.expect("∂L/∂x: autograd vs H_resᵀG' + h_pre g_inᵀ (+ chain through weights(x))"
               + (" projected on replicated states" if ctx.replicated else ""),
               tolerances.scaled_error(ctx.tangent(f64(auto_x)), ctx.tangent(want_x)), tol)
    for i, (p, g) in enumerate(zip(params, auto[1:], strict=True)):
        got_p = torch.zeros_like(p) if g is None else g
        ctx.expect(f"∂L/∂(parameter {i}, shape {list(p.shape)}): autograd vs the closed form "
                   "chained through weights(x)",
                   tolerances.scaled_error(got_p, chained_p[i]), tol)


def check_closed_form_probed(ctx: Context, case: Case) -> None:
    """Static HC (weights independent of x): autograd's ∂L/∂x equals the spec's closed form
    ``H_resᵀ G' + h_pre g_inᵀ`` on the probed weights."""
    _need_float64(ctx)
    impl = ctx.make(case)
    x = ctx.state(case)
    probed = ctx.probe(impl, x, case)
    if probed.h_pre is None:
        raise NotApplicable("h_pre is not identifiable by probing under the declared "
                            f"branch input {ctx.conventions.branch_input!r}")
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    spec = _closed_form(ctx, case, f64(x), f64(G), probed.h_pre, probed.h_post, probed.H_res)
    xg = x.clone().requires_grad_(True)
    (auto_x,) = torch.autograd.grad(_loss(impl, xg, fn, G), xg)
    ctx.expect("∂L/∂x: autograd vs H_resᵀG' + h_pre g_inᵀ (probed weights)",
               tolerances.scaled_error(auto_x, torch.from_numpy(spec.X)), law_tol(ctx))


def check_finite_extreme(ctx: Context, case: Case) -> None:
    """With the parameters scaled ×1e2–×1e4, the gradients w.r.t. x and the parameters are
    finite (e.g. through Sinkhorn–Knopp at huge logits)."""
    impl = ctx.make(case)
    params = _trainable(impl)
    x = ctx.state(case).requires_grad_(True)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, fn, G), [x, *params], allow_unused=True)
    bad = [("x" if i == 0 else f"parameter {i - 1}") for i, g in enumerate(grads)
           if g is not None and not bool(torch.isfinite(g).all())]
    ctx.require(not bad, f"non-finite gradient w.r.t. {', '.join(bad)} with parameters "
                f"×{case.param_scale:g}")


TRAINABLE_RELATIVE = 1e-6
"""Smallest ‖∂L/∂θ‖ / (‖G'‖·‖X‖) accepted for ``L = ⟨G', H_res X⟩``. The reference gives
≥ 1e-3 at init (mHC: α = 0.01 scales the φ part, b_res still moves H_res at O(0.1)); a mixing
that ignores its parameters gives exactly 0, a saturated Sinkhorn–Knopp exp(−Δ) with Δ in the
hundreds — both below 1e-100."""


def check_mixing_trainable(ctx: Context, case: Case) -> None:
    """With F ≡ 0 (``X' = H_res X``) and n ≥ 2, ``L = ⟨G', X'⟩`` has a non-zero gradient
    w.r.t. the parameters: H_res can leave its init (public bug report #9: a temperature/init whose
    gradient is exactly zero, so H_res stays the identity; report #1: H_res unused)."""
    if ctx.replicated:
        raise NotApplicable("on replicated states X = 1_n hᵀ a row-stochastic H_res gives "
                            "H_res X = X whatever its parameters; the impl declares "
                            "state_domain='replicated'")
    impl = ctx.make(case)
    params = _trainable(impl)
    x = ctx.state(case)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)
    zero = strategies.make_branch("zero", case.d, ctx.dtype, ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, zero, G), params, allow_unused=True)
    norm = float(torch.sqrt(sum((f64(g).pow(2).sum() for g in grads if g is not None),
                                torch.zeros((), dtype=torch.float64))))
    scale = float(f64(G).norm() * f64(x).norm())
    relative = norm / scale if scale > 0 else 0.0
    ctx.expect("1e-6 / (‖∂⟨G', H_res X⟩/∂θ‖ / (‖G'‖‖X‖)) with F ≡ 0 (≤ 1: trainable)",
               TRAINABLE_RELATIVE / relative if relative > 0 else math.inf, 1.0,
               f"the gradient reaching the parameters through the mixing is {norm:.3g} "
               f"(relative {relative:.3g}): H_res cannot move from where it is (saturated "
               "Sinkhorn–Knopp? H_res not used in forward?)")


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx) + standard_examples(ctx, branch="linear")[1:3]


def _trainable_examples(ctx: Context) -> list[Case]:
    # n ≥ 2: at n = 1 mHC's H_res is [1] for any parameters (spec mhc.n1_residual)
    return standard_examples(ctx, d_more_than_n=False, min_n=2)


def _trainable_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, min_n=2, perturbations=(0.0, 0.1, 0.3), extreme_scales=False)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, branches=SMOOTH_BRANCHES, extreme_scales=False)


def _extreme_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 4, 8, seed=0, perturb=1.0, param_scale=1e4),
                       Case(2, 2, 2, 5, seed=1, perturb=0.3, param_scale=1e2)])


def _extreme_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, branches=SMOOTH_BRANCHES, perturbations=(0.3, 1.0),
                             param_scales=(1e2, 1e4))


PROPERTIES = [
    Property("gradients.fd_input", "gradients",
             "finite differences of ⟨G', X'⟩ w.r.t. x match autograd (float64)",
             "backward.closed_form", frozenset(), ALL, check_fd_input, _examples, _strategy,
             prerequisites=BASE),
    Property("gradients.fd_parameters", "gradients",
             "finite differences of ⟨G', X'⟩ w.r.t. the parameters match autograd (float64)",
             "backward.closed_form", frozenset({PARAMETERS}), ALL, check_fd_parameters,
             _examples, _strategy, prerequisites=BASE),
    Property("gradients.closed_form", "gradients",
             "autograd ∂L/∂x, ∂L/∂θ equal the spec's closed-form backward on weights(x)",
             "backward.closed_form", frozenset({WEIGHTS}), ALL, check_closed_form, _examples,
             _strategy, prerequisites=(*BASE, "law.reported")),
    Property("gradients.closed_form_probed", "gradients",
             "static HC: autograd ∂L/∂x equals H_resᵀG' + h_pre g_inᵀ on probed weights",
             "backward.closed_form", frozenset(), frozenset({"hc-static"}),
             check_closed_form_probed, _examples, _strategy, prerequisites=(*BASE, "law.probed")),
    Property("gradients.mixing_trainable", "gradients",
             "with F ≡ 0, ⟨G', H_res X⟩ has a non-zero gradient w.r.t. the parameters",
             None, frozenset({PARAMETERS}), ALL, check_mixing_trainable,
             _trainable_examples, _trainable_strategy, prerequisites=BASE),
    Property("gradients.finite_extreme", "gradients",
             "gradients stay finite with the parameters scaled ×1e2–×1e4",
             None, frozenset({PARAMETERS}), ALL, check_finite_extreme, _extreme_examples,
             _extreme_strategy, prerequisites=BASE),
]
