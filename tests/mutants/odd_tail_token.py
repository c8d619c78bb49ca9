"""Mutant: the weights are computed for tokens in pairs (a kernel vectorised over two tokens);
in a sequence of odd length ≥ 3 the last token takes the tail path, which reuses the RMS
statistic of the token before it. Every other token is right, a one-token sequence is right
(its tail has no token before it), and ``weights(x)`` takes the same path (the law holds with
the reported weights).

Bug class: a bug in only some tokens of a sequence (tail handling of a tiled or vectorised
token loop; the kit's independence and composition checks compared one token per case, never
the last of an odd sequence).
Caught by: independence.token, scale.batch_composition.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "only some tokens: the odd tail token reuses its neighbour's RMS statistic"
CAUGHT_BY = ("independence.token", "scale.batch_composition")


class OddTail(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)
        mean_square = x_flat.square().mean(-1, keepdim=True)
        if tokens >= 3 and tokens % 2:  # meant: each token's own statistic
            mean_square = torch.cat([mean_square[:, :-1], mean_square[:, -2:-1]], dim=1)
        projected = torch.rsqrt(mean_square + self.norm_eps) * (x_flat @ self._phi())
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(OddTail, n, d, layer_index, dtype, device, seed, mhc_conventions())
