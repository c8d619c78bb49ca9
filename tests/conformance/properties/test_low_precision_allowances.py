"""Comparisons that the soak found at 256·eps of the output below float32 (2.0 in bfloat16, 5.0
with a factor): a bound no error of a value in [0, 2] can reach passes any bug. Each now has a
measured (or derived) same-precision floor: a correct bfloat16/float16 stand-in passes well
inside it and the stand-in with the bug fails, where before it passed."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
import torch

from hcspec.conformance import tolerances
from hcspec.conformance.properties.base import PropertyFailure
from hcspec.conformance.strategies import Case
from tests.conformance.properties import support
from tests.conformance.properties.precision_standins import (
    RoundedDynamicHC,
    RoundedMHC,
    RoundedStaticHC,
    _rounded,
)
from tests.mutants.weights_unnormalised_state import Unnormalised

Branch = Callable[[torch.Tensor], torch.Tensor]
HERE = "tests.conformance.properties.test_low_precision_allowances"
STANDINS = "tests.conformance.properties.precision_standins"


class N1Doubled(RoundedMHC):
    """At n = 1 the residual is added twice (``H_res = [2]``: no normalisation of a 1×1
    block)."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        out = super().forward(x, branch)
        if x.shape[-2] == 1:
            out = (out.float() + x.float()).to(out.dtype)
        return out


