"""Small stand-ins for the kit's own tests of its verdicts: mHC-shaped layers with fixed,
input-independent weights chosen to expose how a property judges a case, not to be correct.

``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` (mHC arXiv:2512.24880 Eq. 3) with

* :func:`make_copy_first_stream`: ``H_res = 1 e₀ᵀ`` (every stream takes stream 0): rows sum
  to 1 exactly, but zero entries (projective diameter Δ = ∞, so the Birkhoff–Hopf bound on the
  column sums is ``inf``), n − 1 dropped streams and a residual path that expands the norm by
  up to √n: no case of the Sinkhorn-bound properties with n ≥ 2 can demonstrate anything on
  it, so they must be "not demonstrated", never passed;
* :func:`make_identity_declared`: ``H_res = I`` declared ``residual_mixing="identity"`` (no
  mixing matrix, as HY-V4): the column sums are exactly 1 and are checked as such;
* :func:`make_constant_one_hot_post`: a plain residual block mapped to the protocol —
  ``h_pre = h_post = e₀`` (constant one-hots, no logits) and ``H_res = I``; its one parameter
  is the branch's input scale, which does not touch H_post;
* :func:`make_no_graph`: the reference mHC whose ``forward`` returns a detached output (no
  autograd graph).

TARGETs: ``tests.conformance.standins:make_expanding_diagonal`` etc.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hcspec.conformance.protocol import Conventions

Branch = Callable[[torch.Tensor], torch.Tensor]


class FixedWeights(nn.Module):
    """The mHC law with fixed weights ``h_pre [n]``, ``h_post [n]``, ``H_res [n, n]``."""

    kind = "mhc"

    def __init__(self, h_pre: torch.Tensor, h_post: torch.Tensor, H_res: torch.Tensor,
                 d: int, conventions: Conventions) -> None:
        super().__init__()
        self.n, self.d = h_pre.shape[0], d
        self.scale = nn.Parameter(torch.ones((), dtype=torch.float64))
        self.register_buffer("h_pre", h_pre)
        self.register_buffer("h_post", h_post)
        self.register_buffer("H_res", H_res)
        self.conventions = conventions

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, n, _ = x.shape
        return (self.h_pre.expand(b, t, n), self.h_post.expand(b, t, n),
                self.H_res.expand(b, t, n, n))

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        h_pre, h_post, H_res = self.weights(x)
        z = branch(self.scale * torch.einsum("btn,btnd->btd", h_pre, x))
        return torch.einsum("btij,btjd->btid", H_res, x) + h_post[..., None] * z[..., None, :]


def _build(h_pre: torch.Tensor, h_post: torch.Tensor, H_res: torch.Tensor, d: int,
           dtype: torch.dtype, device: str, conventions: Conventions | None = None,
           ) -> FixedWeights:
    module = FixedWeights(h_pre, h_post, H_res, d, conventions or Conventions())
    return module.to(dtype=dtype, device=device)


def make_copy_first_stream(n: int, d: int, *, layer_index: int = 0,
                           dtype: torch.dtype = torch.float64, device: str = "cpu",
                           seed: int = 0) -> FixedWeights:
    """``H_res = 1 e₀ᵀ``, ``h_pre = 1/n``, ``h_post = 1``."""
    H = torch.zeros(n, n, dtype=torch.float64)
    H[:, 0] = 1.0
    return _build(torch.full((n,), 1.0 / n, dtype=torch.float64),
                  torch.ones(n, dtype=torch.float64), H, d, dtype, device)


def make_identity_declared(n: int, d: int, *, layer_index: int = 0,
                           dtype: torch.dtype = torch.float64, device: str = "cpu",
                           seed: int = 0) -> FixedWeights:
    """``H_res = I`` declared ``residual_mixing="identity"``, ``h_pre = 1/n``, ``h_post = 1``."""
    return _build(torch.full((n,), 1.0 / n, dtype=torch.float64),
                  torch.ones(n, dtype=torch.float64), torch.eye(n, dtype=torch.float64),
                  d, dtype, device, Conventions(residual_mixing="identity"))


def make_constant_one_hot_post(n: int, d: int, *, layer_index: int = 0,
                               dtype: torch.dtype = torch.float64, device: str = "cpu",
                               seed: int = 0) -> FixedWeights:
    """``h_pre = h_post = e₀``, ``H_res = I``: a residual block on stream 0."""
    one_hot = torch.zeros(n, dtype=torch.float64)
    one_hot[0] = 1.0
    return _build(one_hot, one_hot.clone(), torch.eye(n, dtype=torch.float64), d, dtype, device)


class _Detached(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.n, self.d = getattr(inner, "n"), getattr(inner, "d")  # noqa: B009
        self.kind = getattr(inner, "kind")  # noqa: B009 - the protocol's attribute
        self.conventions = getattr(inner, "conventions", Conventions())

    def weights(self, x: torch.Tensor) -> Any:
        return self.inner.weights(x)  # type: ignore[operator]

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        return self.inner(x, branch).detach()  # type: ignore[no-any-return]


def make_no_graph(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0) -> nn.Module:
    """The reference mHC with a detached output: ``forward`` has no autograd graph."""
    from hcspec.conformance.subjects.targets import resolve

    inner = resolve("reference:mhc").factory(n, d, layer_index=layer_index, dtype=dtype,
                                             device=device, seed=seed)
    return _Detached(inner)


class _RangeMarker:
    """An NVTX-range-like context manager: it reads a timer on entry (a C builtin
    TorchDynamo cannot trace)."""

    def __enter__(self) -> _RangeMarker:
        import time

        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Scale(torch.autograd.Function):
    """``x · _Scale.factor``: reads a class attribute inside an autograd Function."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * _Scale.factor

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * _Scale.factor


