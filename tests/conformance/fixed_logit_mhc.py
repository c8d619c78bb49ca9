"""A static mHC for the kit's own tests: fixed logits with no input-dependent part (mHC
arXiv:2512.24880 Eq. 7 with φ = 0), ``h_pre = σ(b_pre)``, ``h_post = 2σ(b_post)``,
``H_res = SinkhornKnopp(b_res)``, its post logits ``b_post`` initialised at a chosen value.

A correct mHC whichever the init: ``constraints.h_post_span`` must never fail it (a fresh user
saw it fail with n = 2, both post logits negative after the kit's nudge). ``make_sigma`` is the
same layer with ``H_post = σ(b_post)`` (the missing factor 2), which the property must catch;
``make_buffer`` keeps its post logits in a buffer the kit cannot move (``H_post ≡ 1``), where
the range cannot be demonstrated either way.

TARGETs: ``tests.conformance.fixed_logit_mhc:make_negative`` (init −1),
``…:make_very_negative`` (init −50), ``…:make_zero``, ``…:make_positive`` (init +3),
``…:make_sigma`` (σ, init 0), ``…:make_buffer``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hcspec.reference import sinkhorn_knopp

Branch = Callable[[torch.Tensor], torch.Tensor]


class FixedLogitMHC(nn.Module):
    """``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with input-independent mHC weights."""

    kind = "mhc"

    def __init__(self, n: int, d: int, post_init: float, post_factor: float,
                 post_is_parameter: bool) -> None:
        super().__init__()
        self.n, self.d, self.post_factor = n, d, post_factor
        self.b_pre = nn.Parameter(torch.zeros(n, dtype=torch.float64))
        self.b_res = nn.Parameter(torch.zeros(n, n, dtype=torch.float64))
        post = torch.full((n,), post_init, dtype=torch.float64)
        if post_is_parameter:
            self.b_post = nn.Parameter(post)
        else:
            self.register_buffer("b_post", post)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, n, _ = x.shape
        h_pre = torch.sigmoid(self.b_pre)
        h_post = self.post_factor * torch.sigmoid(self.b_post)
        H_res = sinkhorn_knopp(self.b_res, 20)
        return h_pre.expand(b, t, n), h_post.expand(b, t, n), H_res.expand(b, t, n, n)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        h_pre, h_post, H_res = self.weights(x)
        z = branch(torch.einsum("btn,btnd->btd", h_pre, x))
        return torch.einsum("btij,btjd->btid", H_res, x) + h_post[..., None] * z[..., None, :]


def factory(post_init: float, post_factor: float = 2.0,
            post_is_parameter: bool = True) -> Callable[..., FixedLogitMHC]:
    """A TARGET factory of :class:`FixedLogitMHC` with its post logits at ``post_init``."""

    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0, **_: Any) -> FixedLogitMHC:
        module = FixedLogitMHC(n, d, post_init, post_factor, post_is_parameter)
        return module.to(dtype=dtype, device=device)

    return make


make_negative = factory(-1.0)
make_very_negative = factory(-50.0)
make_zero = factory(0.0)
make_positive = factory(3.0)
make_sigma = factory(0.0, post_factor=1.0)
make_buffer = factory(0.0, post_is_parameter=False)
