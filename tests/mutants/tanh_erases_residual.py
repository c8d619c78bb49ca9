"""Mutant: dynamic HC with a tanh wrapped around static + dynamic mixing,
``H_res = tanh(H_res_static + s_α tanh(X̄ W_r)ᵀ)``, and the static part initialised to 0.

Bug class: ranges / init (public report #10: init not equivalent to the residual). At init
H_res = tanh(0) = 0: with F ≡ 0 the output is 0, the residual stream is erased (a 1% output
norm with the paper's s_α = 0.01 once W moves).
Caught by: reduction.dynamic_init_static and reduction.init_prenorm_stack.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "ranges/init: tanh around static + dynamic erases the residual (public report #10)"
CAUGHT_BY = ("reduction.dynamic_init_static", "reduction.init_prenorm_stack")


class TanhMixing(DynamicHyperConnection):
    def reset_static_parameters(self) -> None:
        super().reset_static_parameters()
        with torch.no_grad():
            self.H_res.zero_()

    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        h_pre, h_post, H_res = super()._weights(x)
        return h_pre, h_post, torch.tanh(H_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(TanhMixing, n, d, layer_index, dtype, device, seed)
