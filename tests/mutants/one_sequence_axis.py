"""Mutant: accepts a state with any number of leading axes (``[..., n, d]``), but flattens for
the weights with ``x.reshape(x.shape[0], x.shape[1], -1)`` — code that assumes exactly one
sequence axis.

Bug class: shape handling (public report #4). On ``[B, T, n, d]`` it is the reference; on
``[B, n, d]`` it silently RMS-normalises each stream on its own (wrong weights, no error); on
``[B, H, W, n, d]`` it crashes inside the projection.
Caught by: shape.other_sequence_axes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "shape: assumes exactly one sequence axis (public report #4)"
CAUGHT_BY = ("shape.other_sequence_axes",)


class OneSequenceAxis(ManifoldHyperConnection):
    def _check_state(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.n, self.d):
            raise ValueError(f"expected [..., n={self.n}, d={self.d}], got {tuple(x.shape)}")
        return x

    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        n, d = self.n, self.d
        flat = x.reshape(x.shape[0], x.shape[1], -1)  # assumes [B, T, n, d]
        flat = F.rms_norm(flat, (flat.shape[-1],), eps=self.norm_eps)
        flat = flat.reshape(*x.shape[:-2], n * d)
        pre = torch.sigmoid(self.alpha_pre * (flat @ self.phi_pre) + self.b_pre)
        post = 2 * torch.sigmoid(self.alpha_post * (flat @ self.phi_post) + self.b_post)
        res = self.alpha_res * (flat @ self.phi_res).reshape(*x.shape[:-2], n, n) + self.b_res
        return pre, post, sinkhorn_knopp(res, self.sinkhorn_iterations)

    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(OneSequenceAxis, n, d, layer_index, dtype, device, seed, mhc_conventions())
