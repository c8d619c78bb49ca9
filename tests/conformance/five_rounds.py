"""Stand-ins for the hint tests (tests/conformance/test_hints.py): an mHC layer that runs 5
Sinkhorn–Knopp rounds while declaring the paper's 20, with and without ``logits(x)``, and one
whose Sinkhorn–Knopp adds an eps of 1e-3 to its start without declaring it."""

from __future__ import annotations

from typing import Any

import torch

from hcspec.formulas.sinkhorn import sinkhorn_variant
from hcspec.reference import sinkhorn_knopp
from hcspec.spec.record import SinkhornSpec
from tests.mutants._base import MHCWithProjection, build, mhc_conventions


class FiveRounds(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits, 5)


class UndeclaredEps(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_variant(logits, SinkhornSpec(iterations=20, additive_eps=1e-3))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> Any:
    """5 rounds run, 20 declared; offers ``logits``."""
    return build(FiveRounds, n, d, layer_index, dtype, device, seed, mhc_conventions(20))


def make_eps(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> Any:
    """eps 1e-3 added to the start, none declared; offers ``logits``."""
    return build(UndeclaredEps, n, d, layer_index, dtype, device, seed, mhc_conventions(20))


class NoLogits:
    """The five-round layer without ``logits``: only its reported H_res shows the rounds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def weights(self, x: torch.Tensor) -> Any:
        return self.inner.weights(x)

    def parameters(self) -> Any:
        return self.inner.parameters()

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        out: torch.Tensor = self.inner.forward(x, branch)
        return out


def make_no_logits(n: int, d: int, **kwargs: Any) -> NoLogits:
    """5 rounds run, 20 declared; no ``logits``."""
    return NoLogits(make(n, d, **kwargs))
