"""Mutant: with more than one thread, the stream mixing ``Σ_j H_ij X_j`` is summed in another
order (each thread adds its half of the streams, then the halves are added), so the output at
2 or 4 threads differs from the single-threaded one in the last bits, while every thread
count alone is deterministic.

Bug class: determinism (native kernels whose work split depends on the thread count: split
reductions in a CPU thread pool give results that change with ``-t``/``n_threads``).
``state.deterministic_eval`` and ``determinism.forward_backward`` run one thread count.
Caught by: determinism.thread_count.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "determinism: the result depends on the thread count"
CAUGHT_BY = ("determinism.thread_count",)


class SplitByThreads(ManifoldHyperConnection):
    thread_count = 1

    def threads(self, count: int) -> SplitByThreads:
        """The same module, computing ``count`` threads' way (shares the parameters)."""
        other = SplitByThreads.__new__(SplitByThreads)
        other.__dict__.update(self.__dict__)
        other.thread_count = count
        return other

    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        terms = H_res.unsqueeze(-1) * x.unsqueeze(-3)  # [B,T,i,j,d]
        if self.thread_count == 1:
            mixed = terms[..., 0, :]
            for j in range(1, terms.shape[-2]):
                mixed = mixed + terms[..., j, :]
        else:  # meant: the same order whatever the split
            half = terms.shape[-2] // 2
            mixed = terms[..., half:, :].sum(-2) + terms[..., :half, :].sum(-2)
        return mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(SplitByThreads, n, d, layer_index, dtype, device, seed, mhc_conventions())
