"""Fixtures shared by the reference tests: random weights that hide nothing, spec-side arrays."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn


def _perturb(module: nn.Module, scale: float = 0.5, seed: int = 0) -> nn.Module:
    """Add ``scale · N(0, 1)`` noise to every parameter, in place (returns the module).

    At init a static HC has H_res = I and a one-hot h_pre, which hides transposes and axis
    mix-ups; every law that is not about the init is tested after this perturbation.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            p.add_(scale * noise.to(dtype=p.dtype, device=p.device))
    return module


@pytest.fixture
def perturb() -> Callable[..., nn.Module]:
    return _perturb


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().to(torch.float64).numpy()


@pytest.fixture
def as_numpy() -> Callable[[torch.Tensor], np.ndarray]:
    return _as_numpy
