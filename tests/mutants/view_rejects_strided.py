"""Mutant: the weight computation flattens the streams with ``x.view(B, T, n·d)``, which
raises on a non-contiguous state (``reshape`` was meant).

Bug class: strided inputs (public report: transformers' DeepSeek-V4 module raises on a
non-contiguous ``[B, S, n, D]`` state since it switched from ``flatten`` to ``view``). Every
other family hands the impl a contiguous state.
Caught by: strides.non_contiguous.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "strided input: x.view(B, T, n·d) raises on a non-contiguous state"
CAUGHT_BY = ("strides.non_contiguous",)


class Viewing(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x.view(batch, tokens, n * d)  # meant: x.reshape / x.flatten(-2)
        return super()._weights(x)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Viewing, n, d, layer_index, dtype, device, seed, mhc_conventions())
