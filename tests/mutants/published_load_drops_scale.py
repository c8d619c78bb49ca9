"""Mutant: ``load_published`` copies ``hc_fn`` and ``hc_base`` but not ``hc_scale`` (a loader
whose key map misses one tensor: the checkpoint's scales are silently replaced by the init).

Bug class: published parameterization (the target's own loading path).
Caught by: published.load_roundtrip.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from tests.mutants._published import make_divergent

BUG_CLASS = "published: the loader drops hc_scale"
CAUGHT_BY = ("published.load_roundtrip",)


class LoadDropsScale(DeepSeekV4HyperConnection):
    def load_published(self, params: Mapping[str, object]) -> None:
        kept = {k: v for k, v in params.items() if k != "hc_scale"}
        kept["hc_scale"] = self.hc_scale.detach().clone()
        super().load_published(kept)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(None, n, d, layer_index, dtype, device,
                          seed, cls=LoadDropsScale)
