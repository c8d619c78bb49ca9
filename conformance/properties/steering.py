"""Steering an impl's parameters until its reported H_res reaches a target matrix (damped
Gauss–Newton on the trainable parameters), for the properties that ask whether a construction
reaches a vertex of the Birkhoff polytope."""

from __future__ import annotations

import math

import torch

from hcspec.conformance.properties.base import Context, f64
from hcspec.conformance.properties.building import all_parameters
from hcspec.conformance.properties.common import subtract_flat_step
from hcspec.conformance.protocol import HyperConnectionImpl

VERTEX_STEPS = 40
"""Damped Gauss–Newton steps per target (each at most :data:`VERTEX_STEP` in every
parameter: an undamped least-norm step saturates a softmax or σ, whose gradient then
vanishes)."""


VERTEX_STEP = 1.0


def steer_damped(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor,
                 target: torch.Tensor, tol: float) -> float:
    """Move the impl's trainable parameters by damped Gauss–Newton steps (least-norm, each
    clipped to :data:`VERTEX_STEP` per entry) until its reported H_res at ``x`` is ``target
    [n, n]`` at every token within ``tol``; returns the remaining max deviation (``inf`` when
    no parameter reaches H_res)."""
    params = [p for p in all_parameters(impl) if isinstance(p, torch.Tensor)
              and p.is_floating_point() and p.requires_grad]
    want = target.to(device=x.device, dtype=x.dtype)
    deviation = math.inf
    for _ in range(VERTEX_STEPS):
        with torch.enable_grad():
            residual = (ctx.observe.weights(impl, x)[2] - want).flatten()
            deviation = float(residual.detach().abs().max())
            if deviation <= tol or not params:
                break
            rows = []
            for r in residual:
                grads = torch.autograd.grad(r, params, retain_graph=True, allow_unused=True)
                rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).flatten()
                                       for p, g in zip(params, grads, strict=True)]))
        jacobian = f64(torch.stack(rows))
        if not bool(jacobian.abs().max() > 0):
            break
        step = torch.linalg.pinv(jacobian) @ f64(residual)
        step = step * min(1.0, VERTEX_STEP / max(float(step.abs().max()), 1e-300))
        subtract_flat_step(params, step)
    return deviation
