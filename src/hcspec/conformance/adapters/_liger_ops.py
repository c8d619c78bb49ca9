"""Liger-Kernel's mHC as ``torch.library`` custom ops (target ``liger_kernel:mhc-customop``),
for the custom-op family (:mod:`hcspec.conformance.families.customop`).

liger-kernel :data:`~hcspec.conformance.adapters.declarations.liger_kernel.WRITTEN_FOR` ships
its mHC as three ``torch.autograd.Function`` s over Triton kernels (``LigerMHCCoeffsFunction``,
``LigerMHCPreFunction``, ``LigerMHCPostResFunction``), not as custom ops. **Registering them is
this adapter's doing**, the way a kernel author would expose them to ``torch.compile`` /
``torch.export``: in the namespace ``hcspec_liger`` (never Liger's own), each Function becomes an
opaque custom op with

* a fake kernel (the output shapes and dtypes read from the Functions: the coefficients are
  float32, ``x_in`` and the output take ``x``'s dtype);
* an autograd formula whose backward is a second custom op (``…_backward``, with its own fake
  kernel, so AOTAutograd can trace it) that reruns the package's Function and takes its
  gradients: the gradients are the package's Triton backward kernels', unchanged;
* a vmap rule that loops over the vmapped dimension (one call per slice; the kernels have no
  batched form beyond the token axis).

What it does not claim: double backward (the package's backward kernels are not
differentiable; the backward ops have no autograd formula), so ``customop.double_backward`` is
not applicable with that reason. ``forward`` composes the three ops as ``LigerMHC.forward``
composes the Functions, with the dtype handling of :class:`~hcspec.conformance.adapters.
liger_kernel.LigerMHCAdapter` (float64 around the float32 path).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import check_branch_output, check_state
from hcspec.conformance.protocol import Branch, Weights

NAMESPACE: Final = "hcspec_liger"
"""The ``torch.library`` namespace of the adapter's ops (the adapter's, not Liger's)."""

_COEFF_OPTIONS: Final = ("bool allow_fp32, int tmax, float rms_eps, float pre_eps, "
                         "float sinkhorn_eps, float post_mult")

SCHEMAS: Final[dict[str, str]] = {
    "mhc_coeffs": "(Tensor x, Tensor phi, Tensor b, Tensor alpha_pre, Tensor alpha_post, "
                  f"Tensor alpha_res, {_COEFF_OPTIONS}) -> (Tensor, Tensor, Tensor)",
    "mhc_coeffs_backward": "(Tensor x, Tensor phi, Tensor b, Tensor alpha_pre, "
                           "Tensor alpha_post, Tensor alpha_res, Tensor grad_h_pre, "
                           f"Tensor grad_h_post, Tensor grad_h_res, {_COEFF_OPTIONS}) -> "
                           "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "mhc_pre": "(Tensor x, Tensor h_pre) -> Tensor",
    "mhc_pre_backward": "(Tensor x, Tensor h_pre, Tensor grad) -> (Tensor, Tensor)",
    "mhc_post_res": "(Tensor x, Tensor f_out, Tensor h_post, Tensor h_res) -> Tensor",
    "mhc_post_res_backward": "(Tensor x, Tensor f_out, Tensor h_post, Tensor h_res, "
                             "Tensor grad) -> (Tensor, Tensor, Tensor, Tensor)",
}
"""The ops' schemas (none mutates or aliases an input)."""

_TENSORS: Final = {"mhc_coeffs": 6, "mhc_pre": 2, "mhc_post_res": 4}
"""How many leading arguments of each forward op are tensors (the rest are options)."""

_LIBRARY: list[Any] = []
"""The ``torch.library.Library`` holding the definitions (kept alive; defined once)."""


def _functions() -> dict[str, Any]:
    from liger_kernel.ops import mhc

    return {"mhc_coeffs": mhc.LigerMHCCoeffsFunction, "mhc_pre": mhc.LigerMHCPreFunction,
            "mhc_post_res": mhc.LigerMHCPostResFunction}


def _forward_impl(name: str) -> Callable[..., Any]:
    def impl(*args: Any) -> Any:
        with torch.no_grad():
            out = _functions()[name].apply(*args)
        # fresh tensors (the Functions return views of their own outputs): no aliasing
        return tuple(t.clone() for t in out) if isinstance(out, tuple) else out.clone()
    return impl


