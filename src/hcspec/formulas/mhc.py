"""An mHC step's weights from its pre-activation logits under a
:class:`~hcspec.spec.record.Formula` (mHC Eq. 8–9 and DeepSeek-V4's form of them): the gates
``h_pre = c_pre·σ(H̃_pre) + ε_pre``, ``h_post = c_post·σ(H̃_post) + ε_post`` and ``H_res`` the
formula's Sinkhorn–Knopp variant of ``H̃_res`` in its orientation.

Every function computes in the dtype and on the device of its logits (the kit calls them in
float64) and is differentiable. Imports torch and the spec's record only.
"""

from __future__ import annotations

import torch

from hcspec.formulas.sinkhorn import sinkhorn_variant
from hcspec.spec.record import Formula, Gate

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""``(h_pre [..., n], h_post [..., n], H_res [..., n, n])``."""


def gate(g: Gate, logits: torch.Tensor) -> torch.Tensor:
    """``g.multiplier · σ(logits) + g.eps`` (mHC Eq. 8), element-wise, in the dtype and device
    of ``logits``; a multiplier of 1 and an eps of 0 are not applied (so the paper's ``σ`` is
    ``torch.sigmoid`` bit for bit)."""
    h = torch.sigmoid(logits)
    if g.multiplier != 1.0:
        h = g.multiplier * h
    return h + g.eps if g.eps else h


def h_res(formula: Formula, logits: torch.Tensor) -> torch.Tensor:
    """``H_res`` of ``formula`` at ``logits [..., n, n]``: its Sinkhorn–Knopp variant
    (:func:`hcspec.formulas.sinkhorn.sinkhorn_variant`) of ``H̃_res`` (of ``H̃_resᵀ`` when
    ``logits_transposed``), transposed when ``transposed``; ``[..., n, n]``.

    Raises:
        TypeError, ValueError: as :func:`hcspec.formulas.sinkhorn.sinkhorn_variant`.
    """
    source = logits.transpose(-1, -2) if formula.logits_transposed else logits
    H = sinkhorn_variant(source, formula.sinkhorn)
    return H.transpose(-1, -2) if formula.transposed else H


def weights(formula: Formula, pre: torch.Tensor, post: torch.Tensor,
            res: torch.Tensor) -> Weights:
    """``(h_pre, h_post, H_res)`` of ``formula`` at the logits ``pre [..., n]``, ``post
    [..., n]``, ``res [..., n, n]`` (:func:`gate`, :func:`h_res`).

    Raises:
        TypeError, ValueError: as :func:`h_res`.
    """
    return gate(formula.h_pre, pre), gate(formula.h_post, post), h_res(formula, res)