class TanhAggregate(RoundedMHC):
    """The branch receives ``tanh(h_preᵀX)``, not the declared ``x_in = h_preᵀX``."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        return super().forward(x, lambda z: branch(torch.tanh(z)))


class UnnormalisedBF16(RoundedMHC, Unnormalised):
    """:class:`RoundedMHC` whose weights come from the unnormalised state
    (``tests.mutants.weights_unnormalised_state``)."""


class N1NoResidualHC(RoundedStaticHC):
    """Static HC that drops the residual at n = 1 (``X' = F(x)``, not ``x + F(x)``)."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        out = super().forward(x, branch)
        if x.shape[-2] == 1:
            out = (out.float() - x.float()).to(out.dtype)
        return out


class HalfPostInit:
    """Mixin: ``h_post`` at 0.75 of the layer's (the init is ``h_post = 1``, HC Eq. 14);
    the law still holds with the reported weights."""

    def _inner(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xw, h_pre, h_post, H_res = super()._inner(x)  # type: ignore[misc]
        return xw, h_pre, 0.75 * h_post, H_res


class HalfPostStaticHC(HalfPostInit, RoundedStaticHC):
    """:class:`RoundedStaticHC` with :class:`HalfPostInit`."""


class HalfPostDynamicHC(HalfPostInit, RoundedDynamicHC):
    """:class:`RoundedDynamicHC` with :class:`HalfPostInit`."""


class ExpandScaled(RoundedMHC):
    """``expand(h)`` puts ``h / n`` on every stream (a mean-preserving expand), rounded to the
    output."""

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        return (super().expand(h) / self.n).to(self.output)


class ReduceMean(RoundedMHC):
    """``reduce(X)`` averages the streams although the sum is declared."""

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        return (super().reduce(x) / self.n).to(self.output)


make_bf16_expand_scaled = partial(_rounded, output=torch.bfloat16, cls=ExpandScaled)
make_float16_reduce_mean = partial(_rounded, output=torch.float16, cls=ReduceMean)
make_bf16_reduce_mean = partial(_rounded, output=torch.bfloat16, cls=ReduceMean)
make_bf16_n1_no_residual = partial(_rounded, output=torch.bfloat16, cls=N1NoResidualHC)
make_float16_n1_no_residual = partial(_rounded, output=torch.float16, cls=N1NoResidualHC)
make_bf16_static_post_init = partial(_rounded, output=torch.bfloat16, cls=HalfPostStaticHC)
make_float16_dynamic_post_init = partial(_rounded, output=torch.float16,
                                         cls=HalfPostDynamicHC)
make_bf16_hc_detached = partial(_rounded, output=torch.bfloat16, cls=RoundedStaticHC,
                                detached=True)
make_float16_hc_detached = partial(_rounded, output=torch.float16, cls=RoundedStaticHC,
                                   detached=True)
make_bf16_n1_doubled = partial(_rounded, output=torch.bfloat16, cls=N1Doubled)
make_float16_n1_doubled = partial(_rounded, output=torch.float16, cls=N1Doubled)
make_bf16_tanh_aggregate = partial(_rounded, output=torch.bfloat16, cls=TanhAggregate)
make_float16_tanh_aggregate = partial(_rounded, output=torch.float16, cls=TanhAggregate)
make_bf16_unnormalised = partial(_rounded, output=torch.bfloat16, cls=UnnormalisedBF16)
make_float16_unnormalised = partial(_rounded, output=torch.float16, cls=UnnormalisedBF16)

PERTURBED = Case(2, 3, 4, 8, seed=0, perturb=1.0, branch="mlp")
# (property, buggy stand-in here, correct stand-in, case or example number)
BUGS = [
    ("reduction.mhc_n1_residual", "make_bf16_n1_doubled", "make_bf16_output", 0),
    ("reduction.mhc_n1_residual", "make_float16_n1_doubled", "make_float16_output", 0),
    ("conventions.branch_input", "make_bf16_tanh_aggregate", "make_bf16_output", PERTURBED),
    ("conventions.branch_input", "make_float16_tanh_aggregate", "make_float16_output",
     PERTURBED),
    ("conventions.weights_scale_invariant", "make_bf16_unnormalised", "make_bf16_output",
     PERTURBED),
    ("conventions.weights_scale_invariant", "make_float16_unnormalised", "make_float16_output",
     PERTURBED),
    ("conventions.expand_replicates", "make_bf16_expand_scaled", "make_bf16_output", 0),
    ("conventions.reduce_scale", "make_bf16_reduce_mean", "make_bf16_output", 0),
    ("conventions.reduce_scale", "make_float16_reduce_mean", "make_float16_output", 1),
    ("reduction.n1_prenorm_forward", "make_bf16_n1_no_residual", "make_bf16_hc_static", 0),
    ("reduction.n1_prenorm_forward", "make_float16_n1_no_residual", "make_float16_hc_static",
     1),
    ("reduction.n1_prenorm_backward", "make_bf16_hc_detached", "make_bf16_hc_static", 0),
    ("reduction.n1_prenorm_backward", "make_float16_hc_detached", "make_float16_hc_static", 1),
    ("reduction.static_init", "make_bf16_static_post_init", "make_bf16_hc_static", 0),
    ("reduction.init_prenorm_stack", "make_bf16_static_post_init", "make_bf16_hc_static", 0),
    ("reduction.init_prenorm_stack", "make_float16_dynamic_post_init", "make_float16_hc_dynamic",
     1),
    ("reduction.dynamic_init_static", "make_float16_dynamic_post_init",
     "make_float16_hc_dynamic", 0),
]


def _run(prop: str, target: str, where: Case | int):  # type: ignore[no-untyped-def]
    if isinstance(where, Case):
        return support.run(prop, target, where)
    return support.run(prop, target, example=where)


@pytest.mark.parametrize(("prop", "buggy", "correct", "where"), BUGS,
                         ids=[f"{p}-{b}" for p, b, _, _ in BUGS])
def test_low_precision_allowance_can_fail(prop: str, buggy: str, correct: str,
                                          where: Case | int) -> None:
    ctx = _run(prop, f"{STANDINS}:{correct}", where)
    eps = tolerances.eps(ctx.tol_dtype)
    # a correct stand-in stays at or below half of the allowance, which is a few eps, not 256
    assert ctx.worst.error <= ctx.worst.tolerance / 2, ctx.worst
    assert ctx.worst.tolerance <= 32 * eps, ctx.worst
    assert ctx.worst.rule == ("identity" if "n1" in prop or "prenorm" in prop else "law")
    with pytest.raises(PropertyFailure) as failure:
        _run(prop, f"{HERE}:{buggy}", where)
    assert failure.value.rule in ("law", "identity")
    assert failure.value.floor is not None and failure.value.floor > 0
    assert failure.value.tolerance is not None and failure.value.tolerance <= 32 * eps


def test_bfloat16_state_v4_branch_input_is_sharp() -> None:
    """The correct DeepSeek-V4-formula stand-in on a bfloat16 state (float32 parameters):
    its branch input is compared within a few bfloat16 eps (2.0 before)."""
    ctx = support.run("conventions.branch_input", f"{STANDINS}:make_bf16_state_v4", PERTURBED)
    bf16 = tolerances.eps(torch.bfloat16)
    assert ctx.worst.error <= ctx.worst.tolerance / 2 <= 16 * bf16, ctx.worst
