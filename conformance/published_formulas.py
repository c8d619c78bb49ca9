"""Published parameterizations: the step each named parameter layout defines, written plainly
— the kit's oracle for the published family (the reference's published layouts,
:mod:`hcspec.reference.published`, import these formulas from here).

A *published parameterization* is the layout of tensors a checkpoint or a paper gives one
hyper-connected sublayer, and the formulas that turn those tensors and the stream state
``X [B, T, n, d]`` into the per-token weights. Each one maps onto this project's row form
``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` (spec theorems ``published.*``), so one step is
:func:`step`: :func:`weights` then the row form itself.

``deepseek-v4`` (tensors ``hc_fn [(n+2)n, n·d]``, ``hc_scale [3]``, ``hc_base [(n+2)n]``;
settings ``hc_eps``, ``norm_eps``, ``sinkhorn_iters``)::

    mixes = RMSNorm(vec(X); norm_eps) · hc_fnᵀ            (no gain; vec row-major, n·d)
    pre   = σ(mixes[:n] · hc_scale[0] + hc_base[:n]) + hc_eps
    post  = 2 σ(mixes[n:2n] · hc_scale[1] + hc_base[n:2n])
    comb  = SK(softmax(mat(mixes[2n:]) · hc_scale[2] + mat(hc_base[2n:]), axis −1) + hc_eps)
    X'_j  = post_j · F(Σ_i pre_i X_i) + Σ_i comb[i, j] X_i      (h_pre = pre, h_post = post,
                                                                 H_res = combᵀ)

where SK normalises axis −2, then ``sinkhorn_iters − 1`` times axis −1 and axis −2, every
denominator ``sum + hc_eps`` (as transformers 5.23.0 ``DeepseekV4HyperConnection`` with its
decoder layer, and TileKernels' ``mhc_pre`` references with ``post_mult_value = 2``).
:class:`DeepSeekV4Formula` names each place an implementation can depart from it.

``mhc-paper`` (``phi_pre [n·d, n]``, ``phi_post [n·d, n]``, ``phi_res [n·d, n²]``, ``b_pre
[n]``, ``b_post [n]``, ``b_res [n, n]``, scalars ``alpha_pre``, ``alpha_post``,
``alpha_res``; settings ``norm_eps``, ``sinkhorn_iters``): mHC Eq. 5–9, ``H_pre = σ(α_pre x'φ_pre
+ b_pre)``, ``H_post = 2σ(α_post x'φ_post + b_post)``, ``H_res = SK(α_res mat(x'φ_res) +
b_res)`` (``exp``, then column-then-row rounds), ``x' = RMSNorm(vec(X))``; ``h_pre = H_preᵀ``,
``h_post = H_postᵀ``, ``H_res`` itself.

``hc-static`` (``B [n]``, ``A_m [n]``, ``A_r [n, n]``): HC Eq. 1–5, ``h_pre = A_m``, ``h_post
= Bᵀ``, ``H_res = A_rᵀ``.

``hc-dynamic`` (the static three, ``W_beta [d]``, ``W_m [d]``, ``W_r [d, n]``, scalars
``s_alpha``, ``s_beta``; setting ``norm_eps``): HC Eq. 10–13 with ``X̄ = LayerNorm(X)`` per
stream without parameters: ``B(X) = s_β tanh(X̄ W_β)ᵀ + B``, ``A_m(X) = s_α tanh(X̄ W_m) + A_m``,
``A_r(X) = s_α tanh(X̄ W_r) + A_r``, mapped as the static ones.

Dtype/device: every function computes in the dtype and on the device of ``x`` (parameters are
cast to it), so float64 inputs give the float64 oracle the kit compares with; gradients flow
to the given tensors. Parameters are a ``Mapping`` from the layout's names to tensors; settings
(plain numbers) may be in the same mapping, else the layout's defaults apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F

from hcspec.conformance.sinkhorn_formulas import sinkhorn_variant
from hcspec.formulas import gated as _gated
from hcspec.spec.published import (
    DEEPSEEK_V4,
    HC_DYNAMIC,
    HC_STATIC,
    MHC_PAPER,
    PARAMETERIZATIONS,
    QWEN4_EXP,
    SOURCES,
)

Branch = Callable[[torch.Tensor], torch.Tensor]
"""A sublayer ``F``: ``[B, T, d] -> [B, T, d]``."""

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""Per-token weights ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``."""

