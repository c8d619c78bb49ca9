"""Qwen4-exp's gated hyper-connection step in torch: the published layout ``qwen4-exp`` and
the step under a :class:`hcspec.spec.record.GatedFormula` (the record of its degrees of
freedom, re-exported here).

The step (transformers 5.23.0 ``Qwen4ExpTextGatedResidual`` with its decoder layer; spec
theorems ``gated.*`` and ``published.qwen4_exp_step``), per token, streams ``X ∈ R^{n×d}``::

    N_s  = (1 + w_s) ⊙ X_s / √(mean_k X_sk² + ε)                 group RMSNorm, one group a stream
    G    = σ(U silu(D vec(N) / n))                                 element-wise gate, n×d
    x_in = (1/n) Σ_s G_s ⊙ N_s                                     the branch input
    h_post = 2σ(W vec(N) / n)                                      the write, n
    X'   = X + h_post F(x_in)ᵀ                                     H_res = I

Tensors (the checkpoint's own names): ``hc_norm.weight [n·d]`` (w), ``input_mix_weight_down
[r, n·d]`` (D), ``input_mix_weight_up [n·d, r]`` (U), ``block_inject_weight [n, n·d]`` (W);
setting ``norm_eps`` (``rms_norm_eps``). ``r`` (``hc_lowrank``, 320 by default in the config)
is any size. The head's ``hyper_connection_mixer`` is the same module without the write
(:func:`mix`): its tensors are the first three.

Dtype/device: every function computes in the dtype and on the device of ``x`` (parameters are
cast to it), so float64 inputs give the float64 oracle; gradients flow to the given tensors.
This module imports neither :mod:`hcspec.reference` nor :mod:`hcspec.conformance`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import torch
import torch.nn.functional as F

from hcspec.spec.published import QWEN4_EXP, SOURCES
from hcspec.spec.record import GatedFormula as GatedFormula  # the record, read here

Branch = Callable[[torch.Tensor], torch.Tensor]
"""A sublayer ``F``: ``[B, T, d] -> [B, T, d]``."""

Parameters = Mapping[str, object]
"""The layout's tensors (and optionally its settings, plain numbers) by name."""

NORM: Final = "hc_norm.weight"
DOWN: Final = "input_mix_weight_down"
UP: Final = "input_mix_weight_up"
INJECT: Final = "block_inject_weight"
ANY: Final = -1
"""A size in :meth:`GatedLayout.shapes` that may be anything (the low rank r)."""


PUBLISHED_GATED: Final = GatedFormula()
"""The published Qwen4-exp step."""


@dataclass(frozen=True)
class GatedLayout:
    """The ``qwen4-exp`` published layout (the interface of the other layouts:
    ``name``, ``kind``, ``source``, ``settings``, :meth:`shapes`, :meth:`setting`).

    ``kind`` is ``"hc-dynamic"``: input-dependent weights from a normalised state, no
    Sinkhorn–Knopp; the read is element-wise, not per-stream (``Conventions.read``).
    """

    name: str = QWEN4_EXP
    kind: str = "hc-dynamic"
    source: str = SOURCES[QWEN4_EXP]
    settings: Mapping[str, float] = field(default_factory=lambda: {"norm_eps": 1e-6})

    def shapes(self, n: int, d: int) -> dict[str, tuple[int, ...]]:
        """The tensors and their shapes for expansion rate ``n``, hidden size ``d``; the low
        rank r is :data:`ANY`."""
        return {NORM: (n * d,), DOWN: (ANY, n * d), UP: (n * d, ANY), INJECT: (n, n * d)}

    def setting(self, params: Parameters, name: str) -> float:
        """The setting ``name`` from ``params`` when given there, else its default."""
        value = params.get(name, self.settings[name])
        assert isinstance(value, (int, float))
        return float(value)


LAYOUT: Final = GatedLayout()
"""The ``qwen4-exp`` layout."""


def _tensor(params: Parameters, name: str, x: torch.Tensor) -> torch.Tensor:
    value = params[name]
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"published parameter {name!r}: expected a tensor, got "
                        f"{type(value).__name__}")
    return value.to(dtype=x.dtype, device=x.device)


def group_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
                   offset: float = 1.0) -> torch.Tensor:
    """``(offset + w) ⊙ X_s / √(mean_k X_sk² + ε)`` per stream: ``x [..., n, d]``, ``weight
    [n·d]`` -> ``[..., n, d]`` in ``x``'s dtype."""
    n, d = x.shape[-2:]
    scale = (offset + weight.to(x.dtype)).reshape(n, d)
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) * scale


@dataclass(frozen=True)
class GatedParts:
    """The step's intermediate values at one state ``x [B,T,n,d]``.

    Attributes:
        normed: N ``[B,T,n,d]``. gate: G ``[B,T,n,d]`` in (0, 1). x_in: the branch input
        ``[B,T,d]``. h_post: ``[B,T,n]``.
    """

    normed: torch.Tensor
    gate: torch.Tensor
    x_in: torch.Tensor
    h_post: torch.Tensor | None


