"""The Sinkhorn–Knopp variants as formulas (spec ``mhc.sinkhorn_variants``), in the plain
domain, for checking a target's ``H_res`` at identical logits, and the fixed-point gradient of
the Sinkhorn limit (spec ``sinkhorn.implicit_gradient``).

A variant is a :class:`~hcspec.spec.record.SinkhornSpec`; :func:`sinkhorn_variant` applies
one. The variant family takes its expected values from here, and the reference
(:mod:`hcspec.reference.sinkhorn`, :mod:`hcspec.reference.published`) uses these formulas too,
so the kit never takes an expected value from the reference. Imports torch and the spec's
record only.
"""

from __future__ import annotations

import math
from typing import Final

import torch

from hcspec.spec.record import AXES, COUNTS, STARTS, Axis, Count, SinkhornSpec, Start

MHC_PAPER: Final = SinkhornSpec()
"""The mHC paper's variant (Eq. 9): ``exp``, column then row normalisation, no eps, 20 rounds
(undeclared: :data:`hcspec.spec.record.DEFAULT_ITERATIONS`)."""


def _positive_int(name: str, value: object) -> int:
    """``value`` if it is an ``int`` ≥ 1 (``bool`` excluded).

    Raises:
        ValueError: otherwise; the message names ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_arguments(logits: object, iterations: object) -> int:
    """Validate a Sinkhorn–Knopp call's arguments; return ``iterations``.

    Raises:
        TypeError: ``logits`` is not a floating-point tensor.
        ValueError: ``logits`` is not at least 2-D with square trailing axes, or
            ``iterations`` is not an integer ≥ 1.
    """
    count = _positive_int("iterations", iterations)
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point torch.Tensor, got {logits!r:.80}")
    if logits.dim() < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ValueError(f"expected logits of shape [..., n, n], got {tuple(logits.shape)}")
    return count


def normalisation_order(iterations: int, count: Count = "rounds", exact_axis: Axis = "rows",
                        start: Start = "exp") -> tuple[Axis, ...]:
    """The axes normalised after the positive map, in order, ending with ``exact_axis``.

    ``"rounds"``: ``iterations`` rounds, each the other axis then ``exact_axis`` (mHC Eq. 9:
    columns then rows for ``exact_axis="rows"``). ``"rounds_from_softmax"`` (``start`` must be
    ``"softmax"``): the softmax is the first normalisation of the first round, so ``2t − 1``
    follow (DeepSeek-V4). ``"normalisations"``: ``iterations`` normalisations in all, the
    softmax counting as the first one.

    Raises:
        ValueError: ``iterations`` not an integer ≥ 1, an unknown ``count``/``exact_axis``, or
            ``"rounds_from_softmax"`` without ``start="softmax"``.
    """
    t = _positive_int("iterations", iterations)
    if count not in COUNTS or exact_axis not in AXES or start not in STARTS:
        raise ValueError(f"unknown count/exact_axis/start {count!r}/{exact_axis!r}/{start!r}")
    if count == "rounds_from_softmax" and start != "softmax":
        raise ValueError("count 'rounds_from_softmax' needs start='softmax'")
    other: Axis = "columns" if exact_axis == "rows" else "rows"
    if count == "rounds":
        total = 2 * t
    elif count == "rounds_from_softmax":
        total = 2 * t - 1
    else:
        total = t - 1 if start == "softmax" else t
    # alternate, ending with the exact axis
    return tuple(exact_axis if (total - k) % 2 == 1 else other for k in range(total))


def softmax_axis(count: Count, exact_axis: Axis, iterations: int) -> Axis:
    """The axis the ``"softmax"`` start normalises: the one the alternation would normalise
    just before the first of :func:`normalisation_order` (so softmax and the rounds
    alternate)."""
    order = normalisation_order(iterations, count, exact_axis, "softmax")
    other: Axis = "columns" if exact_axis == "rows" else "rows"
    if not order:
        return exact_axis
    return other if order[0] == exact_axis else exact_axis


def positive_start(logits: torch.Tensor, start: Start = "exp", axis: Axis = "columns",
                   additive_eps: float = 0.0) -> torch.Tensor:
    """``M⁰``: ``exp(H̃)`` (mHC Eq. 9), ``softmax(H̃)`` along ``axis`` (DeepSeek-V4: the
    rows), or ``σ(H̃)``; plus ``additive_eps`` on every entry. ``logits [..., n, n]``, same
    dtype and device. ``exp`` is computed shifted by the matrix's maximum when
    ``additive_eps == 0`` (the alternating normalisations are invariant to that scale)."""
    if start == "exp":
        if additive_eps == 0.0:
            shift = logits.amax(dim=(-2, -1), keepdim=True)
            return torch.exp(logits - shift)
        return torch.exp(logits) + additive_eps
    if start == "softmax":
        return torch.softmax(logits, dim=-1 if axis == "rows" else -2) + additive_eps
    if start == "sigmoid":
        return torch.sigmoid(logits) + additive_eps
    raise ValueError(f"start: expected one of {STARTS}, got {start!r}")


def normalise(M: torch.Tensor, axis: Axis, eps: float = 0.0) -> torch.Tensor:
    """``T_r^ε`` (``axis="rows"``: each row divided by its sum + ε) or ``T_c^ε`` (columns);
    ε = 0 is the paper's step (spec ``mhc.sinkhorn_variants``)."""
    dim = -1 if axis == "rows" else -2
    return M / (M.sum(dim=dim, keepdim=True) + eps)