Parameters = Mapping[str, object]
"""The layout's tensors (and optionally its settings, plain numbers) by name."""


@dataclass(frozen=True)
class Layout:
    """One published parameterization.

    Attributes:
        name: one of :data:`hcspec.spec.published.PARAMETERIZATIONS`.
        kind: the connection kind it is (``"mhc"``, ``"hc-static"``, ``"hc-dynamic"``).
        source: where the formulas come from.
        settings: the settings (numbers) and their published defaults.
    """

    name: str
    kind: str
    source: str
    settings: Mapping[str, float] = field(default_factory=dict)

    def shapes(self, n: int, d: int) -> dict[str, tuple[int, ...]]:
        """The tensors of the layout and their shapes for expansion rate ``n``, hidden size
        ``d``."""
        static = {"B": (n,), "A_m": (n,), "A_r": (n, n)}
        if self.name == DEEPSEEK_V4:
            return {"hc_fn": ((n + 2) * n, n * d), "hc_scale": (3,), "hc_base": ((n + 2) * n,)}
        if self.name == MHC_PAPER:
            return {"phi_pre": (n * d, n), "phi_post": (n * d, n), "phi_res": (n * d, n * n),
                    "b_pre": (n,), "b_post": (n,), "b_res": (n, n), "alpha_pre": (),
                    "alpha_post": (), "alpha_res": ()}
        if self.name == HC_STATIC:
            return static
        return {**static, "W_beta": (d,), "W_m": (d,), "W_r": (d, n), "s_alpha": (),
                "s_beta": ()}

    def setting(self, params: Parameters, name: str) -> float:
        """The setting ``name`` from ``params`` when given there, else its default."""
        value = params.get(name, self.settings[name])
        assert isinstance(value, (int, float))
        return float(value)


LAYOUTS: dict[str, Layout | _gated.GatedLayout] = {
    DEEPSEEK_V4: Layout(DEEPSEEK_V4, "mhc", SOURCES[DEEPSEEK_V4],
                        {"hc_eps": 1e-6, "norm_eps": 1e-6, "sinkhorn_iters": 20}),
    MHC_PAPER: Layout(MHC_PAPER, "mhc", SOURCES[MHC_PAPER],
                      {"norm_eps": 1e-6, "sinkhorn_iters": 20}),
    HC_STATIC: Layout(HC_STATIC, "hc-static", SOURCES[HC_STATIC]),
    HC_DYNAMIC: Layout(HC_DYNAMIC, "hc-dynamic", SOURCES[HC_DYNAMIC], {"norm_eps": 1e-5}),
    QWEN4_EXP: _gated.LAYOUT,  # the gated read: hcspec.formulas.gated
}
assert tuple(LAYOUTS) == PARAMETERIZATIONS


