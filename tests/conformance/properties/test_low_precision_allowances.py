"""Comparisons that the soak found at 256·eps of the output below float32 (2.0 in bfloat16, 5.0
with a factor): a bound no error of a value in [0, 2] can reach passes any bug. Each now has a
measured (or derived) same-precision floor: a correct bfloat16/float16 stand-in passes well
inside it and the stand-in with the bug fails, where before it passed.

Stand-ins here (TARGETs ``tests.conformance.properties.test_low_precision_allowances:NAME``):
the bfloat16 twins of the precision stand-ins with one bug each, and two correct ones for
comparisons the reference does not make — ``make_bf16_normed`` (declared ``rms_norm`` branch
input, no ``weights``) and ``make_bf16_learned_head`` (declared ``reduce="learned"``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.strategies import Case
from tests.conformance.properties import support
from tests.conformance.properties.precision_standins import (
    Rounded,
    RoundedDynamicHC,
    RoundedMHC,
    RoundedStaticHC,
    _rounded,
)
from tests.mutants.logits_tanh_projection import TanhLogits
from tests.mutants.sinkhorn_implicit_backward import ImplicitBackward
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


class TanhLogitsBF16(RoundedMHC, TanhLogits):
    """:class:`RoundedMHC` whose logits take a tanh of the projection
    (``tests.mutants.logits_tanh_projection``: ``α·tanh(x'φ) + b``)."""


class ImplicitBackwardBF16(RoundedMHC, ImplicitBackward):
    """:class:`RoundedMHC` whose Sinkhorn backward is the implicit (fixed-point) one although
    the truncated forward's is declared (``tests.mutants.sinkhorn_implicit_backward``)."""


NORM_EPS = 1e-6


class NormedInput(RoundedMHC):
    """:class:`RoundedMHC` whose branch receives ``RMSNorm(h_preᵀX)`` (declared ``rms_norm``),
    the norm in float32 on the rounded aggregate, rounded again; no ``weights`` (so
    ``conventions.branch_input`` checks the norm without knowing ``h_pre``'s size).
    ``centred``: the bug — a layer norm's centring under the declared RMS norm."""

    weights = None  # type: ignore[assignment]
    centred: bool = False

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        def normed(z: torch.Tensor) -> torch.Tensor:
            u = z.float()
            if self.centred:
                u = u - u.mean(-1, keepdim=True)  # meant: RMSNorm, no centring
            v = u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + NORM_EPS)
            return branch(v.to(self.output).to(z.dtype))

        return super().forward(x, normed)


class LearnedHead(RoundedMHC):
    """:class:`RoundedMHC` with a learned reduction head (declared ``reduce="learned"``, as
    DeepSeek-V4's HyperHead): ``reduce(X) = h_pre(X)ᵀX`` in float32, rounded to the output.
    ``activated``: the bug — the block's SiLU applied to the head's mix."""

    activated: bool = False

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        xw, h_pre, _, _ = self._inner(x)
        out = (h_pre.unsqueeze(-2) @ xw).squeeze(-2)
        if self.activated:
            out = torch.nn.functional.silu(out)  # meant: wᵀX, no activation
        return out.to(self.output)


class CentredInput(NormedInput):
    """:class:`NormedInput` with its bug."""

    centred = True


class ActivatedHead(LearnedHead):
    """:class:`LearnedHead` with its bug."""

    activated = True


def _declaring(n: int, d: int, *, cls: type[Rounded], changes: dict[str, Any],
               **kwargs: Any) -> Any:
    """:func:`_rounded` of ``cls`` in bfloat16 whose conventions also declare ``changes``."""
    module = _rounded(n, d, cls=cls, output=torch.bfloat16, **kwargs)
    module.conventions = dataclasses.replace(module.conventions, **changes)
    return module


NORMED = {"branch_input": "rms_norm", "norm_eps": NORM_EPS}
make_bf16_normed = partial(_declaring, cls=NormedInput, changes=NORMED)
make_bf16_centred = partial(_declaring, cls=CentredInput, changes=NORMED)
make_bf16_learned_head = partial(_declaring, cls=LearnedHead, changes={"reduce": "learned"})
make_bf16_activated_head = partial(_declaring, cls=ActivatedHead, changes={"reduce": "learned"})
make_bf16_transposed = partial(_rounded, output=torch.bfloat16, transposed=True)
make_bf16_tanh_logits = partial(_rounded, output=torch.bfloat16, cls=TanhLogitsBF16)
make_bf16_implicit_backward = partial(_rounded, output=torch.bfloat16,
                                      cls=ImplicitBackwardBF16)
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
    ("gradients.closed_form_probed", "make_bf16_hc_detached", "make_bf16_hc_static", 0),
    ("gradients.closed_form_probed", "make_float16_hc_detached", "make_float16_hc_static", 1),
    ("stack.unrolled_weights", "make_bf16_transposed", "make_bf16_output", 1),
    ("variant.logits_affine", "make_bf16_tanh_logits", "make_bf16_output", 1),
    ("variant.sinkhorn_gradient", "make_bf16_implicit_backward", "make_bf16_output", 0),
    ("conventions.reduce_scale", "make_bf16_activated_head", f"{HERE}:make_bf16_learned_head",
     0),
    ("conventions.branch_input", "make_bf16_centred", f"{HERE}:make_bf16_normed", 0),
]
RULES = {"variant.sinkhorn_gradient": "sinkhorn_fixed_point"}
"""The rule of a property whose primary rule is neither the law nor the identity one."""


def _rule(prop: str) -> str:
    return RULES.get(prop, "identity" if "n1" in prop or "prenorm" in prop else "law")


def _run(prop: str, target: str, where: Case | int):  # type: ignore[no-untyped-def]
    if isinstance(where, Case):
        return support.run(prop, target, where)
    return support.run(prop, target, example=where)


@pytest.mark.parametrize(("prop", "buggy", "correct", "where"), BUGS,
                         ids=[f"{p}-{b}" for p, b, _, _ in BUGS])
def test_low_precision_allowance_can_fail(prop: str, buggy: str, correct: str,
                                          where: Case | int) -> None:
    ctx = _run(prop, correct if ":" in correct else f"{STANDINS}:{correct}", where)
    eps = rules.eps(ctx.precision.output)
    # a correct stand-in stays at or below half of the allowance, which is a few eps, not 256
    assert ctx.worst.error <= ctx.worst.tolerance / 2, ctx.worst
    assert ctx.worst.tolerance <= 32 * eps, ctx.worst
    assert ctx.worst.rule == _rule(prop)
    with pytest.raises(PropertyFailure) as failure:
        _run(prop, f"{HERE}:{buggy}", where)
    assert failure.value.rule == _rule(prop)
    assert failure.value.floor is not None and failure.value.floor > 0
    assert failure.value.tolerance is not None and failure.value.tolerance <= 32 * eps


def test_bfloat16_state_v4_branch_input_is_sharp() -> None:
    """The correct DeepSeek-V4-formula stand-in on a bfloat16 state (float32 parameters):
    its branch input is compared within a few bfloat16 eps (2.0 before)."""
    ctx = support.run("conventions.branch_input", f"{STANDINS}:make_bf16_state_v4", PERTURBED)
    bf16 = rules.eps(torch.bfloat16)
    assert ctx.worst.error <= ctx.worst.tolerance / 2 <= 16 * bf16, ctx.worst
