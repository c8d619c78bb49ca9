"""Mutant: above 64 tokens in the batch the weights take a "batched" path whose RMS statistic
of ``vec(X)`` is taken over all tokens of the batch instead of per token, so a token's weights
(and output) depend on how many other tokens share its batch. ``weights(x)`` takes the same
path, so the law with the reported weights still holds.

Bug class: kernels that switch path with the token count (public report: ROCm mHC kernels
with "accuracy problems at large numbers of tokens"; serving engines whose kernels are chosen
by batch size, vLLM's kernel tests sweep 1, 33 and 65537 tokens). The other families draw at
most 12 tokens.
Caught by: scale.batch_composition.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "token-count path: batch-wide RMS statistic above 64 tokens"
CAUGHT_BY = ("scale.batch_composition",)
THRESHOLD = 64


class BatchedPath(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)
        mean_square = x_flat.square().mean(-1, keepdim=True)
        if batch * tokens >= THRESHOLD:  # meant: per token on every path
            mean_square = mean_square.mean(dim=(0, 1), keepdim=True).expand_as(mean_square)
        projected = torch.rsqrt(mean_square + self.norm_eps) * (x_flat @ self._phi())
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(BatchedPath, n, d, layer_index, dtype, device, seed, mhc_conventions())
