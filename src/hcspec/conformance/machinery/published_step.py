"""The published step as the kit computes it: a target's published parameters read in its own
layout (:func:`read`), the reference step on them in float64 (:func:`oracle`,
:func:`step_oracle`) and the law rule's allowance for comparing with it
(:func:`step_allowance`); the ``published.*`` family and ``hc-conformance compare`` share it."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hcspec.conformance import metrics, rules
from hcspec.conformance.machinery import precision
from hcspec.conformance.machinery.base import Context, f64
from hcspec.conformance.machinery.common import branch64
from hcspec.conformance.machinery.errors import PropertyFailure
from hcspec.conformance.protocol import (
    PUBLISHED_PARAMETERS,
    Branch,
    HyperConnectionImpl,
)
from hcspec.conformance.strategies import Case
from hcspec.formulas import published as pub
from hcspec.spec.published import (
    QWEN4_EXP,
    deepseek_v4_checkpoint_key,
)
from hcspec.spec.record import Formula

Params = dict[str, object]


def read(ctx: Context, impl: HyperConnectionImpl) -> Params:
    """``impl.published_parameters()``, checked against the declared layout.

    Raises:
        PropertyFailure: the mapping lacks a tensor or has a wrong shape (named).
    """
    name = ctx.conventions.published
    assert name is not None  # DECLARES
    got = getattr(impl, PUBLISHED_PARAMETERS)()
    if not isinstance(got, Mapping):
        raise PropertyFailure(f"published_parameters() returned {type(got).__name__}, "
                              "expected a mapping from the layout's names to tensors")
    try:
        pub.check_parameters(name, got, impl.n, impl.d)
    except (TypeError, ValueError) as exc:
        raise PropertyFailure(f"published_parameters(): {exc}") from exc
    return dict(got)


def cast_params(params: Params, dtype: torch.dtype, *, leaves: bool = False) -> Params:
    """``params`` with every tensor detached, on the CPU in ``dtype`` (leaves that require
    grad when ``leaves``); settings unchanged."""
    out: Params = {}
    for key, value in params.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().to(device="cpu", dtype=dtype).clone()
            value.requires_grad_(leaves)
        out[key] = value
    return out


def _oracle_branch(ctx: Context, case: Case) -> Branch:
    """The case's branch in float64 after the declared branch input map."""
    branch = branch64(ctx, case)
    return lambda agg: branch(ctx.observe.branch_input(agg))


def oracle(ctx: Context, case: Case, params: Params, x: torch.Tensor,
           formula: Formula | None = None) -> torch.Tensor:
    """The published step of ``params`` at ``x``, float64 on the CPU (``formula``: another
    record of the layout's step, for the diagnosis; None: the published one)."""
    name = ctx.conventions.published
    assert name is not None
    with torch.no_grad():
        return pub.step(name, cast_params(params, torch.float64), f64(x), _oracle_branch(ctx, case),
                        formula)


def scale_of(x: torch.Tensor, want: torch.Tensor) -> float:
    """The scale a step's error is measured against: the larger of ``|x|``'s and ``|want|``'s
    maximum (both read in float64)."""
    return max(float(f64(x).abs().max()), float(want.abs().max()))


def step_oracle(ctx: Context, case: Case, params: Params, x: torch.Tensor, want: torch.Tensor,
                scale: float) -> float | None:
    """The ``oracle`` input of :data:`hcspec.conformance.rules.LAW` for a step comparison:
    None for float32/float64 (the law's budget of the run's effective dtype); below float32,
    the error the published step makes computed in the declared compute dtype and rounded to
    the output dtype (the same-precision floor)."""
    if not precision.low_precision(ctx):
        return None
    name = ctx.conventions.published
    assert name is not None
    compute = ctx.conventions.compute_dtype or ctx.dtype
    if name == QWEN4_EXP:  # an element-wise read: no per-stream weights, the step itself
        branch = ctx.inputs.branch(case, record=False)
        with torch.no_grad():
            stepped = pub.step(name, cast_params(params, compute), f64(x).to(compute),
                               lambda a: branch(a.to(x.dtype)).to(compute))
        return metrics.scaled_error(stepped.to(ctx.precision.output), want, scale)
    with torch.no_grad():
        weights = pub.weights(name, cast_params(params, compute), f64(x).to(compute))
    spec = precision.spec_at_precision(ctx, *weights)
    spec_out = spec.forward(x, ctx.inputs.branch(case, record=False))
    return metrics.scaled_error(spec_out, want, scale)


def step_allowance(ctx: Context, case: Case, params: Params, x: torch.Tensor,
                   want: torch.Tensor, scale: float) -> float:
    """The allowance :data:`hcspec.conformance.rules.LAW` gives a step comparison in the run's
    precision with :func:`step_oracle` (for the diagnosis and ``hc-conformance compare``,
    which judge outside a property's recorder)."""
    return rules.LAW.apply(ctx.precision,
                           oracle=step_oracle(ctx, case, params, x, want, scale)).allowance


def checkpoint_of(sources: list[Params]) -> dict[str, torch.Tensor]:
    """A DeepSeek-V4 checkpoint of the sublayers' layout tensors ``sources[k]`` under the
    published key names (:func:`hcspec.spec.published.deepseek_v4_checkpoint_key`), each
    tensor detached and copied."""
    return {deepseek_v4_checkpoint_key(k, name): value.detach().clone()
            for k, params in enumerate(sources) for name, value in params.items()
            if isinstance(value, torch.Tensor)}
