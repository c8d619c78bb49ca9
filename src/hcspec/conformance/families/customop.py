"""Custom-op family (optional): the checks PyTorch's custom-op tooling offers, for a target
that registers ``torch.library`` custom ops and says which (capability ``custom_ops``:
``impl.custom_ops(x)`` returns the ``(op, args, kwargs)`` calls its forward makes on the state
``x``). Not applicable, with the reason, to a target that offers none.

* ``customop.opcheck`` — ``torch.library.opcheck`` on every call: the schema matches what the
  op does (no undeclared mutation or aliasing), the fake-tensor / meta kernel gives the real
  output's shapes, dtypes and strides, the autograd registration is complete, and the op
  traces through AOTAutograd (``aot_dispatch_dynamic``).
* ``customop.export`` — ``torch.export.export`` of the step ``x ↦ forward(x, F)`` (a fixed
  linear branch) captures the custom ops and the exported program gives eager's output.

* ``customop.double_backward`` — where the target declares ``double_backward=True``:
  ``torch.autograd.gradgradcheck`` in float64 of the step ``x ↦ forward(x, F)`` (its custom
  ops' backward formulas must themselves be differentiable).
* ``customop.vmap`` — where the target declares ``vmap=True``: ``torch.vmap`` of
  ``torch.func.functional_call(impl, params, (x, F))`` over a batch of parameter sets (the
  impl's own, perturbed) gives, for each set, that set's own forward.
"""

from __future__ import annotations

from typing import Any

import torch

from hcspec.conformance.author import (
    CUSTOM_OPS,
    Case,
    Cases,
    Context,
    PropertyFailure,
    Requirement,
    capability,
    declare,
    f64,
    float64,
    metrics,
    rules,
    shift,
)

OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")
"""The ``torch.library.opcheck`` tests run on each call."""


def _examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 4, 8, layer_index=1, seed=1, perturb=0.3)])


def _calls(ctx: Context, impl: Any, x: torch.Tensor) -> list[tuple[Any, tuple[Any, ...],
                                                                    dict[str, Any]]]:
    """``impl.custom_ops(x)`` checked for its form.

    Raises:
        PropertyFailure: not a non-empty sequence of ``(op, args, kwargs)``.
    """
    got = impl.custom_ops(x)
    calls = list(got) if isinstance(got, (list, tuple)) else None
    if not calls or not all(isinstance(c, (list, tuple)) and len(c) == 3
                            and isinstance(c[1], (list, tuple)) and isinstance(c[2], dict)
                            for c in calls):
        raise PropertyFailure("custom_ops(x) must return a non-empty sequence of (op, args, "
                              f"kwargs) calls, got {type(got).__name__}")
    return [(op, tuple(args), dict(kwargs)) for op, args, kwargs in calls]


def _name(op: Any) -> str:
    return str(getattr(op, "_qualname", None) or getattr(op, "__name__", None) or op)


@declare(
    "customop.opcheck",
    statement="torch.library.opcheck passes on each custom op that forward calls",
    requires=(capability(CUSTOM_OPS),), tolerance=rules.EXACT, examples=_examples,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=("shape.output",), explore=False, shrink=False)
def check_opcheck(ctx: Context, case: Case) -> None:
    """``torch.library.opcheck(op, args, kwargs)`` with :data:`OPCHECK_UTILS` on every call
    ``impl.custom_ops(x)`` names; the first test that fails is the failure, naming the op."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    for op, args, kwargs in _calls(ctx, impl, x):
        try:
            torch.library.opcheck(op, args, kwargs, test_utils=OPCHECK_UTILS)
        except Exception as exc:  # OpCheckError, or the op itself raising
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PropertyFailure(
                f"torch.library.opcheck failed for {_name(op)}: {first[:400]}",
                hint="the op's registration does not match what it does: check its schema "
                     "(mutated or aliased arguments), its fake kernel (register_fake: the "
                     "real output's shape, dtype and strides) and its autograd formula "
                     "(register_autograd)") from exc


class _Step(torch.nn.Module):
    """``x ↦ impl.forward(x, F)`` with a fixed linear branch ``F(z) = z Wᵀ``, for export."""

    def __init__(self, impl: Any, weight: torch.Tensor) -> None:
        super().__init__()
        self.impl = impl
        self.weight = torch.nn.Parameter(weight, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.impl.forward(x, lambda z: z @ self.weight.T)
        return out


@declare(
    "customop.export",
    statement="torch.export captures forward with its custom ops; the exported program gives "
              "eager's output",
    requires=(capability(CUSTOM_OPS),), tolerance=rules.SELF_CONSISTENCY, examples=_examples,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=("shape.output",), explore=False, shrink=False)
def check_export(ctx: Context, case: Case) -> None:
    """``torch.export.export(step, (x,))`` succeeds, its graph calls every custom op that
    ``custom_ops`` names, and the exported program's output equals eager's within the
    self-consistency allowance."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    names = {_name(op).split("::")[-1].split(".")[0] for op, _, _ in _calls(ctx, impl, x)}
    generator = torch.Generator().manual_seed(case.seed)
    weight = (torch.randn(case.d, case.d, generator=generator, dtype=torch.float64)
              / case.d ** 0.5).to(dtype=x.dtype, device=x.device)
    step = _Step(impl, weight)
    with torch.no_grad():
        eager = step(x.clone())
        try:
            exported = torch.export.export(step, (x.clone(),))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PropertyFailure(f"torch.export.export(forward) failed: "
                                  f"{type(exc).__name__}: {first[:400]}") from exc
        out = exported.module()(x.clone())
    graph = str(exported.graph)
    missing = sorted(n for n in names if n not in graph)
    ctx.record.require(not missing, f"the exported graph does not call the custom op(s) "
                                    f"{', '.join(missing)} that custom_ops(x) names: forward "
                                    "bypasses them, or export decomposed them")
    ctx.record.expect("exported forward vs eager", metrics.scaled_error(f64(out), f64(eager)))


