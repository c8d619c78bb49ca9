"""Adapters for Hugging Face ``transformers`` (import name ``transformers``): the
hyper-connection modules of DeepSeek-V4, GLM-5-Next and HY-V4, written against version
:data:`WRITTEN_FOR` (and DeepSeek-V4 of :data:`FIRST_RELEASE`, the first release with it).

Each model's decoder layer holds two hyper-connection modules (``attn_hc``, ``ffn_hc``) in the
DeepSeek-V4 style: the module reads the streams ``[B, T, n, d]`` and returns ``post``, ``comb``
and the branch input ``collapsed = Σ_i pre_i X_i`` (``pre`` is consumed inside); the decoder
layer composes. The targets are built with
:func:`hcspec.conformance.adapters.deepseek_v4_style.v4_style_target`, composing as each
decoder layer does (read from the package source):

* **DeepSeek-V4, GLM-5-Next (5.23.0)**: ``X' = post·F + combᵀ X`` with ``post`` and ``comb``
  cast to the state's dtype first (``comb="source_target"``); ``comb = softmax(L, -1) + eps``,
  then a column normalisation and ``iters − 1`` (row, column) rounds, every denominator
  ``+ eps`` — in the row form ``H_res = combᵀ`` has its rows normalised last;
  ``pre = σ(·) + eps``, ``post = 2σ(·)``; weights in float32 from an unweighted RMS norm of
  ``vec(X)``.
* **DeepSeek-V4 (5.8.0)**: ``X' = post·F + comb X`` (``comb="target_source"``);
  ``comb = σ(L) + eps`` then ``iters`` (row, column) rounds (``H_res = comb``: columns last);
  ``pre = σ(·) + eps``, ``post = σ(·) + eps`` (multiplier 1).
* **HY-V4 (5.23.0)**: no mixing matrix: ``X' = (post·F + X)`` computed in float32 and cast
  back (``residual_mixing="identity"``); ``post = hc_magnitude·σ(·) + eps``.

``forward`` (DeepSeek-V4 and GLM-5-Next) runs the package's own decoder layer class
(:func:`decoder_layer_of`): the connection at its attention site, the kit's branch as the
attention, the FFN site the identity step; so the orientation is the layer's, whatever the
target declares, and a layer that mixed ``comb`` otherwise than declared would fail the law
family (``weights`` follows the declaration). HY-V4 composes from the declaration.
``weights`` reads ``pre`` from a call of the module
(:class:`~hcspec.conformance.adapters._capture.CallRecorder`): the tensor whose
``unsqueeze(-1)`` multiplies the state; ``forward`` is the module's plain call. Each factory
also checks that the decoder layer's source composes with the orientation it declares, and raises
:class:`~hcspec.conformance.adapters._capture.PackageChanged` otherwise (so the 5.23.0 target
cannot silently check 5.8.0's layer, or the reverse).

Modules are built from a tiny config on the CPU (no weights downloaded), parameters kept in
float32 (the models' ``_keep_in_fp32_modules``), initialised by the model's own
``_init_weights`` under the factory's seed. ``layer_index`` has no effect (no layer-dependent
init). ``reduce`` is the model's final head: DeepSeek-V4's and HY-V4's learned ``HyperHead``
(declared ``reduce="learned"``), GLM-5-Next's unweighted mean.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.adapters._hf_modeling import (
    HC_EPS,
    RMS_NORM_EPS,
    SINKHORN_ITERS,
    BranchAttention,
    HyperHeadOf,
    ZeroMLP,
    check_composition,
    decoder_layer_of,
    init_like_the_model,
    modeling_module,
    read_pre,
    tiny_config,
)
from hcspec.conformance.adapters.declarations.hf_transformers import FIRST_RELEASE, WRITTEN_FOR
from hcspec.conformance.adapters.deepseek_v4_style import (
    CombOrientation,
    Decomposition,
    PublishedTensors,
    v4_style_target,
)
from hcspec.conformance.protocol import Branch, Conventions, Factory


# --- the published DeepSeek-V4 layout: hc_fn, hc_scale, hc_base ---------------------------------
def published_tensors(prefix: str) -> PublishedTensors:
    """DeepSeek-V4's published layout in a ``DeepseekV4HyperConnection`` (or GLM-5-Next's) at
    ``prefix`` (``""`` or ``"connection."``): a checkpoint's ``hc_attn_fn`` /
    ``hc_attn_scale`` / ``hc_attn_base`` are the module's ``fn`` / ``scale`` / ``base`` (the
    package's own ``conversion_mapping`` renames them so); the settings are the module's
    ``hc_eps``, its input norm's ``eps`` and ``hc_sinkhorn_iters``."""
    def settings(module: Any) -> dict[str, float]:
        connection = module.get_submodule(prefix.rstrip(".")) if prefix else module
        return {"hc_eps": float(connection.hc_eps),
                "norm_eps": float(connection.input_norm.eps),
                "sinkhorn_iters": int(connection.hc_sinkhorn_iters)}

    return PublishedTensors("deepseek-v4", {"hc_fn": f"{prefix}fn", "hc_scale": f"{prefix}scale",
                                            "hc_base": f"{prefix}base"}, settings)


