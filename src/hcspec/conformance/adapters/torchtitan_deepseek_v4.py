"""Adapter for torchtitan's DeepSeek-V4 port (pytorch/torchtitan PR #3634), file
``torchtitan/models/deepseek_v4/mhc.py`` loaded by path from the user's checkout
(``$HC_TORCHTITAN_CHECKOUT``), written against the PR's head commit :data:`WRITTEN_FOR`.
TARGET ``torchtitan:deepseek-v4``.

The file's only project import is ``torchtitan.protocols.module.Module`` (an ``nn.Module`` with a
``Config`` dataclass whose ``build()`` constructs it), which must resolve in the user's
environment (torchtitan installed from the checkout). What it computes (read from the file):

* ``HcPre(x [B, L, n, D]) -> (y [B, L, D], post, comb)``: in float32, ``mixes =
  linear(vec(X), hc_fn)·rsqrt(mean(vec(X)²) + norm_eps)``; ``HcSplitSinkhorn``: ``pre = σ(·) +
  eps``, ``post = 2σ(·)``, ``comb = exp(L − rowmax L)``, then ``sinkhorn_iters`` rounds of row
  then column normalisation, each ``M / (M.sum + eps)`` (the first row normalisation makes the
  softmax; no additive eps); ``y = Σ_i pre_i X_i`` cast back to the state's dtype;
* ``HcPost(x, residual, post, comb) = post ⊗ x + Σ_i comb[i, j] residual_i``, cast to the
  branch output's dtype: ``H_res = combᵀ``, its rows normalised last;
* ``HcHead``: a learned sigmoid-weighted sum of the streams (the model's final reduction).

``DeepSeekV4TransformerBlock.forward`` composes ``residual = x; x, post, comb = hc_pre(x); x =
F(norm(x)); x = hc_post(x, residual, post, comb)`` at both sites; the adapter calls the
package's ``HcPre`` and ``HcPost`` the same way with the kit's branch. Parameters are built by
``Config.build()`` (float32, the model's defaults ``sinkhorn_iters = 20``, ``eps = norm_eps =
1e-6``) and initialised as the model's ``_HC_INIT`` does: ``hc_fn``, ``hc_base`` **and
``hc_scale``** ``~ trunc_normal(std = 0.02)`` (DeepSeek's reference and the other ports start
from ``scale = 1``, ``base = 0``). ``weights`` reads ``pre`` from ``HcPre``'s own
``pre.unsqueeze(-1)`` call. ``layer_index`` has no effect.
"""

from __future__ import annotations

