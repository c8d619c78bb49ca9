"""Mutant: ``h_post = 2·softmax(H̃_post)`` over the streams where the declaration (the
default) says ``2σ(H̃_post)`` (mHC Eq. 8). The same module declared
``h_post_activation="softmax"`` is correct (a test runs it as the control).

Bug class: gates (issue #40, constructions other than Sinkhorn). Still inside [0, 2] and
able to exceed 1 (a one-hot reaches 2), so the range and span checks pass.
Caught by: variant.gates (the declared gate applied to the target's own logits).
"""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import Conventions
from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions, mhc_logits

BUG_CLASS = "gates: h_post = 2·softmax declared as 2σ (issue #40)"
CAUGHT_BY = ("variant.gates",)


class SoftmaxPost(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return (torch.sigmoid(pre), 2.0 * torch.softmax(post, dim=-1),
                sinkhorn_knopp(res, self.sinkhorn_iterations))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(SoftmaxPost, n, d, layer_index, dtype, device, seed, mhc_conventions())


def make_declared(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    """The control: the same module declaring ``h_post_activation="softmax"``."""
    declared = Conventions(sinkhorn_iterations=20, h_post_activation="softmax",
                           notes=mhc_conventions().notes)
    return build(SoftmaxPost, n, d, layer_index, dtype, device, seed, declared)
