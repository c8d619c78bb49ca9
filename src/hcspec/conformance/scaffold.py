"""``hc-conformance init``: a documented adapter skeleton for the user's module, and the kit's
worked example adapter, shipped with the package (``templates/conformance_adapter.py``, the
same file as the repository's ``examples/conformance_adapter.py``).

Torch-free: the skeleton is text, written before anything is imported.
"""

from __future__ import annotations

import importlib.resources
import keyword
from typing import Final

EXAMPLE: Final = "conformance_adapter.py"
"""The worked example's name among the package's templates."""

SKELETON: Final = '''\
"""Adapter: {module} behind the hcspec conformance kit's protocol.

Written by `hc-conformance init {module}`. Fill in the three TODOs, then run:

    hc-conformance run {file}:make --profile quick

The protocol (hcspec.conformance.protocol.HyperConnectionImpl): an impl has `n`, `d`, `kind`
and `forward(x, branch)` on the kit's layout, x [B, T, n, d] -> [B, T, n, d], where `branch`
maps x_in [B, T, d] to F(x_in) [B, T, d] and must be called exactly once per forward. Optional
parts unlock more properties: `weights(x)` -> (h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])
in the row convention (X' = H_res X + h_post F(h_preᵀ X)ᵀ), `logits(x)`, `parameters()`,
`expand(h)`, `reduce(x)`, `train()`/`eval()`. `hc-conformance init --example` writes a complete
worked adapter (a layer that folds the streams into the batch and keeps the paper's layout).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import {module}  # noqa: F401  (the module with your layer)
from hcspec.conformance.protocol import Conventions

Branch = Callable[[torch.Tensor], torch.Tensor]


class Adapter(torch.nn.Module):
    """Presents your layer as the kit's protocol."""

    # TODO 1: "hc-static", "hc-dynamic" or "mhc".
    kind = "mhc"
    # TODO 2: declare what your layer does differently from the defaults (an unknown field is
    # a usage error, with the closest name): e.g. sinkhorn_iterations=20,
    # sinkhorn_exact_axis="rows", branch_input="rms_norm", reduce="mean"; only what you
    # declare is shown in the report's header.
    conventions = Conventions()

    def __init__(self, inner: torch.nn.Module, n: int, d: int) -> None:
        super().__init__()
        self.inner, self.n, self.d = inner, n, d

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """x [B, T, n, d] -> [B, T, n, d]: translate to your layer's layout, call it (it calls
        `branch` once), translate back."""
        # TODO 3: e.g. return self.inner(x, branch)
        raise NotImplementedError("adapter: translate x to your layer's layout in forward")


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> Adapter:
    """{module} behind its adapter (TARGET {file}:make).

    Build a fresh layer for expansion rate n, hidden size d and depth index layer_index, in
    dtype on device, its initialisation seeded by seed; raise (e.g. ValueError) for a
    configuration your layer does not support: the kit skips such cases.
    """
    torch.manual_seed(seed)
    inner = torch.nn.Identity()  # replace with your layer, e.g. {module}.MyHC(n, d, ...)
    return Adapter(inner, n, d).to(dtype=dtype, device=device)
'''


def skeleton(module: str, file: str = "hc_adapter.py") -> str:
    """The adapter skeleton for ``module`` (a dotted import name), to be written to ``file``.

    Raises:
        ValueError: ``module`` is not a dotted Python identifier.
    """
    parts = module.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ValueError(f"init: {module!r} is not a module's import name (e.g. mylib.layers)")
    return SKELETON.format(module=module, file=file)


def worked_example() -> str:
    """The text of the kit's worked example adapter, as shipped in the package."""
    return (importlib.resources.files("hcspec.conformance") / "templates" / EXAMPLE).read_text(
        encoding="utf-8")
