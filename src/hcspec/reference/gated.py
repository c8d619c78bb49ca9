"""Qwen4-exp's gated hyper-connection (transformers 5.23.0 ``Qwen4ExpTextGatedResidual``), the
readable reference: the published ``qwen4-exp`` step of :mod:`hcspec.formulas.gated` on the
module's own tensors.

Per token, streams ``X ∈ R^{n×d}`` (spec ``gated.*``, ``published.qwen4_exp_step``)::

    N = group RMSNorm(X) with scale 1 + w,  G = σ(U silu(D vec(N)/n)),  x_in = mean_s(G_s ⊙ N_s)
    h_post = 2σ(W vec(N)/n),  X' = X + h_post F(x_in)ᵀ     (H_res = I: no mixing matrix)

The read is element-wise, so the module reports ``elementwise_weights(x) -> (h_pre
[B,T,n,d], h_post [B,T,n])`` with ``x_in = Σ_s h_pre_s ⊙ X_s`` instead of per-stream
``weights`` (and ``read_map(x) -> (x_in, h_post)``); it declares ``read="elementwise"`` and
``residual_mixing="identity"``.
``reduce`` is the head's ``hyper_connection_mixer`` (the same read, its own tensors, no write);
``expand`` replicates the embedding on every stream (``repeat``).

Dtype/device: float64 to bfloat16, CPU or CUDA; the output has ``x``'s dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from hcspec.formulas import gated as formula

LOWRANK: int = 4
"""The reference's low rank r (the config's ``hc_lowrank`` is 320; any r is the same step)."""


class GatedHyperConnection(nn.Module):
    """One gated hyper-connected sublayer with ``n`` streams of width ``d`` (Qwen4-exp).

    Parameters (the checkpoint's names, dots as underscores): ``hc_norm_weight [n·d]`` (zeros at
    init: scale 1), ``input_mix_weight_down [r, n·d]``, ``input_mix_weight_up [n·d, r]``,
    ``block_inject_weight [n, n·d]`` (normal, std 0.02, as transformers' Linear init), and the
    head mixer's own ``mixer_norm_weight``, ``mixer_down``, ``mixer_up``.

    Raises:
        ValueError: ``n < 2`` (the config refuses ``hc_count <= 1``; the formulas accept n = 1,
            the module mirrors the config unless ``allow_single=True``), or ``d``/``rank`` < 1.
    """

    kind = "hc-dynamic"
    conventions: ClassVar[dict[str, Any]] = {
        "read": "elementwise", "residual_mixing": "identity", "reduce": "learned",
        "published": formula.LAYOUT.name,
        "notes": "Qwen4-exp gated read: x_in = mean_s(G_s ⊙ N_s), h_post = 2σ(W N / n), H_res = I",
    }

    def __init__(self, n: int, d: int, *, rank: int = LOWRANK, eps: float = 1e-6,
                 dtype: torch.dtype = torch.float64, allow_single: bool = True) -> None:
        super().__init__()
        if n < (1 if allow_single else 2) or d < 1 or rank < 1:
            raise ValueError(f"expected n >= {1 if allow_single else 2}, d >= 1, rank >= 1; "
                             f"got n={n}, d={d}, rank={rank}")
        self.n, self.d, self.rank, self.eps = n, d, rank, eps
        nd = n * d

        def normal(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, dtype=dtype) * 0.02)

        self.hc_norm_weight = nn.Parameter(torch.zeros(nd, dtype=dtype))
        self.input_mix_weight_down = normal(rank, nd)
        self.input_mix_weight_up = normal(nd, rank)
        self.block_inject_weight = normal(n, nd)
        self.mixer_norm_weight = nn.Parameter(torch.zeros(nd, dtype=dtype))
        self.mixer_down = normal(rank, nd)
        self.mixer_up = normal(nd, rank)

    def published_parameters(self) -> dict[str, torch.Tensor | float]:
        """The ``qwen4-exp`` tensors (the parameters themselves) and ``norm_eps``."""
        return {formula.NORM: self.hc_norm_weight, formula.DOWN: self.input_mix_weight_down,
                formula.UP: self.input_mix_weight_up, formula.INJECT: self.block_inject_weight,
                "norm_eps": self.eps}

    def load_published(self, params: Mapping[str, object]) -> None:
        """Copy the ``qwen4-exp`` tensors of ``params`` into the parameters (shapes checked).

        Raises:
            ValueError, TypeError: as :func:`hcspec.formulas.gated.check_parameters`; a low
                rank other than this module's.
        """
        formula.check_parameters(params, self.n, self.d)
        mine = self.published_parameters()
        with torch.no_grad():
            for key, value in params.items():
                target = mine.get(key)
                if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor):
                    if target.shape != value.shape:
                        raise ValueError(f"{key}: expected {list(target.shape)}, got "
                                         f"{list(value.shape)}")
                    target.copy_(value)

    def _mixer(self) -> dict[str, object]:
        return {formula.NORM: self.mixer_norm_weight, formula.DOWN: self.mixer_down,
                formula.UP: self.mixer_up, "norm_eps": self.eps}

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() < 3 or tuple(x.shape[-2:]) != (self.n, self.d):
            raise ValueError(f"expected a state [..., n={self.n}, d={self.d}], got "
                             f"{list(x.shape)}")

    def forward(self, x: torch.Tensor, branch: formula.Branch) -> torch.Tensor:
        """``X' = X + h_post F(x_in)ᵀ``: ``x [B,T,n,d] -> [B,T,n,d]``; ``branch`` called once
        on ``x_in [B,T,d]``.

        Raises:
            ValueError: ``x`` is not ``[..., n, d]``.
        """
        self._check(x)
        return formula.step(self.published_parameters(), x, branch)

    def elementwise_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_pre [B,T,n,d], h_post [B,T,n])`` with ``x_in = Σ_s h_pre_s ⊙ X_s`` and
        ``X' = X + h_post x_inᵀ``-style write; differentiable w.r.t. ``x``.

        Raises:
            ValueError: ``x`` is not ``[..., n, d]``.
        """
        self._check(x)
        params = self.published_parameters()
        p = formula.parts(params, x)
        assert p.h_post is not None
        return formula.elementwise_h_pre(params, x), p.h_post

    def read_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_in [B,T,d], h_post [B,T,n])``: the branch input and the write at ``x``.

        Raises:
            ValueError: ``x`` is not ``[..., n, d]``.
        """
        self._check(x)
        p = formula.parts(self.published_parameters(), x)
        assert p.h_post is not None
        return p.x_in, p.h_post

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """``h [B,T,d] -> [B,T,n,d]``, ``h`` on every stream (the model's ``repeat``)."""
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).clone()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The head's ``hyper_connection_mixer``: ``x [B,T,n,d] -> [B,T,d]``, the gated read
        with the mixer's own tensors and no write.

        Raises:
            ValueError: ``x`` is not ``[..., n, d]``.
        """
        self._check(x)
        return formula.mix(self._mixer(), x)


def qwen4_exp(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
              device: torch.device | str = "cpu", seed: int = 0) -> GatedHyperConnection:
    """A fresh :class:`GatedHyperConnection` (the kit's factory form), drawn in float64 from
    ``seed`` on the CPU then cast and moved (``layer_index`` unused: every sublayer alike).

    Raises:
        ValueError: as the constructor.
    """
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        module = GatedHyperConnection(n, d)
    return module.to(dtype=dtype, device=device)
