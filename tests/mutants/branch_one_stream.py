"""Mutant: writes the branch output back into one stream only (``layer_index mod n``, scaled by
that stream's h_post) although h_post has a weight for every stream.

Bug class: sublayer (branch output written to one stream only when h_post says all). Together
with the one-hot h_pre it looks like a natural "each layer owns a stream" design.
Caught by: law.reported and law.reported_matches_probed.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "sublayer: branch output written to one stream only"
CAUGHT_BY = ("law.reported", "law.reported_matches_probed")


class OneStream(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        owner = self.layer_index % self.n
        mask = torch.zeros(self.n, dtype=x.dtype, device=x.device)
        mask[owner] = 1.0
        return H_res @ x + (mask * h_post).unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(OneStream, n, d, layer_index, dtype, device, seed)
