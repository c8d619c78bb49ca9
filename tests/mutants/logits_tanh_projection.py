"""Mutant: the logits apply HC's dynamic-weight tanh to the projection,
``H̃ = α·tanh(x'φ) + b``, where mHC Eq. 7 has ``α·(x'φ) + b`` (affine in ``x' = RMSNorm(vec X)``).
``logits(x)`` and ``weights(x)`` both take the tanh, so the gates, the Sinkhorn variant and the
law hold with them; the weights stay in range and scale invariant.

Bug class: a nonlinearity inside the logits (HC arXiv:2409.19606 Eq. 11–13 carried into mHC,
whose logits are linear in the normalised state); it saturates the logits and changes the
gradients of φ, not the form of any weight.
Caught by: variant.logits_affine.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions, mhc_logits

BUG_CLASS = "nonlinearity inside the logits: α·tanh(x'φ) + b"
CAUGHT_BY = ("variant.logits_affine",)


class TanhLogits(ManifoldHyperConnection):
    def _readable_logits(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        affine = mhc_logits(self, x)
        biases = (self.b_pre, self.b_post, self.b_res)
        alphas = (self.alpha_pre, self.alpha_post, self.alpha_res)
        # meant: α·(x'φ) + b, as mhc_logits returns
        return tuple(alpha * torch.tanh((logit - b) / alpha) + b
                     for logit, b, alpha in zip(affine, biases, alphas, strict=True))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(TanhLogits, n, d, layer_index, dtype, device, seed, mhc_conventions())
