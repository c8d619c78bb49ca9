"""Shared piece of the gated mutants: the reference Qwen4-exp module computing one variant of
the gated step (:class:`hcspec.formulas.gated.GatedFormula`) while declaring, and offering the
tensors of, the published ``qwen4-exp`` layout (it still reports the published read as its
``elementwise_weights`` of the variant where its read is element-wise)."""

from __future__ import annotations

from typing import Any, cast

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.formulas import gated as formula
from hcspec.reference.gated import GatedHyperConnection


class _Divergent(GatedHyperConnection):
    variant: formula.GatedFormula = formula.PUBLISHED_GATED

    def forward(self, x: torch.Tensor, branch: formula.Branch) -> torch.Tensor:
        self._check(x)
        return formula.step(self.published_parameters(), x, branch, self.variant)

    def elementwise_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._check(x)
        params = self.published_parameters()
        p = formula.parts(params, x, self.variant)
        assert p.h_post is not None
        return formula.elementwise_h_pre(params, x, self.variant), p.h_post


def make_gated(variant: formula.GatedFormula, n: int, d: int, dtype: torch.dtype, device: str,
               seed: int) -> HyperConnectionImpl:
    """The reference gated module computing ``variant``, drawn from ``seed`` in float64."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = _Divergent(n, d)
    module.variant = variant
    return cast(HyperConnectionImpl, module.to(dtype=dtype, device=device))
