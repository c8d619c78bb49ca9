"""Mutant: under ``torch.inference_mode()`` the weights are computed on the first call of each
input shape and cached by that shape (a warm-up / graph-capture cache), so a later call with
another input of the same shape reuses the first input's H_res, h_pre and h_post.

Bug class: inference path ≠ training path (public report: serving engines' warm-up and
caching logic keyed by shape; decode and prefill kernels the training path never runs). The
other families never call forward under ``inference_mode``.
Caught by: inference.repeated_calls.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "inference path: weights cached by input shape"
CAUGHT_BY = ("inference.repeated_calls",)


class ShapeCache(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        if not torch.is_inference_mode_enabled():
            return super()._weights(x)
        cache = self.__dict__.setdefault("_served", {})
        key = tuple(x.shape)  # meant: no cache, or one keyed by the input itself
        if key not in cache:
            cache[key] = super()._weights(x)
        return cache[key]


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ShapeCache, n, d, layer_index, dtype, device, seed, mhc_conventions())
