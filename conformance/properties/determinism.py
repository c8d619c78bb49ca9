"""Determinism family: repeated forwards *and backwards* of the same input in eval mode are
bitwise equal — or, when the impl declares ``Conventions.deterministic = False``, the report
states their run-to-run spread.

``state.deterministic_eval`` compares two forwards; a backward that accumulates with atomics
(``index_add``/``scatter_add`` on CUDA, split-K reductions whose order depends on scheduling)
gives other gradients on every run while the forward stays bitwise equal, which makes training
runs impossible to reproduce and bisect. Only the standard explicit examples with n ≥ 3 run
(no exploration), each :data:`REPEATS` times.
"""

from __future__ import annotations

import torch

from hcspec.conformance import salts, strategies, tolerances
from hcspec.conformance.properties.base import Context, f64, floating_parameters
from hcspec.conformance.properties.cases import Cases
from hcspec.conformance.properties.declaration import declare
from hcspec.conformance.protocol import HyperConnectionImpl, has_train_eval
from hcspec.conformance.strategies import SMOOTH_BRANCHES, Case

BASE = ("shape.output",)
REPEATS = 3
"""Forward + backward passes compared per case."""


def _pass(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, upstream: torch.Tensor,
          case: Case) -> list[tuple[str, torch.Tensor]]:
    """One forward and backward of ``L = ⟨G', X'⟩``: ``[("X'", out), ("∂L/∂x", …),
    ("∂L/∂θ_i", …)]``, detached."""
    params = floating_parameters(impl, trainable=True)
    leaf = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out = ctx.observe.forward(impl, leaf, ctx.inputs.branch(case, record=False))
        grads = torch.autograd.grad((out * upstream).sum(), [leaf, *params], allow_unused=True)
    named = [("X'", out.detach()), ("∂L/∂x", grads[0])]
    named += [(f"∂L/∂(parameter {i})", g) for i, g in enumerate(grads[1:])]
    return [(name, g.detach()) for name, g in named if g is not None]


@declare(
    "determinism.forward_backward",
    statement="repeated eval-mode forwards and backwards of one input are bitwise equal",
    tolerance="exact", cases=Cases(min_n=3, branches=SMOOTH_BRANCHES),
    prerequisites=BASE, explore=False)
def check_forward_backward(ctx: Context, case: Case) -> None:
    """:data:`REPEATS` forwards and backwards (``L = ⟨G', X'⟩``) of the same x in eval mode
    give bitwise equal outputs and gradients w.r.t. x and every trainable parameter (on CUDA:
    within the device tolerance). Declared non-deterministic: the spread (the largest scaled
    difference between runs) is recorded, and fails only beyond the device tolerance."""
    impl = ctx.build.make(case)
    if has_train_eval(impl):
        impl.eval()
    x = ctx.inputs.state(case)
    upstream = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), x.dtype,
                                   ctx.device)
    runs = [_pass(ctx, impl, x, upstream, case) for _ in range(REPEATS)]
    declared = not ctx.conventions.deterministic
    bitwise = x.device.type == "cpu" and not declared
    tol = tolerances.device(ctx.tol_dtype)
    for k, run in enumerate(runs[1:], start=2):
        for (name, got), (_, first) in zip(run, runs[0], strict=True):
            if bitwise:
                differ = int((got != first).sum()) if got.shape == first.shape else got.numel()
                ctx.record.require(
                    differ == 0,
                    f"eval-mode pass {k} differs from pass 1 in {name}: {differ} of "
                    f"{first.numel()} entries, max |diff| "
                    f"{float((f64(got) - f64(first)).abs().max()):.3g}",
                    hint="atomics or an order-dependent reduction in the backward? declare "
                         "deterministic=False if that is intended")
            else:
                why = ("run-to-run spread (declared deterministic=False)" if declared
                       else "run-to-run spread on CUDA")
                ctx.record.expect(f"{name}, pass {k} vs pass 1: {why}",
                                  tolerances.scaled_error(got, first), tol)
