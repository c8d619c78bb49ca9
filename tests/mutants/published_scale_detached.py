"""Mutant: the forward uses ``hc_scale`` detached from autograd (a backward-only slip: the step
is DeepSeek-V4's, but no gradient reaches ``hc_scale``, so it never trains).

Bug class: published parameterization (gradients w.r.t. the published tensors).
Caught by: published.gradients.
"""

from __future__ import annotations

import torch

from hcspec.reference import published
from hcspec.reference.connection import Weights
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from tests.mutants._published import make_divergent

BUG_CLASS = "published: hc_scale detached (no gradient reaches it)"
CAUGHT_BY = ("published.gradients",)


class ScaleDetached(DeepSeekV4HyperConnection):
    def _weights(self, x: torch.Tensor) -> Weights:
        params = dict(self.published_parameters())
        params["hc_scale"] = self.hc_scale.detach()
        return published.weights("deepseek-v4", params, x)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(None, n, d, layer_index, dtype, device,
                          seed, cls=ScaleDetached)
