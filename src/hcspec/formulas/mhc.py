"""An mHC step's weights from its pre-activation logits under a
:class:`~hcspec.spec.record.Formula` (mHC Eq. 8–9 and DeepSeek-V4's form of them): the gates
``h_pre = c_pre·σ(H̃_pre) + ε_pre``, ``h_post = c_post·σ(H̃_post) + ε_post`` and ``H_res`` the
formula's Sinkhorn–Knopp variant of ``H̃_res`` in its orientation.

Every function computes in the dtype and on the device of its logits (the kit calls them in
float64) and is differentiable. Imports torch and the spec's record only.
"""

from __future__ import annotations

import math

import torch

from hcspec.formulas.sinkhorn import sinkhorn_variant
from hcspec.spec.record import Formula, Gate, birkhoff_permutations

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""``(h_pre [..., n], h_post [..., n], H_res [..., n, n])``."""


def gate(g: Gate, logits: torch.Tensor) -> torch.Tensor:
    """``g.multiplier · σ(logits) + g.eps`` (mHC Eq. 8), element-wise, in the dtype and device
    of ``logits``; a multiplier of 1 and an eps of 0 are not applied (so the paper's ``σ`` is
    ``torch.sigmoid`` bit for bit). A ``softmax`` gate takes the softmax over the last axis
    (the n streams) instead of σ; ``logits [..., n]``."""
    h = torch.softmax(logits, dim=-1) if g.activation == "softmax" else torch.sigmoid(logits)
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
    if formula.construction == "birkhoff":
        H = birkhoff(formula, logits)
    else:
        source = logits.transpose(-1, -2) if formula.logits_transposed else logits
        H = (orthostochastic(source, formula.newton_schulz_iterations)
             if formula.construction == "orthostochastic"
             else sinkhorn_variant(source, formula.sinkhorn))
    return H.transpose(-1, -2) if formula.transposed else H


_FACTORIALS = {math.factorial(k): k for k in range(1, 9)}


def permutation_matrices(perms: tuple[tuple[int, ...], ...], dtype: torch.dtype,
                         device: torch.device | None = None) -> torch.Tensor:
    """``[K, n, n]``: ``P_k[i, perms[k][i]] = 1``, zeros elsewhere, in ``dtype`` on ``device``."""
    K, n = len(perms), len(perms[0])
    index = torch.tensor(perms, dtype=torch.long, device=device)
    P = torch.zeros(K, n, n, dtype=dtype, device=device)
    P.scatter_(2, index.unsqueeze(-1), 1.0)
    return P


_TARGETS: dict[tuple[tuple[int, ...], ...], torch.Tensor] = {}


def _targets(perms: tuple[tuple[int, ...], ...]) -> torch.Tensor:
    """``[n, K]`` int64 on the CPU: entry ``(i, k)`` is ``i·n + perms[k][i]``, the flat index
    of the one entry of row ``i`` that ``P_k`` sets (kept in a plain dict, not a cache
    wrapper, which torch.compile warns about: 8! = 40320 tuples take ~50 ms to convert)."""
    if perms not in _TARGETS:
        n = len(perms[0])
        index = torch.tensor(perms, dtype=torch.long).T  # [n, K]: perms[k][i]
        _TARGETS[perms] = index + n * torch.arange(n, dtype=torch.long)[:, None]
    return _TARGETS[perms]


def birkhoff(formula: Formula, logits: torch.Tensor) -> torch.Tensor:
    """mHC-lite's ``H_res = Σ_k softmax(logits)_k P_k`` (arXiv 2601.05732) over the formula's
    permutation set (all n! when none is declared; n is then read from ``K = n!``, n ≤ 8):
    ``logits [..., K]`` -> ``[..., n, n]``, in the dtype and device of ``logits``,
    differentiable.

    No ``[K, n, n]`` stack is formed: row ``i`` of ``P_k`` holds its single 1 at column
    ``p_k(i)``, so each row of ``H_res`` gathers the K weights by ``index_add`` into its n
    entries (``n`` passes over ``[..., K]``: at n = 8, K = 8! = 40320, a few MB per token batch
    instead of a 20 MB float64 stack contracted over ``n²`` entries per weight).

    Raises:
        ValueError: ``K`` is not the declared set's size, or not a factorial ≤ 8!.
    """
    K = logits.shape[-1]
    if formula.permutations is not None:
        perms = formula.permutations
    elif K in _FACTORIALS:
        perms = birkhoff_permutations(formula, _FACTORIALS[K])
    else:
        raise ValueError(f"birkhoff: {K} logits is not n! for any n <= 8")
    if len(perms) != K:
        raise ValueError(f"birkhoff: {K} logits for {len(perms)} permutations")
    n = len(perms[0])
    targets = _targets(perms).to(logits.device)
    a = torch.softmax(logits, dim=-1)
    H = a.new_zeros(*a.shape[:-1], n * n)
    for row in targets:
        H = H.index_add(-1, row, a)
    return H.reshape(*H.shape[:-1], n, n)


def orthostochastic(logits: torch.Tensor, iterations: int) -> torch.Tensor:
    """The orthostochastic ``H_res = Q ∘ Q``: ``Q`` the orthogonal polar factor of ``logits
    [..., n, n]`` by ``iterations`` Newton–Schulz steps ``X ← 1.5 X − 0.5 X Xᵀ X`` from
    ``X₀ = logits/‖logits‖_F`` (every singular value in (0, 1], where the cubic converges).
    Rows and columns of ``Q ∘ Q`` sum to 1 within ``‖QQᵀ − I‖`` (spec
    ``constructions.orthostochastic_inexact``). ``[..., n, n]``, dtype and device of ``logits``."""
    X = logits / torch.linalg.matrix_norm(logits).clamp_min(torch.finfo(logits.dtype).tiny)[
        ..., None, None]
    for _ in range(iterations):
        X = 1.5 * X - 0.5 * (X @ X.transpose(-1, -2) @ X)
    H: torch.Tensor = X * X
    return H


def weights(formula: Formula, pre: torch.Tensor, post: torch.Tensor,
            res: torch.Tensor) -> Weights:
    """``(h_pre, h_post, H_res)`` of ``formula`` at the logits ``pre [..., n]``, ``post
    [..., n]``, ``res [..., n, n]`` (:func:`gate`, :func:`h_res`).

    Raises:
        TypeError, ValueError: as :func:`h_res`.
    """
    return gate(formula.h_pre, pre), gate(formula.h_post, post), h_res(formula, res)