def _backward_impl(name: str) -> Callable[..., Any]:
    count = _TENSORS[name]
    outputs = 3 if name == "mhc_coeffs" else 1

    def impl(*args: Any) -> tuple[torch.Tensor, ...]:
        tensors = [t.detach().requires_grad_(True) for t in args[:count]]
        grads, options = args[count:count + outputs], args[count + outputs:]
        with torch.enable_grad():
            out = _functions()[name].apply(*tensors, *options)
            outs = out if isinstance(out, tuple) else (out,)
            got = torch.autograd.grad(outs, tensors, grads, allow_unused=True)
        return tuple(torch.zeros_like(t) if g is None else g.to(t.dtype).contiguous()
                     for g, t in zip(got, tensors, strict=True))
    return impl


def _fake_forward(name: str) -> Callable[..., Any]:
    def fake(*args: Any) -> Any:
        x = args[0]
        n, c = x.shape[-2], x.shape[-1]
        outer = tuple(x.shape[:-2])
        if name == "mhc_coeffs":
            return (x.new_empty((*outer, n), dtype=torch.float32),
                    x.new_empty((*outer, n), dtype=torch.float32),
                    x.new_empty((*outer, n, n), dtype=torch.float32))
        if name == "mhc_pre":
            return x.new_empty((*outer, c))
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return fake


def _fake_backward(name: str) -> Callable[..., Any]:
    count = _TENSORS[name]

    def fake(*args: Any) -> tuple[torch.Tensor, ...]:
        return tuple(torch.empty_like(t, memory_format=torch.contiguous_format)
                     for t in args[:count])
    return fake


def _autograd(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    count = _TENSORS[name]
    backward_op = getattr(getattr(torch.ops, NAMESPACE), f"{name}_backward")

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*inputs[:count])
        ctx.options = inputs[count:]
        ctx.shapes = [(o.shape, o.dtype) for o in
                      (output if isinstance(output, tuple) else (output,))]

    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        saved = ctx.saved_tensors
        filled = [torch.zeros(shape, dtype=dtype, device=saved[0].device) if g is None
                  else g.contiguous() for g, (shape, dtype) in zip(grads, ctx.shapes,
                                                                    strict=True)]
        got = backward_op(*saved, *filled, *ctx.options)
        return (*got, *([None] * len(ctx.options)))
    return setup_context, backward


def _loop_vmap(op: Any, count: int) -> Callable[..., Any]:
    """A vmap rule calling ``op`` once per slice of the vmapped dimension and stacking."""
    def rule(info: Any, in_dims: Sequence[int | None], *args: Any) -> tuple[Any, Any]:
        outs = []
        for i in range(info.batch_size):
            sliced = [a.select(d, i) if k < count and d is not None else a
                      for k, (a, d) in enumerate(zip(args, list(in_dims), strict=True))]
            outs.append(op(*sliced))
        if isinstance(outs[0], tuple):
            stacked = tuple(torch.stack(parts) for parts in zip(*outs, strict=True))
            return stacked, tuple(0 for _ in stacked)
        return torch.stack(outs), 0
    return rule


def register() -> Any:
    """Define the ``hcspec_liger`` ops (once per process; imports liger-kernel only when an
    op runs). Returns ``torch.ops.hcspec_liger``."""
    ops = getattr(torch.ops, NAMESPACE)
    if _LIBRARY:
        return ops
    make_library: Callable[..., Any] = torch.library.Library  # (torch leaves it unannotated)
    library = make_library(NAMESPACE, "FRAGMENT")  # kept alive in _LIBRARY
    _LIBRARY.append(library)
    for name, schema in SCHEMAS.items():
        library.define(name + schema)
        qualname = f"{NAMESPACE}::{name}"
        if name.endswith("_backward"):
            base = name.removesuffix("_backward")
            torch.library.impl(qualname, "default", lib=library)(_backward_impl(base))
            torch.library.register_fake(qualname, _fake_backward(base), lib=library)
        else:
            torch.library.impl(qualname, "default", lib=library)(_forward_impl(name))
            torch.library.register_fake(qualname, _fake_forward(name), lib=library)
    for name, count in _TENSORS.items():
        qualname = f"{NAMESPACE}::{name}"
        setup_context, backward = _autograd(name)
        torch.library.register_autograd(qualname, backward, setup_context=setup_context,
                                        lib=library)
        torch.library.register_vmap(qualname, _loop_vmap(getattr(ops, name), count),
                                    lib=library)
    return ops


