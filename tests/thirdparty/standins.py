"""Small stand-ins for the third-party behaviours the kit must handle, built on the reference
mHC so that they need no third-party package: an impl that accepts only stream-replicated
states (as mhc-pytorch), one that computes in float32 inside (as hyper-connections' mHC), and
one whose forward is random in training mode (dropout on the state)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from hcspec.reference import targets
from hcspec.reference.manifold import ManifoldHyperConnection

Branch = Callable[[torch.Tensor], torch.Tensor]


class ReplicatedOnlyMHC:
    """Accepts only ``X = 1_n hᵀ`` (raises ValueError otherwise), rebuilds the state from
    stream 0 (so autograd puts the whole gradient on stream 0, as an impl that takes ``h``
    does) and runs the reference mHC step on it. Declares its conventions as a plain mapping
    and its Sinkhorn rounds only through the ``sinkhorn_iterations`` attribute.

    ``declare=False`` leaves the state domain undeclared; ``skip_h_pre=True`` feeds the
    branch ``h`` instead of ``h_preᵀ X`` (a bug the replicated domain still shows).
    """

    kind = "mhc"

    def __init__(self, inner: ManifoldHyperConnection, declare: bool = True,
                 skip_h_pre: bool = False) -> None:
        self.inner, self.n, self.d = inner, inner.n, inner.d
        self.sinkhorn_iterations = int(inner.sinkhorn_iterations)
        self.skip_h_pre = skip_h_pre
        self.conventions: dict[str, Any] = {"state_domain": "replicated"} if declare else {}

    def _rebuilt(self, x: torch.Tensor) -> torch.Tensor:
        h = x[:, :, 0, :]
        if not torch.equal(x, h.unsqueeze(2).expand_as(x)):
            raise ValueError("this impl accepts only stream-replicated states")
        return h.unsqueeze(2).expand_as(x)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        X = self._rebuilt(x)
        if not self.skip_h_pre:
            return self.inner.forward(X, branch)
        _, h_post, H_res = self.inner.weights(X)
        return H_res @ X + h_post.unsqueeze(-1) * branch(X[:, :, 0, :]).unsqueeze(-2)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.inner.weights(self._rebuilt(x))

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.inner.parameters()


def make_replicated(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                    device: str = "cpu", seed: int = 0, **options: Any) -> ReplicatedOnlyMHC:
    """Factory of :class:`ReplicatedOnlyMHC` (``options``: ``declare``, ``skip_h_pre``)."""
    inner = targets.mhc(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    return ReplicatedOnlyMHC(inner, **options)


class Float32InsideMHC:
    """The reference mHC kept in float32 whatever the factory's dtype: input cast to float32,
    output cast back (as hyper-connections' mHC does). ``declare`` declares
    ``compute_dtype=float32`` (as a mapping with the dtype's name); ``gradient_bug`` adds
    ``0.5·I`` to ∂X'/∂x without changing the forward value."""

    kind = "mhc"

    def __init__(self, inner: ManifoldHyperConnection, declare: bool = True,
                 gradient_bug: bool = False) -> None:
        self.inner, self.n, self.d = inner, inner.n, inner.d
        self.gradient_bug = gradient_bug
        self.conventions: dict[str, Any] = {
            "sinkhorn_iterations": int(inner.sinkhorn_iterations),
            **({"compute_dtype": "float32"} if declare else {}),
        }

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        x32 = x.to(torch.float32)
        out = self.inner.forward(x32, lambda t: branch(t.to(x.dtype)).to(torch.float32))
        if self.gradient_bug:
            out = out + 0.5 * (x32 - x32.detach())
        return out.to(x.dtype)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h_pre, h_post, H_res = self.inner.weights(x.to(torch.float32))
        return h_pre.to(x.dtype), h_post.to(x.dtype), H_res.to(x.dtype)

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.inner.parameters()


def make_float32_inside(n: int, d: int, *, layer_index: int = 0,
                        dtype: torch.dtype = torch.float64, device: str = "cpu", seed: int = 0,
                        **options: Any) -> Float32InsideMHC:
    """Factory of :class:`Float32InsideMHC` (``options``: ``declare``, ``gradient_bug``)."""
    inner = targets.mhc(n, d, layer_index=layer_index, dtype=torch.float32, device=device,
                        seed=seed)
    return Float32InsideMHC(inner, **options)


class StateDropoutMHC(torch.nn.Module):
    """The reference mHC followed by dropout on the whole new state in training mode (as the
    hyper-connections modules do with ``dropout > 0``)."""

    kind = "mhc"

    def __init__(self, inner: ManifoldHyperConnection, p: float) -> None:
        super().__init__()
        self.inner, self.n, self.d, self.p = inner, inner.n, inner.d, p

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:  # type: ignore[override]
        out: torch.Tensor = self.inner.forward(x, branch)
        return torch.nn.functional.dropout(out, self.p, self.training)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.inner.weights(x)


def make_state_dropout(n: int, d: int, *, layer_index: int = 0,
                       dtype: torch.dtype = torch.float64, device: str = "cpu",
                       seed: int = 0) -> StateDropoutMHC:
    """Factory of :class:`StateDropoutMHC` with p = 0.5, in training mode as built."""
    inner = targets.mhc(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    return StateDropoutMHC(inner, 0.5)
