"""Stand-ins for the custom-op family's tests: reference:mhc whose residual mixing
``X' = H_res X + h_post F(h_preᵀX)ᵀ`` runs as a ``torch.library`` custom op, registered fully
(``make``: fake kernel and autograd formula) or with a fake kernel of the wrong shape
(``make_bad_fake``)."""

from __future__ import annotations

from typing import Any

import torch

from hcspec.conformance.subjects.targets import resolve


def _mix(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
         f: torch.Tensor) -> torch.Tensor:
    return torch.einsum("btij,btjd->btid", H_res, x) + h_post.unsqueeze(-1) * f.unsqueeze(-2)


@torch.library.custom_op("hcspec_test::mix", mutates_args=())
def mix(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
        f: torch.Tensor) -> torch.Tensor:
    """The residual mixing as an opaque kernel."""
    return _mix(x, H_res, h_post, f)


@mix.register_fake
def _(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
      f: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    x, H_res, h_post, f = ctx.saved_tensors
    return (torch.einsum("btij,btid->btjd", H_res, grad),
            torch.einsum("btid,btjd->btij", grad, x),
            (grad * f.unsqueeze(-2)).sum(-1),
            (grad * h_post.unsqueeze(-1)).sum(-2))


mix.register_autograd(_backward, setup_context=_setup)


def _vmap_rule(info: Any, in_dims: tuple[int | None, ...], x: torch.Tensor,
               H_res: torch.Tensor, h_post: torch.Tensor,
               f: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The vmapped dimension folded into the batch axis B (the op is per token)."""
    size = info.batch_size
    args = [t.movedim(d, 0) if d is not None else t.unsqueeze(0).expand(size, *t.shape)
            for t, d in zip((x, H_res, h_post, f), in_dims, strict=True)]
    folded = [a.reshape(size * a.shape[1], *a.shape[2:]) for a in args]
    out = mix(*folded)
    return out.reshape(size, -1, *out.shape[1:]), 0


mix.register_vmap(_vmap_rule)


@torch.library.custom_op("hcspec_test::mix_bad_fake", mutates_args=())
def mix_bad_fake(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
                 f: torch.Tensor) -> torch.Tensor:
    """The same kernel, whose fake kernel gives the wrong shape."""
    return _mix(x, H_res, h_post, f)


@mix_bad_fake.register_fake
def _(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
      f: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(f)  # [B, T, d], not [B, T, n, d]


mix_bad_fake.register_autograd(_backward, setup_context=_setup)


class CustomOpMHC:
    """reference:mhc with its mixing through ``op``."""

    def __init__(self, inner: Any, op: Any) -> None:
        self.inner, self.op = inner, op
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def weights(self, x: torch.Tensor) -> Any:
        return self.inner.weights(x)

    def parameters(self) -> Any:
        return self.inner.parameters()

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        h_pre, h_post, H_res = self.inner.weights(x)
        f = branch(torch.einsum("bti,btid->btd", h_pre, x))
        out: torch.Tensor = self.op(x, H_res, h_post, f)
        return out

    def custom_ops(self, x: torch.Tensor) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
        """The op forward calls, at the state ``x`` (a differentiable sample call)."""
        h_pre, h_post, H_res = (t.detach() for t in self.inner.weights(x))
        f = torch.einsum("bti,btid->btd", h_pre, x).detach()
        args = tuple(t.clone().requires_grad_(True) for t in (x.detach(), H_res, h_post, f))
        return [(self.op, args, {})]


def make(n: int, d: int, **kwargs: Any) -> CustomOpMHC:
    """reference:mhc, its mixing a fully registered custom op."""
    return CustomOpMHC(resolve("reference:mhc").factory(n, d, **kwargs), mix)


def make_bad_fake(n: int, d: int, **kwargs: Any) -> CustomOpMHC:
    """reference:mhc, its mixing a custom op whose fake kernel has the wrong shape."""
    return CustomOpMHC(resolve("reference:mhc").factory(n, d, **kwargs), mix_bad_fake)


class Bypass(CustomOpMHC):
    """Names the op in ``custom_ops`` but computes the mixing in plain torch."""

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        h_pre, h_post, H_res = self.inner.weights(x)
        return _mix(x, H_res, h_post, branch(torch.einsum("bti,btid->btd", h_pre, x)))


def make_bypass(n: int, d: int, **kwargs: Any) -> Bypass:
    """reference:mhc naming a custom op its forward never calls."""
    return Bypass(resolve("reference:mhc").factory(n, d, **kwargs), mix)


@torch.library.custom_op("hcspec_test::mix_once", mutates_args=())
def mix_once(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
             f: torch.Tensor) -> torch.Tensor:
    """The same kernel, whose backward is not differentiable (it detaches)."""
    return _mix(x, H_res, h_post, f)


@mix_once.register_fake
def _(x: torch.Tensor, H_res: torch.Tensor, h_post: torch.Tensor,
      f: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _backward_detached(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(g.detach() for g in _backward(ctx, grad.detach()))


mix_once.register_autograd(_backward_detached, setup_context=_setup)


class DoubleBackward(CustomOpMHC):
    """Declares ``double_backward=True``."""

    def __init__(self, inner: Any, op: Any) -> None:
        super().__init__(inner, op)
        import dataclasses

        from hcspec.conformance.protocol import conventions_of
        self.conventions = dataclasses.replace(conventions_of(inner), double_backward=True)


def make_double_backward(n: int, d: int, **kwargs: Any) -> DoubleBackward:
    """The fully registered op (its backward is plain torch: differentiable), declared."""
    return DoubleBackward(resolve("reference:mhc").factory(n, d, **kwargs), mix)


def make_double_backward_detached(n: int, d: int, **kwargs: Any) -> DoubleBackward:
    """Declares double backward, but its op's backward detaches."""
    return DoubleBackward(resolve("reference:mhc").factory(n, d, **kwargs), mix_once)


class VmapMHC(torch.nn.Module):
    """reference:mhc (an nn.Module) with its mixing through ``op``, declaring vmap=True."""

    def __init__(self, inner: Any, op: Any) -> None:
        super().__init__()
        import dataclasses

        from hcspec.conformance.protocol import conventions_of
        self.inner, self.op = inner, op
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = dataclasses.replace(conventions_of(inner), vmap=True)

    def weights(self, x: torch.Tensor) -> Any:
        return self.inner.weights(x)

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        h_pre, h_post, H_res = self.inner.weights(x)
        f = branch(torch.einsum("bti,btid->btd", h_pre, x))
        out: torch.Tensor = self.op(x, H_res, h_post, f)
        return out


def make_vmap(n: int, d: int, **kwargs: Any) -> VmapMHC:
    """The op with a vmap rule, declared vmap=True."""
    return VmapMHC(resolve("reference:mhc").factory(n, d, **kwargs), mix)


class ReadsAScalar(VmapMHC):
    """Declares vmap=True, but branches in Python on a value of its weights (.item())."""

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        h_pre, h_post, H_res = self.inner.weights(x)
        scale = 1.0 if float(H_res.sum().item()) > 0 else -1.0
        f = branch(torch.einsum("bti,btid->btd", h_pre, x))
        out: torch.Tensor = self.op(x, H_res, scale * h_post, f)
        return out


def make_vmap_item(n: int, d: int, **kwargs: Any) -> ReadsAScalar:
    """Declares vmap=True; forward calls .item() on a parameter-dependent value."""
    return ReadsAScalar(resolve("reference:mhc").factory(n, d, **kwargs), mix)
