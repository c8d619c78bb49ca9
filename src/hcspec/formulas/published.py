"""Published parameterizations: the step each named parameter layout defines, written plainly
— the kit's oracle for the published family and the reference's published layouts
(:mod:`hcspec.reference.published`) alike.

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
decoder layer, and TileKernels' ``mhc_pre`` references with ``post_mult_value = 2``). Its
record is :func:`hcspec.spec.published.formula` (``"deepseek-v4"``): each field of
:class:`~hcspec.spec.record.Formula` is a place an implementation can depart from it, and
:func:`weights` computes any of them.

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
(plain numbers) may be in the same mapping, else the layout's defaults apply
(:data:`hcspec.spec.published.SETTINGS`). Imports torch and the spec only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from hcspec.formulas import gated as _gated
from hcspec.formulas import mhc
from hcspec.spec.published import (
    DEEPSEEK_V4,
    HC_DYNAMIC,
    HC_STATIC,
    MHC_PAPER,
    PARAMETERIZATIONS,
    QWEN4_EXP,
    SETTINGS,
    SOURCES,
)
from hcspec.spec.published import formula as published_formula
from hcspec.spec.record import Formula

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

    def formula(self, params: Parameters) -> Formula:
        """The step record this layout states at the settings of ``params``
        (:func:`hcspec.spec.published.formula`).

        Raises:
            ValueError: an HC layout (it has no mHC formula), or settings the record rejects.
        """
        found = published_formula(self.name, params)
        if found is None:
            raise ValueError(f"published {self.name} has no mHC formula")
        return found


_KINDS = {DEEPSEEK_V4: "mhc", MHC_PAPER: "mhc", HC_STATIC: "hc-static", HC_DYNAMIC: "hc-dynamic"}
LAYOUTS: dict[str, Layout | _gated.GatedLayout] = {
    **{name: Layout(name, kind, SOURCES[name], SETTINGS[name]) for name, kind in _KINDS.items()},
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


def mhc_layout(name: str) -> Layout:
    """The per-stream :class:`Layout` called ``name`` (every layout but the gated
    ``qwen4-exp``, whose layout is :class:`hcspec.formulas.gated.GatedLayout`).

    Raises:
        ValueError: an unknown name, or the gated layout.
    """
    found = layout(name)
    if not isinstance(found, Layout):
        raise ValueError(f"published {name} has no per-stream layout (an element-wise read): "
                         "use hcspec.formulas.gated")
    return found


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


def deepseek_v4_logits(params: Parameters, x: torch.Tensor, formula: Formula | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pre [B,T,n], post [B,T,n], comb [B,T,n,n])`` logits of the DeepSeek-V4 layout at
    ``x [B,T,n,d]`` (before the gates and Sinkhorn–Knopp: ``mixes · hc_scale + hc_base``),
    with ``formula``'s ``scales`` and ``norm`` (None: the published ones)."""
    lay = mhc_layout(DEEPSEEK_V4)
    f = lay.formula(params) if formula is None else formula
    n = x.shape[-2]
    fn, scale, base = (_tensor(params, k, x) for k in ("hc_fn", "hc_scale", "hc_base"))
    if f.norm == "input":
        mixes = _rms_flat(x, lay.setting(params, "norm_eps")) @ fn.transpose(0, 1)
    else:
        projected = x.reshape(*x.shape[:-2], -1) @ fn.transpose(0, 1)
        mixes = projected * torch.rsqrt(projected.square().mean(dim=-1, keepdim=True)
                                        + lay.setting(params, "norm_eps"))
    s_pre, s_post, s_comb = (scale[i] for i in f.scales)
    pre = mixes[..., :n] * s_pre + base[:n]
    post = mixes[..., n:2 * n] * s_post + base[n:2 * n]
    comb = (mixes[..., 2 * n:] * s_comb + base[2 * n:]).reshape(*mixes.shape[:-1], n, n)
    return pre, post, comb


def _mhc_paper_logits(params: Parameters, x: torch.Tensor,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lay = layout(MHC_PAPER)
    n = x.shape[-2]
    flat = _rms_flat(x, lay.setting(params, "norm_eps"))
    p = {k: _tensor(params, k, x) for k in lay.shapes(n, x.shape[-1])}
    pre = p["alpha_pre"] * (flat @ p["phi_pre"]) + p["b_pre"]
    post = p["alpha_post"] * (flat @ p["phi_post"]) + p["b_post"]
    res = p["alpha_res"] * (flat @ p["phi_res"]).reshape(*flat.shape[:-1], n, n) + p["b_res"]
    return pre, post, res


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
            formula: Formula | None = None) -> Weights:
    """``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` in this project's row form, of
    layout ``name`` with ``params`` at ``x [B, T, n, d]``. For the mHC layouts the weights
    are ``formula``'s (:func:`hcspec.formulas.mhc.weights`) at the layout's logits; None: the
    record the layout states at the settings of ``params`` (:meth:`Layout.formula`); a given
    ``formula`` brings its own eps and iteration count (the ``hc_eps`` and ``sinkhorn_iters``
    settings are then not read). The HC layouts have no formula (``formula`` is ignored).

    Raises:
        ValueError: an unknown layout, or ``qwen4-exp`` (its read is element-wise: no per-stream
            h_pre; :mod:`hcspec.formulas.gated`). KeyError, TypeError: a missing or
            non-tensor entry.
    """
    lay = mhc_layout(name)
    if lay.name == DEEPSEEK_V4:
        f = lay.formula(params) if formula is None else formula
        return mhc.weights(f, *deepseek_v4_logits(params, x, f))
    if lay.name == MHC_PAPER:
        f = lay.formula(params) if formula is None else formula
        return mhc.weights(f, *_mhc_paper_logits(params, x))
    return _hc(params, x, dynamic=lay.name == HC_DYNAMIC)


def step(name: str, params: Parameters, x: torch.Tensor, branch: Branch,
         formula: Formula | None = None) -> torch.Tensor:
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
