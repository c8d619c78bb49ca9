"""Shared pieces of the mutants: building a reference module reproducibly, mHC's
pre-activation logits (mHC arXiv:2512.24880 Eq. 7) recomputed from the module's parameters so
a mutant can change what happens after them, and a plain mHC whose H_res step is replaceable.

Every mutant module defines ``make(n, d, *, layer_index, dtype, device, seed)`` (the kit's
factory protocol), ``BUG_CLASS`` (the family of bug; "public report #k" is row k of the table
"Bug classes from public reports" in docs/conformance.md), ``CAUGHT_BY`` (the
property ids that must catch it; each is named in the module docstring) and optionally
``NEEDS`` (``"cuda"``: the bug only shows where a CUDA device exists).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F

from hcspec.conformance.adapters.reference import REFERENCE_CONVENTIONS
from hcspec.conformance.protocol import Conventions, HyperConnectionImpl
from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp


def build(cls: type[torch.nn.Module], n: int, d: int, layer_index: int, dtype: torch.dtype,
          device: str, seed: int, conventions: Conventions = REFERENCE_CONVENTIONS,
          ) -> HyperConnectionImpl:
    """``cls(n, d, layer_index)`` built under ``seed`` in float64 on the CPU (so every dtype
    and device starts from the same values, as the reference targets do), then moved to
    ``dtype``/``device``, declaring ``conventions``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = cls(n, d, layer_index, dtype=torch.float64)
    module = module.to(dtype=dtype, device=device)
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


def mhc_conventions(iterations: int | None = 20) -> Conventions:
    """The reference mHC's declaration (20 column-then-row rounds)."""
    return Conventions(sinkhorn_iterations=iterations, notes=REFERENCE_CONVENTIONS.notes)


class MHCWithProjection(ManifoldHyperConnection):
    """The reference mHC with the Sinkhorn–Knopp step replaced by :meth:`project`."""

    def project(self, logits: torch.Tensor) -> torch.Tensor:
        """``H̃_res [B,T,n,n] -> H_res``; the reference's log-domain Sinkhorn–Knopp."""
        return sinkhorn_knopp(logits, self.sinkhorn_iterations)

    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return torch.sigmoid(pre), 2 * torch.sigmoid(post), self.project(res)
