"""Mutant: keeps a running mean of ‖H_res − I‖ in a buffer "for monitoring" and updates it on
every forward, in eval mode too (the ``if self.training`` guard forgotten).

Bug class: state (parameters/buffers updated during forward: a running statistic mutating in
eval). Checkpoints saved after evaluation differ from those saved before it.
Caught by: state.parameters_unchanged.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "state: running statistic updated in eval mode"
CAUGHT_BY = ("state.parameters_unchanged",)
MOMENTUM = 0.1


class Monitored(ManifoldHyperConnection):
    def __init__(self, n: int, d: int, layer_index: int = 0, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(n, d, layer_index, **kwargs)
        self.register_buffer("running_offdiag", torch.zeros((), dtype=kwargs.get("dtype")))

    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        _, _, H_res = self.weights(x)
        eye = torch.eye(self.n, dtype=x.dtype, device=x.device)
        with torch.no_grad():  # meant: `if self.training:`
            self.running_offdiag.lerp_((H_res - eye).abs().mean(), MOMENTUM)
        return super().forward(x, branch)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Monitored, n, d, layer_index, dtype, device, seed, mhc_conventions())
