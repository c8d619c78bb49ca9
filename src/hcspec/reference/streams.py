"""Stream expansion and reduction at the ends of a hyper-connected network.

HC arXiv:2409.19606 §2 (and Alg. 2): the input embedding is replicated into n residual
streams, ``X₀ = 1_n h₀ᵀ``, and the last state is reduced by summing the streams,
``h_L = 1ᵀ X_L``, before the final norm and unembedding. mHC arXiv:2512.24880 leaves both
unstated; this reference uses the same pair for mHC (see docs/reference.md).
"""

from __future__ import annotations

import torch

from hcspec.reference import _checks


def expand_streams(h: torch.Tensor, n: int) -> torch.Tensor:
    """Replicate a hidden state into ``n`` residual streams: ``X₀ = 1_n h₀ᵀ``.

    Shapes: ``h [B, T, d] -> [B, T, n, d]`` (streams on axis -2). The result is a new
    contiguous tensor (not a stride-0 view), so later in-place writes cannot alias ``h``.
    Autograd: the gradient reaching ``h`` is the sum of the streams' gradients.
    Dtype/device: those of ``h``.

    Raises:
        TypeError: ``h`` is not a tensor.
        ValueError: ``h`` is not 3-D or ``n`` is not a positive integer.
    """
    n = _checks.positive_int("n", n)
    if not isinstance(h, torch.Tensor):
        raise TypeError(f"h must be a torch.Tensor, got {type(h).__name__}")
    if h.dim() != 3:
        raise ValueError(f"expected h of shape [B, T, d], got {tuple(h.shape)}")
    batch, tokens, d = h.shape
    return h.unsqueeze(-2).expand(batch, tokens, n, d).contiguous()


def reduce_streams(x: torch.Tensor) -> torch.Tensor:
    """Sum the residual streams: ``h_L = 1ᵀ X_L`` (HC §2; a sum, not a mean).

    Shapes: ``x [B, T, n, d] -> [B, T, d]``. Dtype/device: those of ``x``. A following
    scale-invariant norm (the network's final RMSNorm) makes sum and mean equivalent up to
    the norm's ε.

    Raises:
        TypeError: ``x`` is not a tensor.
        ValueError: ``x`` is not 4-D.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"expected x of shape [B, T, n, d], got {tuple(x.shape)}")
    return x.sum(dim=-2)