def layout(name: str) -> Layout | _gated.GatedLayout:
    """The :class:`Layout` called ``name``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in LAYOUTS:
        raise ValueError(f"unknown published parameterization {name!r}; "
                         f"known: {', '.join(PARAMETERIZATIONS)}")
    return LAYOUTS[name]


@dataclass(frozen=True)
class DeepSeekV4Formula:
    """The DeepSeek-V4 formulas, with each place an implementation can depart from them as a
    field (the defaults are the published ones).

    Attributes:
        mix: ``"comb_t"`` (``X' = combᵀ X``: ``X'_j = Σ_i comb[i, j] X_i``, published) or
            ``"comb"`` (``X' = comb X``: the orientation slip).
        post_multiplier: ``c`` in ``post = c·σ(·)`` (published 2).
        post_eps: ``hc_eps`` added to ``post`` (published: no).
        pre_eps: ``hc_eps`` added to ``pre`` (published: yes).
        start: the positive map before Sinkhorn–Knopp: ``"softmax"`` (published, along
            axis −1), ``"sigmoid"`` or ``"exp"``.
        count, exact_axis: as :func:`hcspec.conformance.sinkhorn_formulas.sinkhorn_variant`, in
            ``comb``'s own indexing (published ``"rounds_from_softmax"``, ``"columns"``: the
            softmax, a normalisation of axis −2, then (axis −1, axis −2) rounds).
        rounds_delta: added to ``sinkhorn_iters`` (published 0).
        additive_eps, denominator_eps: ``hc_eps`` after the positive map and in every
            denominator (published: both).
        scales: which ``hc_scale`` entry the (pre, post, comb) blocks use (published
            ``(0, 1, 2)``).
        norm: ``"input"`` (the RMS norm of ``vec(X)`` before the projection, published) or
            ``"projection"`` (the RMS norm applied to the projection's output instead).
    """

    mix: Literal["comb_t", "comb"] = "comb_t"
    post_multiplier: float = 2.0
    post_eps: bool = False
    pre_eps: bool = True
    start: Literal["softmax", "sigmoid", "exp"] = "softmax"
    count: Literal["rounds_from_softmax", "rounds", "normalisations"] = "rounds_from_softmax"
    exact_axis: Literal["rows", "columns"] = "columns"
    rounds_delta: int = 0
    additive_eps: bool = True
    denominator_eps: bool = True
    scales: tuple[int, int, int] = (0, 1, 2)
    norm: Literal["input", "projection"] = "input"


PUBLISHED_DEEPSEEK_V4 = DeepSeekV4Formula()


def _tensor(params: Parameters, name: str, x: torch.Tensor) -> torch.Tensor:
    value = params[name]
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"published parameter {name!r}: expected a tensor, got "
                        f"{type(value).__name__}")
    return value.to(dtype=x.dtype, device=x.device)


def check_parameters(name: str, params: Parameters, n: int, d: int) -> None:
    """Check that ``params`` holds every tensor of layout ``name`` with its shape.

    Raises:
        ValueError: an unknown layout, a missing tensor or a wrong shape (named).
        TypeError: a tensor entry that is not a tensor.
    """
    if name == QWEN4_EXP:
        return _gated.check_parameters(params, n, d)
    for key, shape in layout(name).shapes(n, d).items():
        if key not in params:
            raise ValueError(f"published {name}: missing tensor {key!r} {list(shape)}")
        value = params[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"published {name}: {key!r} is a {type(value).__name__}, "
                            "expected a tensor")
        if tuple(value.shape) != shape:
            raise ValueError(f"published {name}: {key!r} should be {list(shape)}, got "
                             f"{list(value.shape)}")


def _rms_flat(x: torch.Tensor, eps: float) -> torch.Tensor:
    flat = x.reshape(*x.shape[:-2], -1)
    return flat * torch.rsqrt(flat.square().mean(dim=-1, keepdim=True) + eps)


def deepseek_v4_parts(params: Parameters, x: torch.Tensor,
                      formula: DeepSeekV4Formula = PUBLISHED_DEEPSEEK_V4,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pre [B,T,n], post [B,T,n], comb [B,T,n,n])`` of the DeepSeek-V4 layout at ``x
    [B,T,n,d]`` (``comb[i, j]``: weight of input stream i in output stream j under the
    published ``mix``), with ``formula``'s departures."""
    lay = layout(DEEPSEEK_V4)
    n = x.shape[-2]
    eps = lay.setting(params, "hc_eps")
    fn, scale, base = (_tensor(params, k, x) for k in ("hc_fn", "hc_scale", "hc_base"))
    if formula.norm == "input":
        mixes = _rms_flat(x, lay.setting(params, "norm_eps")) @ fn.transpose(0, 1)
    else:
        projected = x.reshape(*x.shape[:-2], -1) @ fn.transpose(0, 1)
        mixes = projected * torch.rsqrt(projected.square().mean(dim=-1, keepdim=True)
                                        + lay.setting(params, "norm_eps"))
    s_pre, s_post, s_comb = (scale[i] for i in formula.scales)
    pre = torch.sigmoid(mixes[..., :n] * s_pre + base[:n])
    pre = pre + eps if formula.pre_eps else pre
    post = formula.post_multiplier * torch.sigmoid(mixes[..., n:2 * n] * s_post
                                                   + base[n:2 * n])
    post = post + eps if formula.post_eps else post
    logits = (mixes[..., 2 * n:] * s_comb + base[2 * n:]).reshape(*mixes.shape[:-1], n, n)
    iterations = int(lay.setting(params, "sinkhorn_iters")) + formula.rounds_delta
    count = formula.count
    if count == "rounds_from_softmax" and formula.start != "softmax":
        count = "rounds"
    comb = sinkhorn_variant(logits, max(iterations, 1), start=formula.start, count=count,
                            exact_axis=formula.exact_axis,
                            additive_eps=eps if formula.additive_eps else 0.0,
                            denominator_eps=eps if formula.denominator_eps else 0.0)
    return pre, post, comb


def _mhc_paper(params: Parameters, x: torch.Tensor) -> Weights:
    lay = layout(MHC_PAPER)
    n = x.shape[-2]
    flat = _rms_flat(x, lay.setting(params, "norm_eps"))
    p = {k: _tensor(params, k, x) for k in lay.shapes(n, x.shape[-1])}
    h_pre = torch.sigmoid(p["alpha_pre"] * (flat @ p["phi_pre"]) + p["b_pre"])
    h_post = 2 * torch.sigmoid(p["alpha_post"] * (flat @ p["phi_post"]) + p["b_post"])
    logits = p["alpha_res"] * (flat @ p["phi_res"]).reshape(*flat.shape[:-1], n, n) + p["b_res"]
    H_res = sinkhorn_variant(logits, int(lay.setting(params, "sinkhorn_iters")))
    return h_pre, h_post, H_res


def _hc(params: Parameters, x: torch.Tensor, dynamic: bool) -> Weights:
    batch = x.shape[:-2]
    B, A_m, A_r = (_tensor(params, k, x) for k in ("B", "A_m", "A_r"))
    B, A_m, A_r = B.expand(*batch, -1), A_m.expand(*batch, -1), A_r.expand(*batch, -1, -1)
    if dynamic:
        eps = layout(HC_DYNAMIC).setting(params, "norm_eps")
        x_bar = F.layer_norm(x, (x.shape[-1],), eps=eps)
        W_beta, W_m, W_r, s_alpha, s_beta = (_tensor(params, k, x) for k in (
            "W_beta", "W_m", "W_r", "s_alpha", "s_beta"))
        B = B + s_beta * torch.tanh(x_bar @ W_beta)
        A_m = A_m + s_alpha * torch.tanh(x_bar @ W_m)
        A_r = A_r + s_alpha * torch.tanh(x_bar @ W_r)
    return A_m, B, A_r.transpose(-1, -2)


def weights(name: str, params: Parameters, x: torch.Tensor,
            formula: DeepSeekV4Formula = PUBLISHED_DEEPSEEK_V4) -> Weights:
    """``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` in this project's row form, of
    layout ``name`` with ``params`` at ``x [B, T, n, d]`` (``formula``: DeepSeek-V4 only).

    Raises:
        ValueError: an unknown layout, or ``qwen4-exp`` (its read is element-wise: no per-stream
            h_pre; :mod:`hcspec.formulas.gated`). KeyError, TypeError: a missing or
            non-tensor entry.
    """
    lay = layout(name)
    if lay.name == QWEN4_EXP:
        raise ValueError(f"published {QWEN4_EXP} has no per-stream weights (an element-wise "
                         "read): use hcspec.formulas.gated")
    if lay.name == DEEPSEEK_V4:
        pre, post, comb = deepseek_v4_parts(params, x, formula)
        return pre, post, comb.transpose(-1, -2) if formula.mix == "comb_t" else comb
    if lay.name == MHC_PAPER:
        return _mhc_paper(params, x)
    return _hc(params, x, dynamic=lay.name == HC_DYNAMIC)


def step(name: str, params: Parameters, x: torch.Tensor, branch: Branch,
         formula: DeepSeekV4Formula = PUBLISHED_DEEPSEEK_V4) -> torch.Tensor:
    """One step of layout ``name``: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with
    :func:`weights`; ``x [B,T,n,d] -> [B,T,n,d]`` in ``x``'s dtype; ``branch`` called once on
    ``h_preᵀ X [B,T,d]``. Shapes are not checked beyond :func:`weights`' own (the kit calls it
    with its own branch). Differentiable w.r.t. ``x``, ``params`` and the branch.

    Raises:
        as :func:`weights`; ``qwen4-exp`` is :func:`hcspec.formulas.gated.step`.
    """
    if name == QWEN4_EXP:
        return _gated.step(params, x, branch)
    h_pre, h_post, H_res = weights(name, params, x, formula)
    z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
    mixed = H_res @ x  # a fresh tensor: accumulating in place keeps autograd intact
    return mixed.addcmul_(h_post.unsqueeze(-1), z.unsqueeze(-2))
