"""Shared pieces of the mutants: building a reference module reproducibly, and mHC's
pre-activation logits (mHC arXiv:2512.24880 Eq. 7) recomputed from the module's parameters so
a mutant can change what happens after them."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F

from conformance.adapters.reference import REFERENCE_CONVENTIONS
from conformance.protocol import Conventions, HyperConnectionImpl
from reference import ManifoldHyperConnection


def build(cls: type[torch.nn.Module], n: int, d: int, layer_index: int, dtype: torch.dtype,
          device: str, seed: int, conventions: Conventions = REFERENCE_CONVENTIONS,
          ) -> HyperConnectionImpl:
    """``cls(n, d, layer_index, dtype=dtype, device=device)`` built under ``seed``, declaring
    ``conventions``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = cls(n, d, layer_index, dtype=dtype, device=device)
    module.conventions = conventions
    return cast(HyperConnectionImpl, module)


def mhc_logits(m: ManifoldHyperConnection, x: torch.Tensor,
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])`` of the reference mHC at ``x``."""
    batch, tokens, n, d = x.shape
    x_flat = F.rms_norm(x.reshape(batch, tokens, n * d), (n * d,), eps=m.norm_eps)
    pre = m.alpha_pre * (x_flat @ m.phi_pre) + m.b_pre
    post = m.alpha_post * (x_flat @ m.phi_post) + m.b_post
    res = m.alpha_res * (x_flat @ m.phi_res).reshape(batch, tokens, n, n) + m.b_res
    return pre, post, res


def mhc_conventions(iterations: int = 20) -> Conventions:
    """The reference mHC's declaration (20 column-then-row rounds)."""
    return Conventions(sinkhorn_iterations=iterations, notes=REFERENCE_CONVENTIONS.notes)