class _GraphBreak(_Detached):
    """The reference mHC with one construct TorchDynamo breaks the graph on, before it."""

    def __init__(self, inner: nn.Module, construct: str) -> None:
        super().__init__(inner)
        self.construct = construct

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        if self.construct == "range":
            with _RangeMarker():
                return self.inner(x, branch)  # type: ignore[no-any-return]
        if self.construct == "autograd_function":
            return self.inner(_Scale.apply(x), branch)  # type: ignore[no-any-return]
        torch.manual_seed(0)
        return self.inner(x, branch)  # type: ignore[no-any-return]


def graph_break_factory(construct: str) -> Callable[..., nn.Module]:
    """A factory of the reference mHC whose forward breaks TorchDynamo's graph with
    ``construct``: ``"range"`` (a context manager reading a timer, as an NVTX range),
    ``"autograd_function"`` (a class attribute read inside an autograd Function) or
    ``"manual_seed"`` (``torch.manual_seed`` in forward)."""
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> nn.Module:
        inner = make_no_graph(n, d, layer_index=layer_index, dtype=dtype, device=device,
                              seed=seed).inner
        return _GraphBreak(inner, construct)

    return make


def make_all_ones(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0) -> FixedWeights:
    """``H_res = 11ᵀ`` (every stream adds all the streams, as x-transformers' HC)."""
    return _build(torch.full((n,), 1.0 / n, dtype=torch.float64),
                  torch.ones(n, dtype=torch.float64), torch.ones(n, n, dtype=torch.float64),
                  d, dtype, device)


class _NormedBranch(_Detached):
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        def normed(z: torch.Tensor) -> torch.Tensor:
            return branch(torch.nn.functional.rms_norm(z, (z.shape[-1],), eps=1e-12))

        return self.inner(x, normed)  # type: ignore[no-any-return]


def make_normed_branch_input(n: int, d: int, *, layer_index: int = 0,
                             dtype: torch.dtype = torch.float64, device: str = "cpu",
                             seed: int = 0) -> nn.Module:
    """The reference mHC that gives the branch RMSNorm(x_in) while declaring ``x_in``."""
    inner = make_no_graph(n, d, layer_index=layer_index, dtype=dtype, device=device,
                          seed=seed).inner
    return _NormedBranch(inner)
