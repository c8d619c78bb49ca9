"""Log-domain Sinkhorn–Knopp projection onto the doubly stochastic matrices.

Source: mHC arXiv:2512.24880 §4, Eq. 9 — ``M⁰ = exp(H̃_res)``, then ``t_max = 20`` rounds, each a
column normalisation followed by a row normalisation. This module runs the same rounds on
``log M`` with ``logsumexp`` so that no intermediate ``exp`` is ever formed: logits of any finite
size give a finite result (there is no ``exp`` overflow and no all-zero row or column, see below).

Written independently of ``reference/`` for the kit's false-positive check.
"""

from __future__ import annotations

import torch
from torch import Tensor

DEFAULT_ITERATIONS = 20
"""t_max of mHC Eq. 9 (the paper's value)."""


def log_sinkhorn_knopp(logits: Tensor, iterations: int = DEFAULT_ITERATIONS) -> Tensor:
    """Run ``iterations`` column-then-row normalisation rounds on ``log M`` and return ``log H``.

    Shapes: ``logits [..., n, n]`` -> ``[..., n, n]``; every leading axis is an independent
    matrix (normalisation only ever reduces over the two trailing axes). Dtype and device follow
    ``logits``; differentiable (autograd through every round).

    Why nothing can vanish: after a column step every entry is ``≤ 0`` and every column holds a
    ``0``; the following row step subtracts ``logsumexp(row) ≤ max(row) + log n ≤ log n``, so each
    column keeps an entry ``≥ -log n`` and each row one ``≥ -log n`` (its maximum). Hence after any
    number ≥ 1 of rounds every row and column of ``exp`` of the result sums to at least ``1/n``.

    Raises:
        TypeError: if ``logits`` is not a floating tensor or ``iterations`` not an int.
        ValueError: if ``logits`` has fewer than 2 axes, is not square in its last two axes, or
            ``iterations < 1`` (zero rounds would return un-normalised logits).
    """
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits: expected a floating-point torch.Tensor, got {type(logits)!r}"
                        + (f" of dtype {logits.dtype}" if isinstance(logits, Tensor) else ""))
    if logits.ndim < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ValueError(f"logits: expected shape [..., n, n], got {tuple(logits.shape)}")
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise TypeError(f"iterations: expected int, got {type(iterations).__name__}")
    if iterations < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    log_m = logits
    for _ in range(iterations):
        log_m = log_m - torch.logsumexp(log_m, dim=-2, keepdim=True)  # columns sum to 1
        log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)  # rows sum to 1
    return log_m


def sinkhorn_knopp(logits: Tensor, iterations: int = DEFAULT_ITERATIONS) -> Tensor:
    """Doubly stochastic matrix ``SinkhornKnopp(logits)`` (mHC Eq. 9), computed in the log domain.

    Shapes: ``logits [..., n, n]`` -> ``H [..., n, n]`` with ``H ≥ 0``; rows sum to 1 to
    rounding error (the last step normalises rows), columns to 1 within the convergence error of
    ``iterations`` rounds (small for moderate logits, larger for logit spreads of several units).
    Dtype and device follow ``logits``. For ``n = 1`` the result is exactly ``[[1]]``.

    Raises:
        TypeError, ValueError: see :func:`log_sinkhorn_knopp`.
    """
    return torch.exp(log_sinkhorn_knopp(logits, iterations))
