"""Mutant: a kernel that indexes the state as if it were contiguous (it reads the storage with
the row-major strides of ``[B, T, n, d]``), so a view's elements are read in the wrong order —
silently.

Bug class: strided inputs (public report: kernels that assume contiguous strides read the
wrong elements without raising; a Triton or CUDA kernel handed ``x.data_ptr()`` without its
strides). Every other family hands the impl a contiguous state.
Caught by: strides.non_contiguous.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "strided input: storage read with contiguous strides"
CAUGHT_BY = ("strides.non_contiguous",)


def contiguous_read(x: torch.Tensor) -> torch.Tensor:
    """``x``'s storage from its offset, read with ``x``'s shape and row-major strides."""
    if x.is_contiguous():
        return x
    _, tokens, n, d = x.shape
    strides = (tokens * n * d, n * d, d, 1)
    room = x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()
    flat = torch.as_strided(x, (min(room, x.numel()),), (1,))
    if flat.numel() < x.numel():  # an expanded view: its storage is smaller than the tensor
        flat = torch.cat([flat, flat.new_zeros(x.numel() - flat.numel())])
    return flat.as_strided(x.shape, strides)


class ContiguousKernel(ManifoldHyperConnection):
    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        return super().forward(contiguous_read(x), branch)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ContiguousKernel, n, d, layer_index, dtype, device, seed, mhc_conventions())
