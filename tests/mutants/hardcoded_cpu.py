"""Mutant: moves the result to the CPU with a hard-coded ``.cpu()`` (left over from debugging).

Bug class: device (a hard-coded ``.cpu()``). Invisible on a machine without CUDA, where it is
the reference itself; on CUDA the output leaves the device (and the next layer fails or
silently runs on the CPU).
Caught by: device.cuda_matches_cpu (needs a CUDA device).
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "device: hard-coded .cpu()"
CAUGHT_BY = ("device.cuda_matches_cpu",)
NEEDS = "cuda"


class CpuResult(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        return super().forward(x, branch).cpu()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(CpuResult, n, d, layer_index, dtype, device, seed)
