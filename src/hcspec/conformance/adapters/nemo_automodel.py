"""Adapters for NeMo Automodel (PyPI ``nemo-automodel``, import name ``nemo_automodel``), written
against version :data:`WRITTEN_FOR`: its DeepSeek-V4 and DeepSeek-V4.1 hyper-connections.
TARGETs ``nemo_automodel:deepseek-v4`` and ``nemo_automodel:deepseek-v41``.

nemo-automodel 0.7.0 installs with ``--no-deps``; its model packages import transformers
(:data:`~hcspec.conformance.adapters.declarations.nemo_automodel.TRANSFORMERS_PIN`, the release
it pins) and nothing else that a CPU lacks. Both targets build the package's own modules from
its defaults (``hc_sinkhorn_iters = 20``, ``hc_eps = 1e-6``), initialised as the model does
(``fn ~ N(0, initializer_range = 0.02)``, ``base = 0``, ``scale = 1``) under the factory's seed,
parameters kept in float32 (the models' ``_keep_in_fp32_modules``), ``torch`` Sinkhorn backend
(the TileKernels one needs a GPU). ``layer_index`` has no effect (no layer-dependent init).

**DeepSeek-V4** (``components/models/deepseek_v4``): ``DeepseekV4HyperConnection(x)`` returns
``(pre, post, comb)``, all float32, from an unweighted RMS norm of ``vec(X)`` (eps
``rms_norm_eps = 1e-6``): ``pre = σ(·) + eps``, ``post = 2σ(·)``, ``comb = softmax(L, -1) +
eps``, a column normalisation, then ``iters − 1`` (row, column) rounds, every denominator
``+ eps``. ``DeepseekV4Block.forward`` composes (both sites alike)::

    collapsed = (pre.unsqueeze(-1) * x).sum(dim=2).to(x.dtype)
    x' = post.to(dtype).unsqueeze(-1) * F(collapsed).unsqueeze(-2)
         + torch.matmul(comb.transpose(-1, -2).to(dtype), x)

so ``H_res = combᵀ`` (``comb="source_target"``), composed in the state's dtype. The factory
checks that the block's source still reads so (:class:`PackageChanged` otherwise), and
``forward`` runs ``DeepseekV4Block.forward`` itself (:func:`v4_block_of`: the connection at
its attention site, the kit's branch as attention, the FFN site the identity step), so the
orientation the kit sees is the block's own. ``reduce``
is the model's ``DeepseekV4HyperHead`` (learned). The target declares DeepSeek-V4's published
layout (``conventions.published = "deepseek-v4"``): the module's ``fn`` / ``scale`` / ``base``
are a checkpoint's ``hc_{attn,ffn}_fn`` / ``_scale`` / ``_base`` (:data:`V4_PUBLISHED`),
offered by ``published_parameters()`` and set by ``load_published``.

**DeepSeek-V4.1** (``components/models/deepseek_v41``, "single-pass" mHC, the technical
report's §2.4.1): ``DeepseekV41HyperConnection(x)`` returns ``DeepseekV41Mix(pre, post, comb)``
with the same formulas, computed as ``linear(vec(X), fn)·rsqrt(mean(vec(X)²) + rms_norm_eps)``
(``rms_norm_eps = 1e-20``, the V4.1 config default) and ``addcmul(base, ·, scale)``; the block
composes with the class's own static methods ``collapse(x, pre_mix)`` (in float32, cast back)
and ``expand(F, x, mix)`` (``X'_j = post_j F + Σ_i comb[i, j] X_i`` in float32 for a bfloat16
state, cast to ``F``'s dtype), which the adapter calls. The block collapses each sublayer's
input with the pre-mix **carried from the previous sublayer** (the model starts with the
one-hot pre-mix that reads stream 0) and hands its own ``pre`` on to the next sublayer:

* the single-step impl (the factory's) is one sublayer with no carried state: it collapses with
  the ``pre`` its module computes from its own input (``Stack.sublayer(k)`` of the stack
  contract); ``reduce`` is the model's final ``collapse`` with that ``pre`` (learned);
* ``impl.stack(L)`` runs L consecutive sublayers exactly as the model chains them (the attention
  and FFN sites of a block, and block to block, compose alike), sublayer 0 reading with the
  model's initial one-hot pre-mix, sublayer k with sublayer k−1's ``pre``; ``weights`` reports
  the coefficients each sublayer used, the carried ``h_pre`` included.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import (
    PackageChanged,
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters.declarations.nemo_automodel import WRITTEN_FOR
from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    LayerStep,
    PublishedTensors,
    identity_site,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions, Factory, Weights

HC_EPS: Final = 1e-6
"""``hc_eps``: both configs' default."""