def parts(params: Parameters, x: torch.Tensor, formula: GatedFormula = PUBLISHED_GATED,
          *, write: bool = True) -> GatedParts:
    """N, G, x_in and h_post of the ``qwen4-exp`` layout at ``x [B,T,n,d]`` with ``formula``'s
    departures (``write=False``: the head mixer, no ``block_inject_weight``, h_post None).

    Raises:
        KeyError, TypeError: a missing or non-tensor entry.
    """
    n, d = x.shape[-2:]
    eps = LAYOUT.setting(params, "norm_eps")
    normed = group_rms_norm(x, _tensor(params, NORM, x), eps, formula.norm_offset)
    source = normed if formula.gate_input == "normalised" else x
    flat = source.reshape(*x.shape[:-2], n * d)
    hidden = flat @ _tensor(params, DOWN, x).transpose(0, 1)
    hidden = F.silu(hidden / n if formula.gate_scale_n else hidden)
    activation = torch.sigmoid if formula.gate_activation == "sigmoid" else torch.tanh
    gate = activation(hidden @ _tensor(params, UP, x).transpose(0, 1)).reshape(x.shape)
    if formula.gate_after_mean:
        x_in = gate.mean(dim=-2) * normed.mean(dim=-2)
    elif formula.streams == "mean":
        x_in = (gate * normed).mean(dim=-2)
    else:
        x_in = (gate * normed).sum(dim=-2)
    if not write:
        return GatedParts(normed, gate, x_in, None)
    written = normed if formula.inject_input == "normalised" else x
    logits = written.reshape(*x.shape[:-2], n * d) @ _tensor(params, INJECT, x).transpose(0, 1)
    logits = logits / n if formula.inject_scale_n else logits
    return GatedParts(normed, gate, x_in, formula.post_multiplier * torch.sigmoid(logits))


def elementwise_h_pre(params: Parameters, x: torch.Tensor,
                      formula: GatedFormula = PUBLISHED_GATED) -> torch.Tensor:
    """The read as element-wise weights on the raw state: ``h_pre [B,T,n,d]`` with
    ``x_in = Σ_s h_pre_s ⊙ X_s``, i.e. ``h_pre = G ⊙ (1 + w) / (n √(mean_k X_sk² + ε))``
    (exact for a ``formula`` with the mean over the streams and the gate before it)."""
    n, d = x.shape[-2:]
    eps = LAYOUT.setting(params, "norm_eps")
    p = parts(params, x, formula)
    scale = (formula.norm_offset + _tensor(params, NORM, x)).reshape(n, d)
    return p.gate * scale * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) / n


def step(params: Parameters, x: torch.Tensor, branch: Branch,
         formula: GatedFormula = PUBLISHED_GATED) -> torch.Tensor:
    """One ``qwen4-exp`` step, ``X' = X + h_post F(x_in)ᵀ``: ``x [B,T,n,d] -> [B,T,n,d]`` in
    ``x``'s dtype; ``branch`` called once on ``x_in [B,T,d]``. Differentiable w.r.t. ``x``,
    ``params`` and the branch.

    Raises:
        as :func:`parts`.
    """
    p = parts(params, x, formula)
    assert p.h_post is not None
    z = branch(p.x_in)
    return x + p.h_post.unsqueeze(-1) * z.unsqueeze(-2)


def mix(params: Parameters, x: torch.Tensor) -> torch.Tensor:
    """The head's ``hyper_connection_mixer``: the published read without the write,
    ``x [B,T,n,d] -> x_in [B,T,d]`` (``block_inject_weight`` not used)."""
    return parts(params, x, write=False).x_in


def check_parameters(params: Parameters, n: int, d: int) -> None:
    """Check that ``params`` holds every ``qwen4-exp`` tensor with its shape (any r, the same
    in ``input_mix_weight_down`` and ``input_mix_weight_up``).

    Raises:
        ValueError: a missing tensor or a wrong shape (named). TypeError: not a tensor.
    """
    for key, shape in LAYOUT.shapes(n, d).items():
        if key not in params:
            raise ValueError(f"published {QWEN4_EXP}: missing tensor {key!r}")
        value = params[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"published {QWEN4_EXP}: {key!r} is a {type(value).__name__}, "
                            "expected a tensor")
        got = tuple(value.shape)
        if len(got) != len(shape) or any(w not in (ANY, g) for w, g in zip(shape, got,
                                                                             strict=True)):
            raise ValueError(f"published {QWEN4_EXP}: {key!r} should be "
                             f"{['r' if s == ANY else s for s in shape]}, got {list(got)}")
    down, up = params[DOWN], params[UP]
    assert isinstance(down, torch.Tensor) and isinstance(up, torch.Tensor)
    if down.shape[0] != up.shape[1]:
        raise ValueError(f"published {QWEN4_EXP}: the low ranks differ, {DOWN} has "
                         f"{down.shape[0]} rows, {UP} {up.shape[1]} columns")