from functools import partial
from types import ModuleType
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._by_path import checkout_file, load_file
from hcspec.conformance.adapters._capture import (
    CallRecorder,
    PackageChanged,
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters.declarations.torchtitan_deepseek_v4 import (
    CHECKOUT_ENV,
    REFERENCE_FILE,
    WRITTEN_FOR,
)
from hcspec.conformance.protocol import Branch, Conventions, Weights

EPS: Final = 1e-6
"""``hc_eps`` and ``norm_eps`` (the model's defaults)."""

SINKHORN_ITERS: Final = 20
"""``sinkhorn_iters`` (the model's default)."""

INIT_STD: Final = 0.02
"""The std of the model's ``_HC_INIT`` (``trunc_normal_``) for ``hc_fn``, ``hc_base`` and
``hc_scale``."""

_PREFIX: Final = "_hcspec_torchtitan_deepseek_v4_mhc_"


def load_reference() -> ModuleType:
    """``mhc.py`` of the checkout named by ``$HC_TORCHTITAN_CHECKOUT``, loaded by path (cached).

    Raises:
        ImportError: the variable is unset, the file is not there, or its import of
            ``torchtitan.protocols.module`` fails.
    """
    return load_file(_PREFIX, str(checkout_file(CHECKOUT_ENV, REFERENCE_FILE, "torchtitan")))


class TorchtitanConnection(nn.Module):
    """One site's ``HcPre`` with the block's ``HcPost`` and the model's ``HcHead`` beside it.

    Attributes:
        pre: ``HcPre`` (``hc_fn [(2+n)n, n·D]``, ``hc_base [(2+n)n]``, ``hc_scale [3]``).
        post: ``HcPost`` (no parameters).
        head: ``HcHead`` (``hc_fn [n, n·D]``, ``hc_base [n]``, ``hc_scale [1]``).
    """

    def __init__(self, ref: ModuleType, n: int, d: int) -> None:
        super().__init__()
        self.pre = ref.HcPre.Config(hc_mult=n, dim=d, sinkhorn_iters=SINKHORN_ITERS, eps=EPS,
                                    norm_eps=EPS).build()
        self.post = ref.HcPost.Config().build()
        self.head = ref.HcHead.Config(hc_mult=n, dim=d, norm_eps=EPS, eps=EPS).build()
        init = partial(nn.init.trunc_normal_, std=INIT_STD)
        with torch.no_grad():
            for module in (self.pre, self.head):
                for name in ("hc_fn", "hc_base", "hc_scale"):
                    init(getattr(module, name))


def conventions() -> Conventions:
    """What the port declares (see the module docstring)."""
    return Conventions(
        compute_dtype=torch.float32, reduce="learned", sinkhorn_iterations=SINKHORN_ITERS,
        sinkhorn_variant="exp", sinkhorn_iterations_count="rounds",
        sinkhorn_denominator_eps=EPS, sinkhorn_exact_axis="rows", h_pre_eps=EPS,
        notes=(f"torchtitan {REFERENCE_FILE} (PR #3634 at {WRITTEN_FOR[:12]}, loaded by path) "
               "composed as DeepSeekV4TransformerBlock: HcPre, F, HcPost (X' = post·F + "
               "combᵀ X, cast to F's dtype); float32 coefficients from "
               "linear(vec(X))·rsqrt(mean(vec(X)²) + eps); pre = σ + eps, post = 2σ; comb = "
               "exp(L − rowmax) then 20 (row, column) rounds, eps in the denominators only; "
               "reduce = HcHead (learned); hc_fn, hc_base, hc_scale ~ trunc_normal(0.02)"),
    )


class TorchtitanDeepseekV4(WrapsModule):
    """``HcPre`` + branch + ``HcPost`` as a kit impl (``self.module``:
    :class:`TorchtitanConnection`).

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]`` in the branch output's dtype;
    ``weights(x)`` in ``x``'s dtype (``H_res = combᵀ``); ``expand`` replicates (the model's
    ``h.unsqueeze(2).repeat``); ``reduce`` is ``HcHead``.

    Raises:
        ValueError: (from the methods) ``x`` not ``[B, T, n, d]``; a branch output of another
            shape.
    """

    kind: str = "mhc"

    def __init__(self, module: TorchtitanConnection, n: int, d: int) -> None:
        self.module: Any = module
        self.n, self.d = n, d
        self.conventions = conventions()

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``HcPost(F(y), x, post, comb)`` with ``(y, post, comb) = HcPre(x)``."""
        check_state(x, self.n, self.d)
        y, post, comb = self.module.pre(x)
        out: torch.Tensor = self.module.post(check_branch_output(branch(y), y), x, post, comb)
        return out

    def weights(self, x: torch.Tensor) -> Weights:
        """``(pre, post, combᵀ)`` as ``HcPre`` computes them at ``x``, in ``x``'s dtype.

        Raises:
            PackageChanged: ``HcPre.forward`` no longer collapses with one
                ``pre.unsqueeze(-1)`` of a ``[B, T, n]`` tensor.
        """
        check_state(x, self.n, self.d)
        with CallRecorder((torch.Tensor.unsqueeze,)) as recorder:
            _, post, comb = self.module.pre(x)
        pres = [c.args[0] for c in recorder.of(torch.Tensor.unsqueeze)
                if isinstance(c.args[0], torch.Tensor) and c.args[0].shape == x.shape[:3]
                and c.args[1:] == (-1,)]
        if len(pres) != 1:
            raise PackageChanged(f"torchtitan HcPre: expected one pre.unsqueeze(-1) (adapter "
                                 f"written for {WRITTEN_FOR[:12]}); saw {len(pres)}")
        return (pres[0].to(x.dtype), post.to(x.dtype), comb.transpose(-1, -2).to(x.dtype))

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into the n streams.

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(2).repeat(1, 1, self.n, 1)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """``HcHead(x) -> [B, T, d]`` (learned)."""
        check_state(x, self.n, self.d)
        out: torch.Tensor = self.module.head(x)
        return out


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> TorchtitanDeepseekV4:
    """Factory (kit target form): torchtitan's DeepSeek-V4 ``HcPre``/``HcPost``/``HcHead`` from
    ``$HC_TORCHTITAN_CHECKOUT``; parameters float32 whatever ``dtype`` (``HcPre`` upcasts
    them).

    Raises:
        ImportError: the file cannot be found or imported (see :func:`load_reference`).
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    del dtype
    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if layer_index < 0:
        raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
    ref = load_reference()
    with seeded(seed, device):
        module = TorchtitanConnection(ref, n, d)
    return TorchtitanDeepseekV4(module.to(device), n, d)
