"""Depth family: a stack of L sublayers of the target, each fed the previous one's output
(layer indices 0 … L − 1, fresh or perturbed parameters, a zero or a random branch).

mHC (mHC arXiv:2512.24880 §4.1): a product of doubly stochastic matrices is doubly stochastic
(spec ``ds.product_closure``), so with F ≡ 0 the stack preserves the stream sum
(``ds.stream_sum_preserved``) and is non-expansive per feature (``ds.nonexpansive``) at any
depth; with a branch, each sublayer adds at most ``‖h_post‖₂ ‖z‖`` to the norm. The kit checks
both against bounds accumulated over the layers from the reported ``H_res`` of each layer: the
sum along the exactly normalised axis within :func:`rules.exact_axis` (plus a declared
denominator ε), the other axis within the Birkhoff–Hopf bound for the declared rounds — what
the constraints family allows per layer, composed. HC has no such bound: the family reports
the growth ``‖X_L‖ / ‖X_0‖`` (zero and random branch) without failing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from hcspec.conformance.author import (
    WEIGHTS,
    Case,
    CheckedBranch,
    Context,
    Inconclusive,
    PropertyFailure,
    any_state_domain,
    capability,
    declare,
    f64,
    kinds,
    rules,
    shift,
    strategies,
)
from hcspec.conformance.machinery.layer_bounds import Layer, mhc_bounds

BASE = ("shape.output", "shape.branch_once")
DEPTH = 16
"""Sublayers in a stack under ``quick`` and ``ci`` (layer indices 0 … 15: beyond the 0 … 7 the
other families draw); :func:`depth` doubles it under ``thorough``."""
DEPTH_DOMAIN = any_state_domain(
    "a stack feeds each sublayer the previous output, which is not stream-replicated")


def depth(ctx: Context) -> int:
    """The stack's depth: the profile's ``stack_depth`` (:data:`DEPTH`, twice that under
    ``thorough``)."""
    return ctx.profile.stack_depth


def _examples(ctx: Context) -> list[Case]:
    """Zero and MLP branch, at init and perturbed; the first two under ``quick``."""
    cases = [Case(2, 3, 4, 8, seed=0, perturb=0.0, branch="zero"),
             Case(2, 3, 4, 8, seed=1, perturb=0.3, branch="mlp"),
             Case(1, 2, 3, 7, seed=2, perturb=1.0, branch="zero"),
             Case(1, 2, 2, 5, seed=3, perturb=0.3, branch="mlp")]
    return shift(ctx, cases[:2] if ctx.profile.trimmed_examples else cases)


def _recording(fn: Callable[[torch.Tensor], torch.Tensor],
               outputs: list[torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    def branch(t: torch.Tensor) -> torch.Tensor:
        z = fn(t)
        outputs.append(f64(z))
        return z

    return branch


def run_stack(ctx: Context, case: Case, layers: int, *, weights: bool,
              unbounded: bool = False) -> list[Layer]:
    """Run ``layers`` sublayers (layer index ``l``, seed ``case.seed + l``, perturbed as the
    case says) one after the other from the case's state, with the case's branch.
    ``unbounded``: the stack's growth is not a bug (HC), so an output that leaves the output
    dtype's range *because the state grew* is no evidence (:func:`_overflow_expected`).

    Raises:
        PropertyFailure: a sublayer's output is non-finite (the message names the layer).
        Inconclusive: ``unbounded`` and that output was expected to leave the range.
    """
    x = ctx.inputs.state(case)
    stack: list[Layer] = []
    for layer in range(layers):
        at = dataclasses.replace(case, layer_index=layer, seed=case.seed + layer)
        impl = ctx.build.make(at)
        outputs: list[torch.Tensor] = []
        fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=at.seed)
        branch = CheckedBranch(_recording(fn, outputs), case.d, record=False)
        w = None
        if weights:
            with torch.no_grad():
                w = tuple(f64(t) for t in ctx.observe.weights(impl, x))
        with torch.no_grad():
            out = ctx.observe.forward(impl, x, branch)
        if not bool(torch.isfinite(out).all()):
            expected = _overflow_expected(ctx, stack, x) if unbounded else None
            if expected is not None:
                raise Inconclusive(f"the output of sublayer {layer} of the stack is non-finite: "
                                   f"{expected}")
            raise PropertyFailure(f"the output of sublayer {layer} of the stack is non-finite")
        z = outputs[0] if outputs else torch.zeros(case.batch, case.tokens, case.d,
                                                   dtype=torch.float64)
        stack.append(Layer(f64(x), f64(out), z, w))  # type: ignore[arg-type]
        # The next sublayer reads the state in the kit's working dtype (an impl may return a
        # declared coarser output_dtype; the kit's branch runs in the working dtype).
        x = out.detach().to(ctx.dtype)
    return stack


OVERFLOW_HEADROOM = 4.0
"""How far past the largest per-sublayer gain seen so far a sublayer may still grow the state:
HC's gains vary from sublayer to sublayer (perturbed, input-dependent weights), so the next one
may exceed the ones before; overflow below ``max |X| × gain / 4`` is still a failure."""


def _overflow_expected(ctx: Context, stack: list[Layer], x: torch.Tensor) -> str | None:
    """Why a non-finite output of the sublayer after ``stack`` (its input ``x``) is what a
    correct impl of the run's output dtype returns, or None: the largest gain per sublayer seen
    so far (max |X'| / max |X|, at least 1), applied to this input with
    :data:`OVERFLOW_HEADROOM`, reaches the output dtype's largest finite value. Overflow at the
    first sublayer, or far below the range, is never expected."""
    if not stack:
        return None
    gain = max(1.0, *(float(layer.out.abs().max()) / max(float(layer.X.abs().max()), 1e-300)
                      for layer in stack))
    peak = float(f64(x).abs().max())
    limit = float(torch.finfo(ctx.precision.output).max)
    if peak * gain * OVERFLOW_HEADROOM < limit:
        return None
    return (f"its input reaches max |X| = {peak:.3g} and the sublayers so far grew the state by "
            f"up to ×{gain:.3g} each, past {ctx.precision.output}'s largest value {limit:.3g} "
            f"(× {OVERFLOW_HEADROOM:g} headroom): HC's growth is not bounded, so overflow here "
            "shows no bug")


@declare(
    "depth.mhc_bounded",
    statement="a stack of 16 sublayers (32 under thorough) keeps the stream sum and the "
              "DS-product norm bound",
    theorems=("ds.product_closure", "ds.stream_sum_preserved", "ds.nonexpansive"),
    requires=(kinds("mhc"), capability(WEIGHTS), DEPTH_DOMAIN), tolerance=rules.DEPTH_BOUND,
    examples=_examples, explore=False, prerequisites=BASE)
def check_mhc_bounded(ctx: Context, case: Case) -> None:
    """Over a stack of :func:`depth` sublayers: ``1ᵀX_L = 1ᵀX_0 + Σ_l (1ᵀh_post,l) z_l``
    within the accumulated column allowance, and ``‖X_L,k‖ ≤`` the accumulated norm bound
    (:func:`mhc_bounds`; with F ≡ 0: ``‖X_L,k‖ ≤ ‖X_0,k‖`` up to the allowances)."""
    stack = run_stack(ctx, case, depth(ctx), weights=True)
    record_growth(ctx, case, stack)
    first, last = stack[0], stack[-1]
    injected = sum((layer.weights[1].sum(dim=-1)[..., None] * layer.z  # type: ignore[index]
                    for layer in stack), torch.zeros_like(first.X[..., 0, :]))
    drift_bound, norm_bound = mhc_bounds(ctx, stack)
    drift = (last.out.sum(dim=-2) - first.X.sum(dim=-2) - injected).abs()
    ratio = drift / drift_bound
    worst = int(torch.argmax(ratio.flatten()))
    layers = len(stack)
    ctx.record.expect(f"|1ᵀX_L − 1ᵀX_0 − Σ(1ᵀh_post)z| after {layers} sublayers",
                      float(drift.flatten()[worst]), detail=_growth_text(stack),
                      bound=float(drift_bound.flatten()[worst]))
    excess = (last.out.norm(dim=-2) - norm_bound).flatten()
    worst = int(torch.argmax(excess))
    ctx.record.expect(f"‖X_L,k‖₂ beyond the doubly stochastic bound after {layers} sublayers",
                      max(0.0, float(excess[worst])), detail=_growth_text(stack), bound=0.0)


GROWTH = "‖X_l‖ / ‖X_0‖ after sublayer l"
"""The quantity of the curves the depth family records (the HTML report plots them)."""


def record_growth(ctx: Context, case: Case, stack: list[Layer]) -> None:
    """Record the stack's state norm relative to its input after each sublayer, l = 0 … L
    (1 at l = 0), as one curve of :data:`GROWTH` named after the case (branch, n, d,
    perturbation, seed): the report's depth plot. A zero input state gives the absolute
    norms instead (nothing to divide by)."""
    start = float(stack[0].X.norm()) or 1.0
    values = [float(stack[0].X.norm()) / start] + [float(layer.out.norm()) / start
                                                   for layer in stack]
    label = (f"{case.branch} branch, n={case.n}, d={case.d}, perturb {case.perturb:g}, "
             f"seed {case.seed}")
    ctx.record.curve(GROWTH, label, values)


def _growth_text(stack: list[Layer]) -> str:
    """``‖X_l‖ / ‖X_0‖`` at a few depths (the state's RMS growth)."""
    start = float(stack[0].X.norm())
    marks = sorted({0, len(stack) // 4, len(stack) // 2, len(stack) - 1})
    return "state norm / initial: " + ", ".join(
        f"layer {k + 1}: {float(stack[k].out.norm()) / start:.3g}" for k in marks)


@declare(
    "depth.hc_growth",
    statement="HC: a stack of 16 sublayers (32 under thorough) stays finite; its growth is "
              "reported, not bounded",
    requires=(kinds("hc-static", "hc-dynamic"), DEPTH_DOMAIN), tolerance=rules.REPORTED,
    examples=_examples, explore=False, prerequisites=BASE)
def check_hc_growth(ctx: Context, case: Case) -> None:
    """A stack of :func:`depth` HC sublayers stays finite; ``‖X_L‖ / ‖X_0‖`` is recorded
    (HC's mixing is not doubly stochastic: growth is not a failure)."""
    stack = run_stack(ctx, case, depth(ctx), weights=False, unbounded=True)
    record_growth(ctx, case, stack)
    growth = float(stack[-1].out.norm()) / float(stack[0].X.norm())
    ctx.record.expect(f"‖X_L‖/‖X_0‖ after {len(stack)} sublayers ({case.branch} branch; "
                      "reported, HC has no bound)", growth, detail=_growth_text(stack),
                      bound=UNBOUNDED)


UNBOUNDED = float(torch.finfo(torch.float64).max)
"""The "tolerance" of a reported, unbounded figure: finite, so the report keeps the largest."""