SINKHORN_ITERS: Final = 20
"""``hc_sinkhorn_iters``: both configs' default."""

V4_RMS_NORM_EPS: Final = 1e-6
"""``DeepseekV4Config.rms_norm_eps``'s default (the eps of the coefficients' RMS norm)."""

V41_RMS_NORM_EPS: Final = 1e-20
"""``DeepseekV41TextConfig.rms_norm_eps``'s default."""

INIT_STD: Final = 0.02
"""``initializer_range``: both configs' default, the std the models initialise ``fn`` with."""

_MODELS: Final = "nemo_automodel.components.models"

SubBranch = Callable[[torch.Tensor], torch.Tensor]


def _module(name: str) -> Any:
    return importlib.import_module(f"{_MODELS}.{name}")


def _check_source(cls: Any, needles: Sequence[str]) -> None:
    """Raise :class:`PackageChanged` unless ``cls.forward``'s source holds every needle."""
    source = inspect.getsource(cls.forward)
    missing = [needle for needle in needles if needle not in source]
    if missing:
        raise PackageChanged(
            f"nemo-automodel {cls.__name__}.forward no longer composes as in {WRITTEN_FOR} "
            f"(adapter written for that version): not found: {missing}")


# --- DeepSeek-V4 -------------------------------------------------------------------------------
V4_BLOCK_NEEDLES: Final = (
    "collapsed = (pre.unsqueeze(-1) * hidden_streams).sum(dim=2).to(hidden_streams.dtype)",
    "post.to(dtype).unsqueeze(-1) * attn_out.unsqueeze(-2) + torch.matmul(",
    "comb.transpose(-1, -2).to(dtype), hidden_streams",
)
"""What ``DeepseekV4Block.forward`` must contain for :func:`decompose_v4` and the
``source_target`` composition to be the block's."""


class V4Connection(nn.Module):
    """One ``DeepseekV4HyperConnection`` with the model's ``DeepseekV4HyperHead`` beside it.

    Attributes:
        hc: ``DeepseekV4HyperConnection`` (parameters ``fn [(2+n)n, n·d]``, ``base [(2+n)n]``,
            ``scale [3]``, float32).
        head: ``DeepseekV4HyperHead`` (``hc_fn [n, n·d]``, ``hc_base [n]``, ``hc_scale [1]``).
    """

    def __init__(self, n: int, d: int) -> None:
        layers = _module("deepseek_v4.layers")
        _check_source(_module("deepseek_v4.model").DeepseekV4Block, V4_BLOCK_NEEDLES)
        super().__init__()
        self.hc = layers.DeepseekV4HyperConnection(
            hc_mult=n, hidden_size=d, hc_sinkhorn_iters=SINKHORN_ITERS, hc_eps=HC_EPS,
            rms_norm_eps=V4_RMS_NORM_EPS, sinkhorn_backend="torch")
        self.head = layers.DeepseekV4HyperHead(
            hc_mult=n, hidden_size=d, hc_eps=HC_EPS, rms_norm_eps=V4_RMS_NORM_EPS)
        self.hc.init_weights(INIT_STD)
        self.head.init_weights(INIT_STD)


def _build_v4(n: int, d: int, layer_index: int) -> nn.Module:
    del layer_index  # no layer-dependent init
    return V4Connection(n, d)


def decompose_v4(module: Any, x: torch.Tensor) -> Decomposition:
    """``DeepseekV4HyperConnection``'s ``(pre, post, comb)`` at ``x [B, T, n, d]`` and the branch
    input computed as ``DeepseekV4Block.forward`` does (``(pre ⊙ x).sum(2)`` cast to ``x``'s
    dtype)."""
    pre, post, comb = module.hc(x)
    collapsed = (pre.unsqueeze(-1) * x).sum(dim=2).to(x.dtype)
    return Decomposition(pre=pre, post=post, comb=comb, collapsed=collapsed)


