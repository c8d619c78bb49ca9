"""Mutant: elementwise_weights reports h_pre without the 1/n of the mean (n times too large)
while forward reads with the mean.

Bug class: gated read/write (the reported read is not the one used). Caught by: gated.law
(the branch input is not Σ_s h_pre_s ⊙ X_s of the reported weights).
"""

from __future__ import annotations

import torch

from tests.mutants._gated import _Divergent

BUG_CLASS = "gated: the reported element-wise read is not the one used"
CAUGHT_BY = ("gated.law",)


class _Misreported(_Divergent):
    def elementwise_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h_pre, h_post = super().elementwise_weights(x)
        return h_pre * self.n, h_post


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = _Misreported(n, d)
    return module.to(dtype=dtype, device=device)
