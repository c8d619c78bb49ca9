"""What the law costs in the precision an impl returns: the spec's closed form
``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` (HC Eq. 3–5, mHC Eq. 3) evaluated from the same state and
weights in the impl's compute dtype and rounded to its output dtype, as a black box the kit can
run and probe like the impl. Its error against the float64 closed form is what a *correct*
impl of that precision may differ by, so low-precision law tolerances are a small multiple of
it (:data:`hcspec.conformance.rules.LAW` with its ``oracle``), in the spirit of FlashAttention's
tests
(error ≤ c × the error of the reference computed in the same precision).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from hcspec.conformance import metrics, probes, salts, strategies
from hcspec.conformance.machinery.base import Context
from hcspec.conformance.protocol import Branch, HyperConnectionImpl
from hcspec.conformance.strategies import Case


@dataclass(frozen=True)
class SpecAtPrecision:
    """The closed form with fixed per-token weights, computed in ``compute`` and returned in
    ``output``; the aggregate is rounded to ``output`` before the branch and handed to the
    branch in the state's dtype (as an impl that rounds what it returns).

    Attributes:
        h_pre, h_post: ``[B, T, n]``; H_res: ``[B, T, n, n]`` (any dtype; used in ``compute``).
        compute, output: the dtypes.
        branch_input: the declared map from the aggregate to what the branch receives.
    """

    h_pre: torch.Tensor
    h_post: torch.Tensor
    H_res: torch.Tensor
    compute: torch.dtype
    output: torch.dtype
    branch_input: Callable[[torch.Tensor], torch.Tensor]

    @property
    def n(self) -> int:
        """The number of streams."""
        return int(self.H_res.shape[-1])

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``round_output(H_res X + h_post F(round_output(h_preᵀ X))ᵀ)`` computed in
        ``compute``; shapes ``x [B, T, n, d] -> [B, T, n, d]`` in ``output``."""
        c = self.compute
        X = x.detach().to(device="cpu", dtype=c)
        h_pre, h_post, H_res = (w.detach().to(device="cpu", dtype=c)
                                for w in (self.h_pre, self.h_post, self.H_res))
        x_in = self.branch_input((h_pre.unsqueeze(-2) @ X).squeeze(-2)).to(self.output)
        z = branch(x_in.to(device=x.device, dtype=x.dtype)).detach().to(device="cpu", dtype=c)
        out = H_res @ X + h_post.unsqueeze(-1) * z.unsqueeze(-2)
        return out.to(self.output).to(x.device)


def low_precision(ctx: Context) -> bool:
    """Whether the run compares in bfloat16/float16 (the measured-reference rule applies)."""
    return ctx.precision.output in (torch.bfloat16, torch.float16)


def spec_at_precision(ctx: Context, h_pre: torch.Tensor, h_post: torch.Tensor,
                      H_res: torch.Tensor) -> SpecAtPrecision:
    """:class:`SpecAtPrecision` for the run: computed in the declared compute dtype (else the
    working dtype) and returned in the effective dtype ``ctx.precision.output``."""
    compute = ctx.conventions.compute_dtype or ctx.dtype
    return SpecAtPrecision(h_pre, h_post, H_res, compute, ctx.precision.output,
                           ctx.observe.branch_input)


def probe_spec(ctx: Context, spec: SpecAtPrecision, x: torch.Tensor,
               case: Case) -> probes.ProbedWeights:
    """The kit's black-box probes run on ``spec`` at ``x``: what probing a correct impl of
    the run's precision gives."""
    return probes.probe(cast(HyperConnectionImpl, spec), x, ctx.conventions, seed=case.seed)


def oracle(ctx: Context, measure: Callable[[], float]) -> float | None:
    """``measure()`` — the error of :class:`SpecAtPrecision` on a comparison — when the run
    compares in bfloat16/float16, else None (the rule's fixed budget applies): the ``oracle``
    input of :data:`hcspec.conformance.rules.LAW`."""
    return measure() if low_precision(ctx) else None


def law_oracles(ctx: Context, case: Case, x: torch.Tensor, weights: tuple[
        torch.Tensor, torch.Tensor, torch.Tensor], expected: tuple[torch.Tensor, torch.Tensor,
                                                                    float],
                ) -> tuple[float | None, float | None]:
    """``(output oracle, branch-input oracle)`` of a law comparison at ``x [B, T, n, d]`` with
    ``weights = (h_pre, h_post, H_res)`` and the float64 ``expected = (X', branch input,
    scale)`` of :func:`hcspec.conformance.machinery.common.expected_output`: the error of
    :class:`SpecAtPrecision` (the closed form in the run's precision, the case's branch) on
    each comparison when the run compares in bfloat16/float16, else ``(None, None)`` (the
    ``oracle`` input of :data:`hcspec.conformance.rules.LAW`)."""
    if not low_precision(ctx):
        return None, None
    want, inp, scale = expected
    spec_branch = ctx.inputs.branch(case)
    spec_out = spec_at_precision(ctx, *weights).forward(x, spec_branch)
    return (metrics.scaled_error(spec_out, want, scale),
            metrics.scaled_error(spec_branch.inputs[0], inp))


Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def weights_within_rounding(ctx: Context, case: Case, weights: Weights) -> list[Weights]:
    """:data:`salts.WEIGHT_ROUNDING_DRAWS` draws of the reported ``weights = (h_pre, h_post,
    H_res)`` (float64) each entry moved uniformly within half an ulp of the run's effective
    dtype, seeded by the case: where a target computes its weights in a finer dtype and
    reports them rounded, the weights it used lie there. A floor measured with the reported
    weights alone is one draw of that rounding and can be small by chance (a low-precision
    floor takes the largest error over the reported weights and these)."""
    half_ulp = 0.5 * torch.finfo(ctx.precision.output).eps

    def moved(j: int, k: int, w: torch.Tensor) -> torch.Tensor:
        normal = strategies.gaussian(w.shape, case.seed, salts.WEIGHT_ROUNDING.at(j, k),
                                     torch.float64)
        return w * (1.0 + half_ulp * torch.erf(normal / math.sqrt(2.0)))  # uniform in (−1, 1)

    return [(moved(j, 0, weights[0]), moved(j, 1, weights[1]), moved(j, 2, weights[2]))
            for j in range(salts.WEIGHT_ROUNDING_DRAWS)]
