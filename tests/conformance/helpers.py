"""Small hand-written implementations for the kit's own tests (good and broken in one way)."""

from __future__ import annotations

from collections.abc import Callable

import torch

Branch = Callable[[torch.Tensor], torch.Tensor]


class LinearHC:
    """A minimal correct static HC with given weights (no nn.Module, no optional capability
    except ``weights``): ``X' = H X + h_post F(h_preᵀ X)ᵀ``."""

    kind = "hc-static"

    def __init__(self, h_pre: torch.Tensor, h_post: torch.Tensor, H_res: torch.Tensor,
                 d: int) -> None:
        self.n, self.d = h_pre.shape[0], d
        self.h_pre, self.h_post, self.H_res = h_pre, h_post, H_res

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t = x.shape[:2]
        return (self.h_pre.expand(b, t, self.n), self.h_post.expand(b, t, self.n),
                self.H_res.expand(b, t, self.n, self.n))

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        z = branch(torch.einsum("n,btnd->btd", self.h_pre, x))
        return torch.einsum("ij,btjd->btid", self.H_res, x) + self.h_post[:, None] * z[..., None, :]


def make_linear(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0) -> LinearHC:
    """Random (seeded) weights, the static HC law."""
    gen = torch.Generator().manual_seed(seed)
    h_pre, h_post, H = (torch.randn(*s, generator=gen, dtype=torch.float64) for s in
                        ((n,), (n,), (n, n)))
    return LinearHC(h_pre.to(dtype), h_post.to(dtype), H.to(dtype), d)


class OverwritesInput:
    """A correct dynamic HC (the reference) whose forward then overwrites its input tensor
    with the new state: the only bug is the in-place modification of the caller's tensor
    (its autograd graph is built on a private copy, so gradients stay right)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind  # type: ignore[attr-defined]

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.inner.weights(x)  # type: ignore[attr-defined,no-any-return]

    def parameters(self):  # type: ignore[no-untyped-def]
        return self.inner.parameters()  # type: ignore[attr-defined]

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        out: torch.Tensor = self.inner.forward(x.clone(), branch)  # type: ignore[attr-defined]
        with torch.no_grad():
            x.copy_(out)
        return out


def make_overwrites_input(n: int, d: int, **kwargs: object) -> OverwritesInput:
    """:class:`OverwritesInput` around ``reference:hc-dynamic``."""
    from hcspec.conformance.adapters.reference import make_hc_dynamic

    return OverwritesInput(make_hc_dynamic(n, d, **kwargs))  # type: ignore[arg-type]


class DropoutOnOutput(LinearHC):
    """:class:`LinearHC` whose output goes through dropout (p = 0.5, always in training mode):
    its random draws come from torch's global RNG, so its failures depend on that RNG."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        return torch.nn.functional.dropout(super().forward(x, branch), 0.5, training=True)


def make_dropout_on_output(n: int, d: int, **kwargs: object) -> DropoutOnOutput:
    """:class:`DropoutOnOutput` with :func:`make_linear`'s seeded weights."""
    inner = make_linear(n, d, **kwargs)  # type: ignore[arg-type]
    return DropoutOnOutput(inner.h_pre, inner.h_post, inner.H_res, d)


EXPECTED_NOT_APPLICABLE = ("applies to ", "no CUDA device", "this run is single-process",
                           "needs the capability threads,", "needs the capability custom_ops,",
                           "does not declare double_backward=True", "does not declare vmap=True")
"""The only reasons a correct implementation on this CPU machine may be not applicable: a kind
mismatch (``applies to mhc; the target's kind is ...``), the absent GPU (the CUDA
requirement's reason names the property, then ``no CUDA device (...)``), for the
``parallel`` family a run without ranks (those properties run under ``--world-size N`` in
tests/conformance/parallel), the native thread-count property
(``determinism.thread_count``), which needs a kernel whose thread count the kit can set, and
the custom-op family (``customop.*``), which needs ``torch.library`` custom ops to check or a
declared claim (``double_backward``, ``vmap``) that a target need not make."""


def is_expected_not_applicable(message: str) -> bool:
    """Whether a not-applicable message gives one of :data:`EXPECTED_NOT_APPLICABLE`."""
    return any(reason in message for reason in EXPECTED_NOT_APPLICABLE)
