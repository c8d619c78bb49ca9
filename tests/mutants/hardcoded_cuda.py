"""Mutant: builds the identity it mixes against with a hard-coded ``device="cuda"``
(``H_res = I + (H_res − I)``, a "numerically nicer" form), so it runs only where the state is
on CUDA.

Bug class: device (a hard-coded ``.cuda()``). On a CPU state forward raises (no CUDA here, or a
device mismatch on a CUDA machine).
Caught by: shape.output.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection, apply_connection
from tests.mutants._base import build

BUG_CLASS = "device: hard-coded .cuda()"
CAUGHT_BY = ("shape.output",)


class CudaOnly(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        eye = torch.eye(self.n, dtype=x.dtype).cuda()
        return apply_connection(x, branch, h_pre, h_post, eye + (H_res - eye))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(CudaOnly, n, d, layer_index, dtype, device, seed)
