"""Steering an impl's parameters until its reported H_res reaches a target matrix (damped
Gauss–Newton on the trainable parameters), for the properties that ask whether a construction
reaches a vertex of the Birkhoff polytope: a construction's own parameters steered to
``0.9·P + 0.1·H̄₀`` (:func:`check_spanned_vertices`), and Sinkhorn–Knopp's logits steered to
``c·P`` (:func:`check_sinkhorn_vertices`). The property is
``constraints.h_res_vertices``. Also the one-step relative perturbation of every parameter
``θ₀ ± s·(1 + |θ₀|)⊙ε`` (:func:`perturb_relative`) that ``constraints.h_post_span`` drives the
post logits to saturation with."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import torch

from hcspec.conformance import metrics, rules, strategies
from hcspec.conformance.machinery import precision
from hcspec.conformance.machinery.base import Context, NotApplicable, f64
from hcspec.conformance.machinery.building import all_parameters
from hcspec.conformance.machinery.common import flat_jacobian, subtract_flat_step
from hcspec.conformance.machinery.sinkhorn_variant import declared, target_logits
from hcspec.conformance.protocol import HyperConnectionImpl, has_logits
from hcspec.conformance.salts import Salt
from hcspec.conformance.strategies import Case
from hcspec.formulas import mhc

VERTEX_STEPS = 40
"""Damped Gauss–Newton steps per target (each at most :data:`VERTEX_STEP` in every
parameter: an undamped least-norm step saturates a softmax or σ, whose gradient then
vanishes)."""
VERTEX_STEP = 1.0


Read = Callable[[HyperConnectionImpl, torch.Tensor], torch.Tensor]
"""What a steering moves: the impl and the state -> a tensor (differentiable w.r.t. the
parameters) whose entries are driven to a target."""


def reported_h_res(ctx: Context) -> Read:
    return lambda impl, x: ctx.observe.weights(impl, x)[2]


def steer_damped(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor,
                 target: torch.Tensor, tol: float, read: Read | None = None,
                 steps: int = VERTEX_STEPS, step_cap: float = VERTEX_STEP) -> float:
    """Move the impl's trainable parameters by damped Gauss–Newton steps (least-norm, each
    clipped to ``step_cap`` per entry, at most ``steps``) until ``read(impl, x)`` (default:
    the reported H_res at every token) is ``target`` (broadcast to it) within ``tol``;
    returns the remaining max deviation (``inf`` when no parameter reaches it)."""
    read = reported_h_res(ctx) if read is None else read
    params = [p for p in all_parameters(impl) if isinstance(p, torch.Tensor)
              and p.is_floating_point() and p.requires_grad]
    want = target.to(device=x.device, dtype=x.dtype)
    deviation = math.inf
    for _ in range(steps):
        with torch.enable_grad():
            residual = (read(impl, x) - want).flatten()
            deviation = float(residual.detach().abs().max())
            if deviation <= tol or not params:
                break
            jacobian = flat_jacobian(residual, params)
        if not bool(jacobian.abs().max() > 0):
            break
        step = torch.linalg.pinv(jacobian) @ f64(residual)
        step = step * min(1.0, step_cap / max(float(step.abs().max()), 1e-300))
        subtract_flat_step(params, step)
    return deviation


VERTEX_SHARE = 0.9
"""The steering targets ``0.9·P + 0.1·H̄₀`` (``H̄₀`` the token mean of the target's H_res at
init, a point of its own range): next to each vertex P of the Birkhoff polytope, positive where
H̄₀ is (a Sinkhorn–Knopp projection reaches it exactly), and, for mHC-lite, a softmax
combination with finite logits exactly when P is in its set."""
VERTEX_GAP = 0.05
"""A target missed by more than this after steering, while others were reached, is out of the
construction's range: a combination without P has ``Σ_i H[i, P(i)] ≤ n − 2`` (two rows at
least disagree), the target ``0.9·n + 0.1``."""


def check_spanned_vertices(ctx: Context, case: Case) -> None:
    """``constraints.h_res_vertices`` for a construction that claims to span the Birkhoff
    polytope through its own parameters (mHC-lite's permutation weights): for each permutation
    P steer the parameters (:func:`steer_damped`) until the reported H_res is
    ``0.9·P + 0.1·H̄₀`` at every token.

    Called for n ≥ 2 (the property answers n = 1 itself).

    Raises:
        NotApplicable: no target could be steered to (the parameters do not steer H_res).
        PropertyFailure: some targets were reached and another stays more than
            :data:`VERTEX_GAP` away (a permutation set that misses permutations).
    """
    construction = ctx.conventions.formula.construction
    x = ctx.inputs.state(case)
    n = case.n
    # the law's budget for a target with entries 0 and 1 (exact in every float format, so a
    # zero closed-form error), as law.permutation_mixing steers to, ten-fold per stream
    steer = ctx.record.allowance(rules.LAW, oracle=precision.oracle(ctx, lambda: 0.0))
    tol = 10.0 * n * steer.allowance
    left: dict[tuple[int, ...], float] = {}
    with torch.no_grad():  # the mean H_res at init: in the construction's own range
        start = f64(ctx.observe.weights(ctx.build.make(case), x)[2]).reshape(-1, n, n).mean(0)
    for p in itertools.permutations(range(n)):
        P = torch.zeros(n, n, dtype=torch.float64)
        P[torch.arange(n), torch.tensor(p)] = 1.0
        target = VERTEX_SHARE * P + (1.0 - VERTEX_SHARE) * start
        left[p] = steer_damped(ctx, ctx.build.make(case), x, target, tol)
    reached = [p for p, v in left.items() if v <= tol]
    missed = {p: v for p, v in left.items() if v > VERTEX_GAP}
    if not reached:
        raise NotApplicable(f"no permutation target could be steered to (closest "
                            f"{min(left.values()):.3g} away): the parameters do not steer H_res")
    ctx.record.require(
        not missed,
        f"H_res reaches {len(reached)} of the {len(left)} targets 0.9·P + 0.1·H̄₀ but not "
        + ", ".join(f"P = {p} ({v:.3g} away)" for p, v in missed.items())
        + f" (declared construction {construction!r}: it should span the Birkhoff polytope)",
        hint="known bug class: a permutation set that misses permutations (duplicated "
             "entries) — doubly stochastic exactly, but not every vertex is reachable")
    ctx.record.expect(f"max deviation from 0.9·P + 0.1·H̄₀ after steering, over the {len(left)} "
                      "permutations", max(left.values()), factor=10.0 * n)


VERTEX_LOGIT = 6.0
"""The logit scale ``c`` a Sinkhorn–Knopp target is steered to: logits ``c·P``. Then
``exp(c·P) = (e^c − 1)·P + J`` has every row and column sum ``e^c + n − 1``, so each
normalisation of every start (exp, softmax) divides by one constant: the paper's variant is at
its fixed point ``(e^c·P + J − P)/(e^c + n − 1)`` after its first normalisation, whatever the
rounds, ``β(c) = (n − 1)/(e^c + n − 1)`` from ``P`` in every entry (c = 6: 0.005 at n = 3,
0.017 at n = 8) — the bound a target's H_res must approach ``P`` within. A declared eps moves
the fixed point; the kit computes it with the declared formula."""
LOGIT_TOL = 1e-6
"""The largest ``|H̃_res − c·P|`` (relative to ``c``) a steering may leave: the logits are
affine in the bias, so a least-norm Gauss–Newton step lands on them to rounding."""
LOGIT_STEPS = 8
VERTEX_SAMPLE = 120
"""At most this many permutations are steered to per case (all n! up to n = 5; above, the
identity, the reversal, the n cyclic shifts and the rest drawn from the case's seed: 8! =
40320 steerings of n² Jacobian rows each would take hours)."""


def vertex_sample(n: int, seed: int) -> list[tuple[int, ...]]:
    """The permutations of ``n`` streams :func:`check_sinkhorn_vertices` steers to: all when
    ``n! ≤`` :data:`VERTEX_SAMPLE`, else the identity, the reversal, every cyclic shift and
    random ones from ``seed`` up to that many (distinct)."""
    if math.factorial(n) <= VERTEX_SAMPLE:
        return list(itertools.permutations(range(n)))
    chosen = dict.fromkeys([tuple(range(n)), tuple(range(n - 1, -1, -1)),
                            *(tuple((i + k) % n for i in range(n)) for k in range(1, n))])
    gen = torch.Generator().manual_seed(seed)
    while len(chosen) < VERTEX_SAMPLE:
        chosen.setdefault(tuple(int(i) for i in torch.randperm(n, generator=gen)))
    return list(chosen)


def check_sinkhorn_vertices(ctx: Context, case: Case) -> None:
    """``constraints.h_res_vertices`` for a declared Sinkhorn–Knopp ``H_res``: for each
    permutation P the kit steers the target's logits at the first token to ``c·P``
    (:data:`VERTEX_LOGIT`; Gauss–Newton on ``logits(x)``, which the parameters reach linearly
    through the bias) and compares the reported H_res there with the declared formula at the
    logits reached (float64): within the law's budget, so H_res is within ``β(c)`` (the
    fixed point's distance, :data:`VERTEX_LOGIT`) of the vertex. A construction that cannot
    come near a vertex (logits clamped, a flat softmax, rows only) fails there.

    Raises:
        NotApplicable: the target offers no ``logits(x)`` (steering H_res itself through
            Sinkhorn–Knopp converges too slowly for a verdict: the reference mHC at n = 3 left
            2 of 6 targets 0.06–0.08 away after 40 damped steps), or no permutation's logits
            could be reached (the parameters do not steer them).
        PropertyFailure: some logits were reached and others not, or H_res at the reached
            logits is not the declared formula's (not near the vertex).
    """
    probe = ctx.build.make(case)
    if not has_logits(probe):
        raise NotApplicable(
            "H_res is declared Sinkhorn–Knopp and the target offers no logits(x): steering "
            "H_res itself through Sinkhorn–Knopp converges too slowly for a verdict (the "
            "reference mHC at n = 3 left 2 of 6 targets 0.06–0.08 away after "
            f"{VERTEX_STEPS} damped steps); with logits the kit steers them to c·P")
    f = declared(ctx)
    x = ctx.inputs.state(case)
    n, c = case.n, VERTEX_LOGIT

    def first_logits(impl: HyperConnectionImpl, state: torch.Tensor) -> torch.Tensor:
        return target_logits(impl, state, f)[2][0, 0]

    def first_h_res(impl: HyperConnectionImpl, state: torch.Tensor) -> torch.Tensor:
        return f64(ctx.observe.weights(impl, state)[2][0, 0])

    worst: tuple[float, str, dict[str, Any]] = (-1.0, "", {})
    unreached: dict[tuple[int, ...], float] = {}
    perms = vertex_sample(n, case.seed)
    for p in perms:
        P = torch.zeros(n, n, dtype=torch.float64)
        P[torch.arange(n), torch.tensor(p)] = 1.0
        impl = ctx.build.make(case)
        left = steer_damped(ctx, impl, x, c * P, LOGIT_TOL * c, read=first_logits,
                            steps=LOGIT_STEPS, step_cap=4.0 * c)
        if not left <= LOGIT_TOL * c:
            unreached[p] = left
            continue
        with torch.no_grad():
            reached = f64(first_logits(impl, x))
            got = first_h_res(impl, x)
        want = mhc.h_res(f, reached)
        vertex = torch.zeros_like(want)  # the permutation matrix F(c·P) approaches
        vertex[torch.arange(n), want.argmax(dim=-1)] = 1.0
        beta = float((mhc.h_res(f, c * P) - vertex).abs().max())
        compute = ctx.conventions.compute_dtype or ctx.dtype
        at_precision = functools.partial(metrics.scaled_error, mhc.h_res(
            f, reached.to(compute)).to(ctx.precision.output), want)
        given: dict[str, Any] = {"factor": 10.0 * n,
                                 "oracle": precision.oracle(ctx, at_precision)}
        err = metrics.scaled_error(got, want)
        tol = ctx.record.allowance(**given).allowance
        if err / max(tol, 1e-300) > worst[0]:
            worst = (err / max(tol, 1e-300), (
                f"P = {p}: H_res {float((got - vertex).abs().max()):.3g} from its vertex, the "
                f"declared formula's fixed point at {c:g}·P β = {beta:.3g}, logits reached "
                f"within {left:.2g}"), {**given, "_err": err})
    if len(unreached) == len(perms):
        raise NotApplicable("no permutation's logits c·P could be steered to (closest "
                            f"{min(unreached.values()):.3g} away): the parameters do not "
                            "steer the logits")
    ctx.record.require(not unreached, "the logits reach c·P for some permutations but not "
                       + ", ".join(f"P = {p} ({v:.3g} away)" for p, v in unreached.items()))
    given = dict(worst[2])
    err = float(given.pop("_err"))
    ctx.record.expect(f"H_res at logits {c:g}·P (first token) vs the declared formula there, "
                      f"worst of {len(perms)} permutations", err, detail=worst[1],
                      **given)


def perturb_relative(impl: HyperConnectionImpl, case: Case, salt: Salt, direction: int,
                     sign: float) -> None:
    """``θ ← θ₀ + sign · case.param_scale · (1 + |θ₀|) ⊙ ε`` for every floating parameter of
    ``impl``, in place (under ``torch.no_grad``), with ``ε ~ N(0, case.perturb²)`` drawn from
    ``(case.seed, salt.at(direction, i))`` for the ``i``-th parameter (a two-axis salt block:
direction, parameter). The step is
    relative to the init, so no init can outweigh it. Parameters keep their dtype and device.
    Raises nothing of its own."""
    with torch.no_grad():
        for i, p in enumerate(all_parameters(impl)):
            if not isinstance(p, torch.Tensor) or not p.is_floating_point():
                continue
            eps = strategies.gaussian(p.shape, case.seed, salt.at(direction, i),
                                      torch.float64, std=case.perturb)
            init = p.detach().to(device="cpu", dtype=torch.float64)
            step = sign * case.param_scale * (1.0 + init.abs()) * eps
            p.add_(step.to(device=p.device, dtype=p.dtype))
