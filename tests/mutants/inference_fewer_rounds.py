"""Mutant: under ``torch.inference_mode()`` a "serving" Sinkhorn–Knopp kernel runs 3 rounds
instead of the declared 20, so H_res at inference differs from H_res in training.

Bug class: inference path ≠ training path (public report: serving engines run kernels
of their own for inference — fused, fewer iterations, another precision — that the training
path never runs). The other families never call forward under ``inference_mode``.
Caught by: inference.modes.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "inference path: fewer Sinkhorn–Knopp rounds under inference_mode"
CAUGHT_BY = ("inference.modes",)
SERVING_ROUNDS = 3


class ServingRounds(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        if torch.is_inference_mode_enabled():  # meant: the declared rounds on every path
            return sinkhorn_knopp(logits, SERVING_ROUNDS)
        return super().project(logits)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ServingRounds, n, d, layer_index, dtype, device, seed, mhc_conventions())