# --- DeepSeek-V4 and GLM-5-Next (post, comb, collapsed) ----------------------------------------
def _decompose_with_comb(module: nn.Module, x: torch.Tensor) -> Decomposition:
    post, comb, collapsed = module(x)
    return Decomposition(pre=None, post=post, comb=comb, collapsed=collapsed)


def _pre_of(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return read_pre(module, x)[1]


def _on_connection(function: Callable[[nn.Module, torch.Tensor], Any]
                   ) -> Callable[[Any, torch.Tensor], Any]:
    def run(module: Any, x: torch.Tensor) -> Any:
        return function(module.connection, x)
    return run


def _learned_head(module: Any, x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = module.head(x)
    return out


def _deepseek_v4_conventions(release: str) -> Conventions:
    if release == FIRST_RELEASE:
        return Conventions(
            compute_dtype=torch.float32, reduce="learned", sinkhorn_iterations=SINKHORN_ITERS,
            sinkhorn_variant="sigmoid", sinkhorn_additive_eps=HC_EPS,
            sinkhorn_denominator_eps=HC_EPS, sinkhorn_exact_axis="columns",
            h_pre_eps=HC_EPS, h_post_eps=HC_EPS, h_post_multiplier=1.0,
            notes=(f"transformers {release} DeepseekV4HyperConnection with the decoder layer's "
                   "composition X' = post·F + comb X (comb, post cast to the state dtype); "
                   "comb = σ(L) + eps, then (row, column) rounds with eps in the "
                   "denominators; pre = σ + eps, post = σ + eps (multiplier 1); weights in "
                   "float32 from an unweighted RMS norm of vec(X); reduce = HyperHead "
                   "(learned); parameters float32"))
    return Conventions(
        compute_dtype=torch.float32, reduce="learned", sinkhorn_iterations=SINKHORN_ITERS,
        sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
        sinkhorn_additive_eps=HC_EPS, sinkhorn_denominator_eps=HC_EPS,
        sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        notes=(f"transformers {release} DeepseekV4HyperConnection with the decoder layer's "
               "composition X' = post·F + combᵀ X (H_res = combᵀ; comb, post cast to the "
               "state dtype); comb = softmax(L, -1) + eps, a column normalisation, then "
               "iters − 1 (row, column) rounds with eps in the denominators; pre = σ + eps, "
               "post = 2σ; weights in float32 from an unweighted RMS norm of vec(X); "
               "reduce = HyperHead (learned); parameters float32"))


def _deepseek_v4(release: str) -> Factory:
    comb: CombOrientation = "target_source" if release == FIRST_RELEASE else "source_target"

    def build(n: int, d: int, layer_index: int) -> nn.Module:
        modeling = modeling_module("deepseek_v4")
        check_composition(modeling, "DeepseekV4DecoderLayer", comb, release)
        config = tiny_config(modeling, "DeepseekV4Config", n, d,
                              hc_sinkhorn_iters=SINKHORN_ITERS)
        connection = modeling.DeepseekV4HyperConnection(config)
        head = modeling.DeepseekV4HyperHead(config)
        init_like_the_model(modeling, "DeepseekV4PreTrainedModel", config, connection, head)
        return HyperHeadOf(connection, head)

    return v4_style_target(build, _on_connection(_decompose_with_comb), comb=comb,
                           conventions=_deepseek_v4_conventions(release), keep_float32=True,
                           reduce=_learned_head, read_pre=_on_connection(_pre_of),
                           published=published_tensors("connection."),
                           decoder_layer=decoder_layer_of("deepseek_v4", "DeepseekV4DecoderLayer",
                                                          2))


def _glm5_next() -> Factory:
    def build(n: int, d: int, layer_index: int) -> nn.Module:
        modeling = modeling_module("glm5_next")
        check_composition(modeling, "Glm5NextTextDecoderLayer", "source_target", WRITTEN_FOR)
        config = tiny_config(modeling, "Glm5NextTextConfig", n, d,
                              hc_sinkhorn_iters=SINKHORN_ITERS)
        connection: nn.Module = modeling.Glm5NextTextHyperConnection(config)
        init_like_the_model(modeling, "Glm5NextPreTrainedModel", config, connection)
        return connection

    conventions = Conventions(
        compute_dtype=torch.float32, reduce="mean", sinkhorn_iterations=SINKHORN_ITERS,
        sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
        sinkhorn_additive_eps=HC_EPS, sinkhorn_denominator_eps=HC_EPS,
        sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        notes=(f"transformers {WRITTEN_FOR} Glm5NextTextHyperConnection (the DeepSeek-V4 "
               "formulas) with the decoder layer's composition X' = post·F + combᵀ X; "
               "reduce = Glm5NextTextHyperHead, the unweighted mean of the streams; "
               "parameters float32"))
    return v4_style_target(build, _decompose_with_comb, comb="source_target",
                           conventions=conventions, keep_float32=True, read_pre=_pre_of,
                           published=published_tensors(""),
                           decoder_layer=decoder_layer_of("glm5_next",
                                                          "Glm5NextTextDecoderLayer", 3))


# --- HY-V4 (post, collapsed): no mixing matrix -------------------------------------------------
def _decompose_without_comb(module: nn.Module, x: torch.Tensor) -> Decomposition:
    post, collapsed = module(x)
    return Decomposition(pre=None, post=post, comb=None, collapsed=collapsed)


def _hy_v4() -> Factory:
    def build(n: int, d: int, layer_index: int) -> nn.Module:
        modeling = modeling_module("hy_v4")
        check_composition(modeling, "HYV4DecoderLayer", None, WRITTEN_FOR)
        config = tiny_config(modeling, "HYV4Config", n, d)
        connection = modeling.HYV4HyperConnection(config)
        head = modeling.HYV4HyperHead(config)
        init_like_the_model(modeling, "HYV4PreTrainedModel", config, connection, head)
        return HyperHeadOf(connection, head)

    conventions = Conventions(
        compute_dtype=torch.float32, reduce="learned", residual_mixing="identity",
        h_pre_eps=HC_EPS, h_post_eps=HC_EPS,
        notes=(f"transformers {WRITTEN_FOR} HYV4HyperConnection: no mixing matrix "
               "(H_res = I), the decoder layer computes (post·F + X) in float32 and casts "
               "back; pre = σ + eps, post = hc_magnitude·σ + eps (hc_magnitude 2); weights "
               "from linear(vec(X))·rsqrt(mean(vec(X)²)); reduce = HyperHead (learned); "
               "parameters float32"))
    return v4_style_target(build, _on_connection(_decompose_without_comb),
                           comb="source_target", conventions=conventions,
                           compose_dtype="float32", keep_float32=True, reduce=_learned_head,
                           read_pre=_on_connection(_pre_of))


def _lazy(make: Callable[[], Factory], doc: str) -> Callable[..., Any]:
    def factory(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0) -> Any:
        return make()(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)

    factory.__doc__ = doc
    return factory


make_deepseek_v4 = _lazy(lambda: _deepseek_v4(WRITTEN_FOR), f"""\
Factory (kit target form) for transformers {WRITTEN_FOR}'s ``DeepseekV4HyperConnection`` with
its decoder layer's composition and ``DeepseekV4HyperHead`` as ``reduce``.

Raises:
    ImportError: transformers is not installed. PackageChanged: the decoder layer composes
    otherwise (another release).
""")

make_deepseek_v4_first_release = _lazy(lambda: _deepseek_v4(FIRST_RELEASE), f"""\
Factory for transformers {FIRST_RELEASE}'s ``DeepseekV4HyperConnection`` (sigmoid Sinkhorn,
``post = σ + eps``, ``X' = post·F + comb X``).

Raises:
    ImportError: transformers is not installed. PackageChanged: the decoder layer composes
    otherwise (another release).
""")

make_glm5_next = _lazy(_glm5_next, f"""\
Factory for transformers {WRITTEN_FOR}'s ``Glm5NextTextHyperConnection`` with its decoder
layer's composition.

Raises:
    ImportError: transformers is not installed. PackageChanged: the decoder layer composes
    otherwise.
""")

make_hy_v4 = _lazy(_hy_v4, f"""\
Factory for transformers {WRITTEN_FOR}'s ``HYV4HyperConnection`` (no mixing matrix) with its
decoder layer's composition and ``HYV4HyperHead`` as ``reduce``.

Raises:
    ImportError: transformers is not installed. PackageChanged: the decoder layer composes
    otherwise.
""")


# --- Qwen4-exp: the gated read (element-wise), no mixing matrix -----------------------------------
QWEN4_EXP_LOWRANK: Final = 4
"""``hc_lowrank`` of the tiny Qwen4-exp config (320 in the model's; any r is the same step)."""


class _GatedIdentitySite(nn.Module):
    """The MLP site's ``Qwen4ExpTextGatedResidual`` replaced by one that, with a zero MLP,
    leaves the streams exactly unchanged: ``(branch input, the streams, zero write)``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, hyper_input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                          torch.Tensor]:
        streams = hyper_input.reshape(*hyper_input.shape[:-1], self.n, -1)
        return streams[..., 0, :], hyper_input, torch.zeros_like(streams[..., 0])


class _Qwen4Exp(nn.Module):
    """transformers' ``Qwen4ExpTextGatedResidual`` at the attention site of the package's own
    ``Qwen4ExpTextDecoderLayer`` (the kit's branch as the attention, the MLP site the identity),
    with the model's ``hyper_connection_mixer`` (the same class without the write) as
    ``reduce``. The state ``[B,T,n,d]`` is the layer's ``[B,T,n·d]`` (streams contiguous)."""

    kind = "hc-dynamic"
    _decoder_layer: Any

    def __init__(self, connection: nn.Module, mixer: nn.Module, n: int, d: int) -> None:
        super().__init__()
        self.connection, self.mixer, self.n, self.d = connection, mixer, n, d
        self.conventions = Conventions(
            compute_dtype=torch.float32, reduce="learned", residual_mixing="identity",
            read="elementwise", published="qwen4-exp",
            notes=(f"transformers {WRITTEN_FOR} Qwen4ExpTextGatedResidual composed by "
                   "Qwen4ExpTextDecoderLayer: x_in = mean_s(G_s ⊙ N_s), G = σ(up(silu(down(N)"
                   "/n))), h_post = 2σ(inject(N)/n), X' = X + h_post ⊗ F(x_in) (H_res = I); "
                   "the group RMSNorm computes in float32; reduce = hyper_connection_mixer "
                   "(the read without the write); hc_lowrank "
                   f"{QWEN4_EXP_LOWRANK}"))
        # built once, outside the module tree (it holds the connection, already registered):
        # forward must not import (TorchDynamo cannot trace importlib)
        object.__setattr__(self, "_decoder_layer", self._layer())

    def _layer(self) -> Any:
        cls = modeling_module("qwen4_exp").Qwen4ExpTextDecoderLayer
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.layer_type = "full_attention"
        layer.ple = None
        layer.attn_hyper_connection = self.connection
        layer.mlp_hyper_connection = _GatedIdentitySite(self.n)
        layer.self_attn = BranchAttention(1)
        layer.mlp = ZeroMLP()
        return layer

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``x [B,T,n,d] -> [B,T,n,d]`` through the package's decoder layer."""
        out: torch.Tensor = self._decoder_layer(x.flatten(-2), None, hc_branch=branch)
        return out.reshape(*out.shape[:-1], self.n, self.d)

    def read_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_in [B,T,d], h_post [B,T,n])``: the module's own ``mixed_input`` and
        ``injection_weights`` at ``x [B,T,n,d]`` (the capability ``read_map``)."""
        mixed, _, injection = self.connection(x.flatten(-2))
        return mixed, injection

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """``h [B,T,d] -> [B,T,n,d]`` as the model does (``repeat(1, 1, hc_count)``)."""
        repeated = h.repeat(*([1] * (h.dim() - 1)), self.n)
        return repeated.reshape(*repeated.shape[:-1], self.n, self.d)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The model's ``hyper_connection_mixer``: ``x [B,T,n,d] -> [B,T,d]``."""
        out: torch.Tensor = self.mixer(x.flatten(-2))
        return out

    def published_parameters(self) -> dict[str, torch.Tensor | float]:
        """The ``qwen4-exp`` tensors: the attention site's own parameters (Linear weights are
        ``[out, in]``, as the layout) and its norm's ``eps``."""
        c: Any = self.connection
        return {"hc_norm.weight": c.hc_norm.weight,
                "input_mix_weight_down": c.input_mix_weight_down.weight,
                "input_mix_weight_up": c.input_mix_weight_up.weight,
                "block_inject_weight": c.block_inject_weight.weight,
                "norm_eps": float(c.hc_norm.eps)}

    def load_published(self, params: Any) -> None:
        """Set the attention site's tensors from a ``qwen4-exp`` mapping (``load_state_dict``
        with the checkpoint's names, ``.weight`` added to the Linear ones)."""
        names = {"hc_norm.weight": "hc_norm.weight",
                 "input_mix_weight_down": "input_mix_weight_down.weight",
                 "input_mix_weight_up": "input_mix_weight_up.weight",
                 "block_inject_weight": "block_inject_weight.weight"}
        state = {names[k]: v for k, v in params.items() if k in names}
        self.connection.load_state_dict(state, strict=True)


def make_qwen4_exp(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                   device: str = "cpu", seed: int = 0) -> Any:
    """Factory for transformers 5.23.0's ``Qwen4ExpTextGatedResidual`` composed by its decoder
    layer, with ``hyper_connection_mixer`` as ``reduce``; initialised by the model's own
    ``_init_weights`` (norm weight 0, Linear normal) under ``seed``.

    Raises:
        ImportError: transformers is not installed. ValueError: ``n <= 1`` (the config
        refuses it). PackageChanged: the decoder layer does not compose as in 5.23.0.
    """
    modeling = modeling_module("qwen4_exp")
    source = inspect.getsource(modeling.Qwen4ExpTextDecoderLayer.forward)
    if "hyper_input + injection.flatten(-2)" not in source:
        raise PackageChanged("transformers Qwen4ExpTextDecoderLayer.forward does not compose as "
                             f"in transformers {WRITTEN_FOR}")
    config_module = importlib.import_module(
        modeling.__name__.replace(".modeling_", ".configuration_"))
    config = config_module.Qwen4ExpTextConfig(
        hidden_size=d, hc_count=n, hc_lowrank=QWEN4_EXP_LOWRANK, rms_norm_eps=RMS_NORM_EPS)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        connection = modeling.Qwen4ExpTextGatedResidual(config)
        mixer = modeling.Qwen4ExpTextGatedResidual(config, use_combine=False)
        init_like_the_model(modeling, "Qwen4ExpPreTrainedModel", config,
                             *connection.modules(), *mixer.modules())
    return _Qwen4Exp(connection, mixer, n, d).to(dtype=dtype, device=device)