def sinkhorn_variant(logits: torch.Tensor, spec: SinkhornSpec = MHC_PAPER) -> torch.Tensor:
    """The Sinkhorn–Knopp variant ``spec``, as the formula the spec states
    (``mhc.sinkhorn_variants``): ``M⁰ =`` :func:`positive_start`, then the normalisations of
    :func:`normalisation_order`, each dividing by the axis sum plus ``spec.denominator_eps``;
    ``spec.effective_iterations`` counted as ``spec.count`` says.

    The default is the mHC paper (Eq. 9: ``exp``, 20 rounds of column then row
    normalisation); ``SinkhornSpec("softmax", "rounds_from_softmax", "columns", ε, ε, t)`` is
    DeepSeek-V4's ``softmax(H̃, rows) + ε`` followed by a column step and ``t − 1`` (row,
    column) rounds.

    Computed in the plain domain in the dtype of ``logits`` (the kit calls it in float64 on
    moderate logits; :func:`hcspec.reference.sinkhorn.sinkhorn_knopp` is the overflow-safe
    form of the default).
    Shapes: ``[..., n, n] -> [..., n, n]``. Differentiable (autograd through every step).

    Raises:
        TypeError, ValueError: as :func:`check_arguments`.
    """
    iterations = check_arguments(logits, spec.effective_iterations)
    order = normalisation_order(iterations, spec.count, spec.exact_axis, spec.start)
    axis = softmax_axis(spec.count, spec.exact_axis, iterations)
    M = positive_start(logits, spec.start, axis, spec.additive_eps)
    for step in order:
        M = normalise(M, step, spec.denominator_eps)
    return M


def fixed_point_vjp(H: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """The vector–Jacobian product of the Sinkhorn–Knopp *limit* w.r.t. ``log M⁰``, by
    implicit differentiation at the fixed point ``H = diag(u) M⁰ diag(v)`` (``H 1 = 1``,
    ``Hᵀ 1 = 1``): with ``R = H ⊙ G``, ``r = R 1``, ``c = Rᵀ 1`` and ``(α, β)`` solving
    ``α + H β = r``, ``Hᵀ α + β = c``, the gradient is ``H ⊙ (G − α 1ᵀ − 1 βᵀ)``
    (spec ``sinkhorn.implicit_gradient``).

    The system is singular along ``(1, −1)`` for a doubly stochastic ``H``; its right-hand
    side is orthogonal to that direction, so it is solved with that direction's projector
    added (which leaves ``α_i + β_j`` unchanged). Evaluated at a truncated iterate ``H`` (not
    exactly doubly stochastic) it is the fixed-point gradient at that point, as implicit
    backwards compute it.

    Shapes: ``H, G [..., n, n] -> [..., n, n]``, in their dtype and device.
    """
    n = H.shape[-1]
    R = H * G
    rhs = torch.cat([R.sum(-1), R.sum(-2)], dim=-1).unsqueeze(-1)  # [..., 2n, 1]
    eye = torch.eye(n, dtype=H.dtype, device=H.device).expand(H.shape)
    A = torch.cat([torch.cat([eye, H], dim=-1), torch.cat([H.transpose(-1, -2), eye], dim=-1)],
                  dim=-2)
    v = torch.cat([torch.ones(n, dtype=H.dtype, device=H.device),
                   -torch.ones(n, dtype=H.dtype, device=H.device)]) / math.sqrt(2 * n)
    sol = torch.linalg.solve(A + v.unsqueeze(-1) * v, rhs).squeeze(-1)
    alpha, beta = sol[..., :n], sol[..., n:]
    grad: torch.Tensor = H * (G - alpha.unsqueeze(-1) - beta.unsqueeze(-2))
    return grad