def _v4_head(module: Any, x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = module.head(x)
    return out


def v4_conventions() -> Conventions:
    """What nemo-automodel's DeepSeek-V4 connection declares (see the module docstring)."""
    return Conventions(
        compute_dtype=torch.float32, reduce="learned", sinkhorn_iterations=SINKHORN_ITERS,
        sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
        sinkhorn_additive_eps=HC_EPS, sinkhorn_denominator_eps=HC_EPS,
        sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        notes=(f"nemo-automodel {WRITTEN_FOR} DeepseekV4HyperConnection composed as "
               "DeepseekV4Block does: X' = post·F + combᵀ X (H_res = combᵀ; post, comb cast "
               "to the state dtype); comb = softmax(L, -1) + eps, a column normalisation, "
               "then iters − 1 (row, column) rounds with eps in the denominators; "
               "pre = σ + eps, post = 2σ; weights in float32 from an unweighted RMS norm of "
               "vec(X); reduce = DeepseekV4HyperHead (learned); parameters float32"))


class _BranchAttention(nn.Module):
    """``DeepseekV4Block``'s attention replaced by the kit's branch, which reaches it through
    the block's ``**attn_kwargs`` (``hc_branch``); returns ``(output, None)`` as the package's
    attention does."""

    def forward(self, hidden_states: torch.Tensor, *args: Any,
                hc_branch: Callable[[torch.Tensor], torch.Tensor], **kwargs: Any
                ) -> tuple[torch.Tensor, None]:
        return hc_branch(hidden_states), None


class _ZeroFFN(nn.Module):
    """``DeepseekV4Block``'s MoE replaced by zero (no ``gate``: no routing context is set)."""

    def forward(self, x: torch.Tensor, padding_mask: Any = None) -> torch.Tensor:
        return torch.zeros_like(x)


class _IdentityConnection(nn.Module):
    """A ``(pre, post, comb)`` connection that, with a zero FFN, leaves the streams exactly
    unchanged (:func:`~hcspec.conformance.adapters.deepseek_v4_style.identity_site`)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        site = identity_site(x)
        return site.pre, site.post, site.comb


def v4_block_of(module: Any) -> LayerStep:
    """Compose through the package's own ``DeepseekV4Block.forward``: an instance made without
    its ``__init__`` whose ``attn_hc`` is ``module.hc``, attention the kit's branch (handed in
    through the block's ``**attn_kwargs``), norms the identity, ``ffn_hc`` the identity site
    and FFN zero; the block's output is then its attention site's step, with the block's own
    orientation (the ``decoder_layer`` of
    :func:`~hcspec.conformance.adapters.deepseek_v4_style.v4_style_target`)."""
    block_class = _module("deepseek_v4.model").DeepseekV4Block
    block = nn.Module.__new__(block_class)
    nn.Module.__init__(block)
    block.attn_hc, block.ffn_hc = module.hc, _IdentityConnection()
    block.self_attn, block.mlp = _BranchAttention(), _ZeroFFN()
    block.input_layernorm = nn.Identity()
    block.post_attention_layernorm = nn.Identity()
    block.is_hash_routing_layer = False

    def step(x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        out: torch.Tensor = block(x, position_embeddings=None, hc_branch=branch)
        return out
    return step


def _v4_settings(module: Any) -> dict[str, float]:
    return {"hc_eps": float(module.hc.hc_eps), "norm_eps": float(module.hc.norm_eps),
            "sinkhorn_iters": int(module.hc.hc_sinkhorn_iters)}


V4_PUBLISHED: Final = PublishedTensors(
    "deepseek-v4", {"hc_fn": "hc.fn", "hc_scale": "hc.scale", "hc_base": "hc.base"},
    _v4_settings)
"""DeepSeek-V4's published layout in ``DeepseekV4HyperConnection``: a checkpoint's
``layers.{i}.hc_attn_fn`` / ``hc_attn_scale`` / ``hc_attn_base`` (and ``hc_ffn_*``) are its
``fn`` / ``scale`` / ``base`` (the package's ``DeepSeekV4StateDictAdapter.from_hf`` renames
them to ``model.layers.{i}.attn_hc.{fn,scale,base}``); the settings are the module's
``hc_eps``, ``norm_eps`` (the config's ``rms_norm_eps``) and ``hc_sinkhorn_iters``."""


def deepseek_v4_factory(build: Callable[[int, int, int], nn.Module] | None = None) -> Factory:
    """The kit factory of ``nemo_automodel:deepseek-v4`` (built lazily: the package is
    imported when the factory builds its first impl). It declares the published
    ``deepseek-v4`` layout (:data:`V4_PUBLISHED`). ``build`` (``build(n, d, layer_index) ->``
    a module with ``.hc``, a ``DeepseekV4HyperConnection``, and ``.head``) replaces the
    package's freshly initialised module: a test hands in the modules NeMo's own checkpoint
    loader filled."""
    return v4_style_target(build or _build_v4, decompose_v4, comb="source_target",
                           conventions=v4_conventions(), keep_float32=True, reduce=_v4_head,
                           published=V4_PUBLISHED, decoder_layer=v4_block_of)


def make_deepseek_v4(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                     device: str = "cpu", seed: int = 0) -> Any:
    """Factory (kit target form) for nemo-automodel's ``DeepseekV4HyperConnection`` with
    ``DeepseekV4Block``'s composition and ``DeepseekV4HyperHead`` as ``reduce``.

    Raises:
        ImportError: nemo-automodel (or the transformers it imports) is not installed.
        PackageChanged: ``DeepseekV4Block.forward`` composes otherwise (another version).
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    return deepseek_v4_factory()(n, d, layer_index=layer_index, dtype=dtype, device=device,
                                 seed=seed)


# --- DeepSeek-V4.1 -----------------------------------------------------------------------------
V41_BLOCK_NEEDLES: Final = (
    "attn_mix = self.attn_hc(hidden_states)",
    "collapsed = self.attn_hc.collapse(hidden_states, pre_mix)",
    "hidden_states = self.attn_hc.expand(attended.hidden_states, hidden_states, attn_mix)",
    "ffn_mix = self.ffn_hc(hidden_states)",
    "collapsed = self.ffn_hc.collapse(hidden_states, attn_mix.pre)",
    "hidden_states = self.ffn_hc.expand(output, hidden_states, ffn_mix)",
    "return hidden_states, ffn_mix.pre, attended.state",
)
"""What ``DeepseekV41Block.forward`` must contain for the single-pass chaining of
:class:`V41Stack` to be the block's."""

V41_MODEL_NEEDLES: Final = (
    "pre_mix[..., 0] = 1",
    "hidden_states = DeepseekV41HyperConnection.collapse(hidden_states, pre_mix)",
)
"""What ``DeepseekV41Model.forward`` must contain: the initial one-hot pre-mix and the final
collapse with the last carried one."""


def _v41_classes() -> tuple[Any, Any]:
    model = _module("deepseek_v41.model")
    _check_source(model.DeepseekV41Block, V41_BLOCK_NEEDLES)
    _check_source(model.DeepseekV41Model, V41_MODEL_NEEDLES)
    layers = _module("deepseek_v41.layers")
    config = _module("deepseek_v41.config")
    return layers.DeepseekV41HyperConnection, config.DeepseekV41TextConfig


def build_v41_connection(n: int, d: int) -> nn.Module:
    """A ``DeepseekV41HyperConnection`` from ``DeepseekV41TextConfig(hidden_size=d, hc_mult=n)``
    (its defaults otherwise), initialised by its own constructor (``reset_parameters``) from
    torch's global generator; float32 parameters."""
    connection_class, config_class = _v41_classes()
    module: nn.Module = connection_class(config_class(hidden_size=d, hc_mult=n),
                                         sinkhorn_backend="torch")
    return module


def v41_conventions() -> Conventions:
    """What one nemo-automodel DeepSeek-V4.1 sublayer declares (see the module docstring)."""
    return Conventions(
        compute_dtype=torch.float32, reduce="learned", sinkhorn_iterations=SINKHORN_ITERS,
        sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
        sinkhorn_additive_eps=HC_EPS, sinkhorn_denominator_eps=HC_EPS,
        sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        notes=(f"nemo-automodel {WRITTEN_FOR} DeepseekV41HyperConnection with its own "
               "collapse (float32) and expand (X'_j = post_j F + Σ_i comb[i, j] X_i, "
               "H_res = combᵀ); one sublayer collapses with its own pre (the model carries the "
               "previous sublayer's: see the stack capability); comb = softmax(L, -1) + eps, "
               "a column normalisation, then iters − 1 (row, column) rounds with eps in the "
               "denominators; pre = σ + eps, post = 2σ; weights in float32 from "
               "linear(vec(X))·rsqrt(mean(vec(X)²) + 1e-20); reduce = the model's final "
               "collapse with pre (learned); parameters float32"))


def _weights_of(mix: Any, pre: torch.Tensor, dtype: torch.dtype) -> Weights:
    return pre.to(dtype), mix.post.to(dtype), mix.comb.transpose(-1, -2).to(dtype)


class V41Connection(WrapsModule):
    """One DeepSeek-V4.1 sublayer with no carried state, as a kit impl.

    ``self.module`` is the package's ``DeepseekV41HyperConnection`` (parameters ``fn
    [(2+n)n, n·d]``, ``base [(2+n)n]``, ``scale [3]``, float32). Shapes: ``forward(x [B,T,n,d],
    branch) -> [B,T,n,d]`` (the branch output's dtype, as ``expand`` returns), ``weights(x) ->
    (h_pre, h_post, H_res)`` in ``x``'s dtype (``H_res = combᵀ``), ``expand(h [B,T,d])``
    (replication, as the model's embedding), ``reduce(x) -> [B,T,d]``.

    Raises:
        ValueError: (from the methods) ``x`` not ``[B, T, n, d]``, a branch output of another
            shape.
    """

    kind: str = "mhc"

    def __init__(self, module: nn.Module, n: int, d: int, seed: int, device: str,
                 layer_index: int) -> None:
        self.module: Any = module
        self.n, self.d = n, d
        self.conventions = v41_conventions()
        self._seed, self._device, self._layer_index = seed, device, layer_index

    def forward(self, x: torch.Tensor, branch: SubBranch) -> torch.Tensor:
        """``expand(F(collapse(x, pre)), x, mix)`` with the module's ``mix = (pre, post, comb)``
        at ``x``; ``branch`` is called once."""
        check_state(x, self.n, self.d)
        mix = self.module(x)
        collapsed = self.module.collapse(x, mix.pre)
        out: torch.Tensor = self.module.expand(
            check_branch_output(branch(collapsed), collapsed), x, mix)
        return out

    def weights(self, x: torch.Tensor) -> Weights:
        """The module's ``(pre, post, combᵀ)`` at ``x`` in ``x``'s dtype (differentiable)."""
        check_state(x, self.n, self.d)
        mix = self.module(x)
        return _weights_of(mix, mix.pre, x.dtype)

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into the n streams (``DeepseekV41Model``'s embedding).

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(2).expand(*h.shape[:-1], self.n, self.d).contiguous()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The model's final ``collapse(x, pre)`` with this sublayer's ``pre`` at ``x`` (the
        model uses the last sublayer's carried one) ``-> [B, T, d]`` in ``x``'s dtype."""
        check_state(x, self.n, self.d)
        out: torch.Tensor = self.module.collapse(x, self.module(x).pre)
        return out

    def stack(self, layers: int) -> V41Stack:
        """A fresh stack of ``layers`` consecutive sublayers with the carried pre-mix
        (:class:`V41Stack`): sublayer 0 is a copy of this impl's module (same values, its own
        tensors, so perturbing the stack leaves this impl alone), the others are built after it
        under the factory's seed.

        Raises:
            ValueError: ``layers < 1``.
        """
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"layers: expected an int >= 1, got {layers!r}")
        modules = [copy.deepcopy(self.module)]
        with seeded(self._seed, self._device):
            build_v41_connection(self.n, self.d)  # the draw sublayer 0 was built from
            modules += [build_v41_connection(self.n, self.d).to(self._device)
                        for _ in range(layers - 1)]
        return V41Stack(modules, self.n, self.d, self._seed, self._device, self._layer_index)


class V41Stack:
    """L consecutive DeepSeek-V4.1 sublayers chained as ``DeepseekV41Model`` chains them (the
    ``stack`` capability).

    Sublayer k computes ``mix_k = (pre_k, post_k, comb_k)`` from its input ``X_k``, collapses
    ``X_k`` with the carried pre-mix ``p_k`` (``p_0`` = the one-hot that reads stream 0, the
    model's initial pre-mix; ``p_k = pre_{k−1}``, computed from ``X_{k−1}``), calls
    ``branches[k]`` once, and expands with ``mix_k``.

    Attributes:
        n, d, layers: expansion rate, width, number of sublayers.
        modules: the L ``DeepseekV41HyperConnection`` modules.
        pre_mix_from: the carry design it declares (``Stack.pre_mix_from``):
            ``"previous_input"``, V4.1's single pass.
        initial_pre_mix: ``e_0`` ``[n]`` (float32), the model's initial pre-mix.
    """

    def __init__(self, modules: Sequence[nn.Module], n: int, d: int, seed: int, device: str,
                 layer_index: int) -> None:
        self.modules: list[Any] = list(modules)
        self.n, self.d, self.layers = n, d, len(self.modules)
        self.pre_mix_from: Final = "previous_input"
        self.initial_pre_mix = torch.zeros(n, dtype=torch.float32)
        self.initial_pre_mix[0] = 1.0  # DeepseekV41Model's initial pre-mix: read stream 0
        self._seed, self._device, self._layer_index = seed, device, layer_index

    def _run(self, x: torch.Tensor, branches: Sequence[SubBranch]
             ) -> tuple[torch.Tensor, list[Weights]]:
        check_state(x, self.n, self.d)
        if len(branches) != self.layers:
            raise ValueError(f"expected {self.layers} branches, got {len(branches)}")
        pre_mix = torch.zeros(*x.shape[:3], device=x.device, dtype=torch.float32)
        pre_mix[..., 0] = 1
        used: list[Weights] = []
        for module, branch in zip(self.modules, branches, strict=True):
            mix = module(x)
            collapsed = module.collapse(x, pre_mix)
            used.append(_weights_of(mix, pre_mix, x.dtype))
            x = module.expand(check_branch_output(branch(collapsed), collapsed), x, mix)
            pre_mix = mix.pre
        return x, used

    def forward(self, x: torch.Tensor, branches: Sequence[SubBranch]) -> torch.Tensor:
        """``X [B,T,n,d] -> [B,T,n,d]`` through the L sublayers; ``branches[k]`` is called once.

        Raises:
            ValueError: ``x`` not ``[B, T, n, d]``, not L branches, a branch output of another
                shape.
        """
        return self._run(x, branches)[0]

    def weights(self, x: torch.Tensor, branches: Sequence[SubBranch]) -> list[Weights]:
        """The ``(h_pre, h_post, H_res)`` each sublayer used in the run on ``x``, in ``x``'s
        dtype, ``h_pre`` the carried pre-mix (one-hot for sublayer 0)."""
        return self._run(x, branches)[1]

    def sublayer(self, k: int) -> V41Connection:
        """Sublayer ``k`` alone (same module, no carried state).

        Raises:
            IndexError: ``k`` outside ``[0, layers)``.
        """
        if not 0 <= k < self.layers:
            raise IndexError(f"sublayer {k} of a stack of {self.layers}")
        return V41Connection(self.modules[k], self.n, self.d, self._seed, self._device,
                             self._layer_index + k)

    def parameters(self) -> Iterator[torch.Tensor]:
        """Every trainable tensor of the L sublayers."""
        for module in self.modules:
            yield from module.parameters()


def make_deepseek_v41(n: int, d: int, *, layer_index: int = 0,
                      dtype: torch.dtype = torch.float64, device: str = "cpu",
                      seed: int = 0) -> V41Connection:
    """Factory (kit target form) for one nemo-automodel ``DeepseekV41HyperConnection`` sublayer
    (no carried state; ``stack(L)`` carries it). Parameters stay float32 whatever ``dtype``
    (the model keeps ``attn_hc``/``ffn_hc`` in float32).

    Raises:
        ImportError: nemo-automodel (or the transformers it imports) is not installed.
        PackageChanged: ``DeepseekV41Block``/``DeepseekV41Model.forward`` chain otherwise.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    del dtype  # the parameters stay float32, as in the model
    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if layer_index < 0:
        raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
    with seeded(seed, device):
        module = build_v41_connection(n, d)
    return V41Connection(module.to(device), n, d, seed, device, layer_index)
