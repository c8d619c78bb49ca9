"""Building a transformers model's modules at the kit's sizes (a tiny configuration, the model's
own initialisation) and running the package's decoder layer around the target's
hyper-connection, for the targets of :mod:`hcspec.conformance.adapters.hf_transformers`."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import CallRecorder, PackageChanged
from hcspec.conformance.adapters.declarations.hf_transformers import WRITTEN_FOR
from hcspec.conformance.adapters.deepseek_v4_style import (
    CombOrientation,
    DecoderLayerOf,
    LayerStep,
    identity_site,
)
from hcspec.conformance.protocol import Branch

HC_EPS: Final = 1e-6
"""``hc_eps`` of the tiny configs (the models' default)."""


SINKHORN_ITERS: Final = 20
"""``hc_sinkhorn_iters`` of the tiny configs (the models' default)."""


RMS_NORM_EPS: Final = 1e-6
"""``rms_norm_eps`` of the tiny configs."""

_MODELS: Final = "transformers.models"


def modeling_module(model: str) -> Any:
    """The installed ``transformers.models.{model}.modeling_{model}`` module.

    Raises:
        ImportError: transformers or that model is not installed.
    """
    return importlib.import_module(f"{_MODELS}.{model}.modeling_{model}")


def tiny_config(modeling: Any, config_class: str, n: int, d: int, **extra: Any) -> Any:
    """The model's own ``config_class`` at the kit's sizes: hidden size ``d``, ``n`` streams,
    :data:`HC_EPS` and :data:`RMS_NORM_EPS`, and ``extra`` settings."""
    config_module = importlib.import_module(
        modeling.__name__.replace(".modeling_", ".configuration_"))
    return getattr(config_module, config_class)(
        hidden_size=d, hc_mult=n, hc_eps=HC_EPS, rms_norm_eps=RMS_NORM_EPS, **extra)


def init_like_the_model(modeling: Any, pretrained_class: str, config: Any,
                         *modules: nn.Module) -> None:
    """Run the model's own ``_init_weights`` on ``modules`` (created with ``torch.empty``)."""
    holder = getattr(modeling, pretrained_class)(config)
    for module in modules:
        holder._init_weights(module)


def check_composition(modeling: Any, layer_class: str, comb: CombOrientation | None,
                       written_for: str) -> None:
    """Check that the installed ``layer_class.forward`` composes as the release the target
    was written for (``comb`` transposed for ``"source_target"``, absent for None).

    Raises:
        PackageChanged: it composes otherwise.
    """
    source = inspect.getsource(getattr(modeling, layer_class).forward)
    if comb is None:
        found = "comb" not in source
    else:
        transposed = "comb.to(dtype).transpose(-1, -2)" in source
        found = transposed == (comb == "source_target") and "torch.matmul(" in source
    if not found:
        raise PackageChanged(
            f"transformers {layer_class}.forward does not compose as in transformers "
            f"{written_for} (comb {comb or 'absent'}); this target was written for that "
            "release: use the target of the installed release")


def read_pre(module: nn.Module, x: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """Call ``module(x)`` and return its outputs and the ``pre [B, T, n]`` it collapsed the
    streams with (the tensor whose ``unsqueeze(-1)`` multiplied ``x``), as the module computed
    it (differentiable).

    Raises:
        PackageChanged: no such product in the call.
    """
    with CallRecorder() as recorder:
        outputs = module(x)
    unsqueezed = {id(c.result): c.args[0] for c in recorder.calls
                  if c.func is torch.Tensor.unsqueeze and c.args[1:] == (-1,)}
    for call in recorder.calls:
        if (call.func in (torch.Tensor.mul, torch.Tensor.__mul__, torch.mul)
                and len(call.args) == 2 and call.args[1] is x
                and id(call.args[0]) in unsqueezed):
            pre: torch.Tensor = unsqueezed[id(call.args[0])]
            return outputs, pre
    raise PackageChanged(
        f"transformers {type(module).__name__}: pre.unsqueeze(-1) * hidden_streams not found "
        f"(adapter written for {WRITTEN_FOR})")


# --- the package's decoder layer as the composition ---------------------------------------------
class BranchAttention(nn.Module):
    """A decoder layer's attention replaced by the kit's branch, handed in through the layer's
    keyword arguments (``hc_branch``: the layers pass their ``**kwargs`` on to the attention);
    returns the output followed by ``extra`` ``None`` s, as the package's attention does."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.extra = extra

    def forward(self, hidden_states: torch.Tensor, *args: Any,
                hc_branch: Callable[[torch.Tensor], torch.Tensor], **kwargs: Any) -> Any:
        return (hc_branch(hidden_states), *([None] * self.extra))


class ZeroMLP(nn.Module):
    """A decoder layer's MLP replaced by zero."""

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.zeros_like(hidden_states)


class _IdentityConnection(nn.Module):
    """A ``(post, comb, collapsed)`` hyper-connection that, with a zero MLP, leaves the streams
    exactly unchanged (:func:`identity_site`)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        site = identity_site(x)
        return site.post, site.comb, site.collapsed


def decoder_layer_of(model: str, layer_class: str, attention_outputs: int) -> DecoderLayerOf:
    """Compose through the installed package's own decoder layer ``layer_class`` of
    ``transformers.models.{model}`` (:data:`~hcspec.conformance.adapters.deepseek_v4_style.\
DecoderLayerOf`): an instance of the class (its ``forward``; built without its ``__init__``)
    whose ``attn_hc`` is the target's connection, attention the kit's branch (returning
    ``attention_outputs`` values, as the package's attention does), norms the identity (the
    branch includes its own), ``ffn_hc`` the identity site and MLP zero; the layer's output is
    the step of its attention site, composed as the package composes it.
    """
    def layer_of(module: Any) -> LayerStep:
        cls = getattr(modeling_module(model), layer_class)
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.attn_hc = module.connection if isinstance(module, HyperHeadOf) else module
        layer.ffn_hc = _IdentityConnection()
        layer.self_attn = BranchAttention(attention_outputs - 1)
        layer.mlp = ZeroMLP()
        layer.input_layernorm = nn.Identity()
        layer.post_attention_layernorm = nn.Identity()
        layer.block_type, layer.layer_idx = "attention", 0

        def step(x: torch.Tensor, branch: Branch) -> torch.Tensor:
            out = layer(x, hc_branch=branch)
            streams: torch.Tensor = out[0] if isinstance(out, tuple) else out
            return streams
        return step
    return layer_of


class HyperHeadOf(nn.Module):
    """The connection module with the model's final head beside it (so ``parameters`` lists
    both and one ``.to`` moves both); calling it calls the connection."""

    def __init__(self, connection: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.connection, self.head = connection, head

    def forward(self, x: torch.Tensor) -> Any:
        return self.connection(x)