class LigerMHCCustomOps(nn.Module):
    """LigerMHC composed of the adapter's ``hcspec_liger`` custom ops (module docstring), as
    a kit impl with the capability ``custom_ops`` and ``vmap=True`` declared.

    Shapes, dtypes, devices, parameters and errors: as
    :class:`~hcspec.conformance.adapters.liger_kernel.LigerMHCAdapter` (whose ``LigerMHC`` it
    holds as the submodule ``module``: parameters ``module.phi``, ``module.b``,
    ``module.alpha_pre``, ``module.alpha_post``, ``module.alpha_res``). ``inner`` is that
    adapter (typed loosely so that this module does not import the one that imports it;
    :func:`hcspec.conformance.adapters.liger_kernel.make_customop` builds it).
    """

    kind = "mhc"

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.module = inner.module
        self.n, self.d = inner.n, inner.d
        self.ops = register()
        object.__setattr__(self, "inner", inner)
        self.conventions = dataclasses.replace(
            inner.conventions, vmap=True,
            notes=f"{inner.conventions.notes}; through the adapter's torch.library custom "
                  f"ops {NAMESPACE}::mhc_coeffs, mhc_pre, mhc_post_res (registered by "
                  "hcspec's adapter over Liger's autograd Functions, not by liger-kernel)")

    def _kernel_input(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32) if x.dtype == torch.float64 else x

    def _coeff_args(self, xk: torch.Tensor) -> tuple[Any, ...]:
        m = self.module
        return (xk, m.phi, m.b, m.alpha_pre, m.alpha_post, m.alpha_res, bool(m.allow_fp32),
                int(m.tmax), float(m.rms_eps), float(m.pre_eps), float(m.sinkhorn_eps),
                float(m.post_mult))

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """One mHC step through the three custom ops: ``x [B,T,n,d] -> [B,T,n,d]`` in
        ``x``'s dtype; ``branch`` called once on ``x_in [B,T,d]`` in ``x``'s dtype.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``, or the branch returns another shape.
        """
        check_state(x, self.n, self.d)
        xk = self._kernel_input(x)
        h_pre, h_post, h_res = self.ops.mhc_coeffs(*self._coeff_args(xk))
        x_in = self.ops.mhc_pre(xk, h_pre).to(x.dtype)
        f_out = check_branch_output(branch(x_in), x_in).to(xk.dtype)
        out: torch.Tensor = self.ops.mhc_post_res(xk, f_out, h_post, h_res)
        return out.to(x.dtype)

    def weights(self, x: torch.Tensor) -> Weights:
        """``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` from the ``mhc_coeffs`` op,
        in ``x``'s dtype, differentiable.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
        """
        check_state(x, self.n, self.d)
        h_pre, h_post, h_res = self.ops.mhc_coeffs(*self._coeff_args(self._kernel_input(x)))
        return h_pre.to(x.dtype), h_post.to(x.dtype), h_res.to(x.dtype)

    def custom_ops(self, x: torch.Tensor) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
        """The three calls ``forward`` makes at the state ``x``, with detached leaf copies
        of their tensor arguments (``requires_grad``), for ``torch.library.opcheck``."""
        def leaf(t: torch.Tensor) -> torch.Tensor:
            return t.detach().clone().requires_grad_(True)

        with torch.no_grad():
            xk = self._kernel_input(x)
            args = self._coeff_args(xk)
            h_pre, h_post, h_res = self.ops.mhc_coeffs(*args)
            f_out = self.ops.mhc_pre(xk, h_pre)
        coeffs = tuple(leaf(a) if isinstance(a, torch.Tensor) else a for a in args)
        return [(self.ops.mhc_coeffs.default, coeffs, {}),
                (self.ops.mhc_pre.default, (leaf(xk), leaf(h_pre)), {}),
                (self.ops.mhc_post_res.default,
                 (leaf(xk), leaf(f_out), leaf(h_post), leaf(h_res)), {})]
