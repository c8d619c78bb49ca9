"""Mutant: the stack's checkpoint loader reads a DeepSeek-V4 layer's ``hc_attn_*`` tensors
into its FFN sublayer and ``hc_ffn_*`` into its attention sublayer (the two sites of a layer
swapped, as a key-renaming table with the suffixes mixed up would). Every sublayer is the
reference DeepSeek-V4 step; loading one sublayer's published tensors through its own
``load_published`` is right; the stack is self-consistent. Only the network the checkpoint
describes differs: 0.03 off at init, more once perturbed.

Bug class: published checkpoint loaded across a stack (tensors of one site given to another).
Caught by: published.stack_checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from hcspec.reference.stack import HyperConnectionStack

BUG_CLASS = "published checkpoint: attention and FFN sites of a layer swapped by the loader"
CAUGHT_BY = ("published.stack_checkpoint",)


def _other_site(key: str) -> str:
    if "hc_attn_" in key:
        return key.replace("hc_attn_", "hc_ffn_")
    return key.replace("hc_ffn_", "hc_attn_")


class SwappedSitesStack(HyperConnectionStack):
    def load_published(self, checkpoint: Mapping[str, object]) -> None:
        # meant: checkpoint as it is
        super().load_published({_other_site(k): v for k, v in checkpoint.items()})


class SwappingLoader(DeepSeekV4HyperConnection):
    def stack(self, layers: int, *, carry: bool | None = None) -> HyperConnectionStack:
        built = super().stack(layers, carry=carry)
        return SwappedSitesStack(list(built.sublayers), carry=built.carry)  # type: ignore[arg-type]


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = SwappingLoader(n, d, layer_index, dtype=torch.float64)
    return cast(HyperConnectionImpl, module.to(dtype=dtype, device=device))