DOUBLE_BACKWARD = Requirement(
    "declared double_backward",
    "the target does not declare double_backward=True (a backward that is itself "
    "differentiable)",
    lambda s: s.conventions.double_backward)
"""The target claims second-order gradients."""


@declare(
    "customop.double_backward",
    statement="where declared, double backward through forward matches finite differences "
              "(gradgradcheck)",
    requires=(DOUBLE_BACKWARD, float64("gradgradcheck compares in float64")),
    tolerance=rules.EXACT, examples=lambda ctx: shift(ctx, [Case(1, 2, 3, 4, seed=1,
                                                                  perturb=0.3)]),
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=("shape.output",), explore=False, shrink=False)
def check_double_backward(ctx: Context, case: Case) -> None:
    """``torch.autograd.gradgradcheck(x ↦ forward(x, F), x)`` in float64 with a fixed linear
    branch (its own tolerances: ``atol`` 1e-5, ``rtol`` 1e-3, torch's defaults); a failure
    or an error in the second backward is the failure."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case).detach().clone().requires_grad_(True)
    generator = torch.Generator().manual_seed(case.seed)
    weight = (torch.randn(case.d, case.d, generator=generator, dtype=torch.float64)
              / case.d ** 0.5).to(device=x.device)

    def step(t: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = impl.forward(t, lambda z: z @ weight.T)
        return out

    try:
        ok = torch.autograd.gradgradcheck(step, (x,), raise_exception=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PropertyFailure(
            f"torch.autograd.gradgradcheck of forward failed: {type(exc).__name__}: "
            f"{first[:400]}",
            hint="the declared double backward does not hold: a backward formula "
                 "(register_autograd, autograd.Function.backward) that detaches, or calls "
                 "an op without a derivative of its own") from exc
    ctx.record.require(ok, "torch.autograd.gradgradcheck of forward returned False")


VMAP = Requirement(
    "declared vmap",
    "the target does not declare vmap=True (forward vmapped over a batch of parameter sets)",
    lambda s: s.conventions.vmap)
"""The target claims its forward can be vmapped over parameter sets."""

PARAMETER_SETS = 3
"""How many parameter sets ``customop.vmap`` batches."""


@declare(
    "customop.vmap",
    statement="where declared, torch.vmap over parameter sets gives each set's own forward",
    requires=(VMAP, capability("parameters")), tolerance=rules.SELF_CONSISTENCY,
    examples=_examples, cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=("shape.output",), explore=False, shrink=False)
def check_vmap(ctx: Context, case: Case) -> None:
    """The impl's named parameters, in :data:`PARAMETER_SETS` perturbed copies, stacked;
    ``torch.vmap`` of ``functional_call(impl, params, (x, F))`` over them (a fixed linear
    branch, ``x`` shared) equals, set by set, ``functional_call`` with that set alone."""
    impl = ctx.build.make(case)
    if not isinstance(impl, torch.nn.Module):
        raise PropertyFailure("vmap=True is declared but the impl is not a torch.nn.Module "
                              "(torch.func.functional_call needs one)")
    x = ctx.inputs.state(case)
    generator = torch.Generator().manual_seed(case.seed)
    weight = (torch.randn(case.d, case.d, generator=generator, dtype=torch.float64)
              / case.d ** 0.5).to(dtype=x.dtype, device=x.device)
    params = {name: p.detach() for name, p in impl.named_parameters()}
    sets = [{name: p + 0.1 * k * torch.randn(p.shape, generator=generator,
                                             dtype=torch.float64).to(p.dtype).to(p.device)
             for name, p in params.items()} for k in range(PARAMETER_SETS)]
    stacked = {name: torch.stack([s[name] for s in sets]) for name in params}

    def one(p: dict[str, torch.Tensor]) -> torch.Tensor:
        out: torch.Tensor = torch.func.functional_call(
            impl, p, (x, lambda z: z @ weight.T))
        return out

    with torch.no_grad():
        try:
            batched = torch.vmap(one)(stacked)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PropertyFailure(
                f"torch.vmap over {PARAMETER_SETS} parameter sets failed: "
                f"{type(exc).__name__}: {first[:400]}",
                hint="a custom op without a vmap rule (register_vmap), or forward code that "
                     "vmap cannot batch (.item(), data-dependent Python control flow, "
                     "in-place writes into an unbatched tensor)") from exc
        single = torch.stack([one(s) for s in sets])
    ctx.record.expect(f"vmap over {PARAMETER_SETS} parameter sets vs each set's forward",
                      metrics.scaled_error(f64(batched), f64(single)))
