"""The fast path of mHC: the same math as :mod:`hcspec.reference.manifold`, arranged for speed.

Selected by ``ManifoldHyperConnection(..., implementation="fast")``; the readable version stays
the default. Same equations (mHC arXiv:2512.24880 Eq. 3, 7–9; row form of docs/reference.md), same
parameters, same results to rounding — checked by ``tests/reference/test_fast.py`` (float64,
outputs and every gradient) and by the conformance kit as the built-in target
``reference:mhc-fast``. What changes is where the time went (measured with ``torch.profiler``
on CPU, float32, B=4, T=512, n=4, d=1024; docs/benchmarks.md has the figures):

* **Fresh full-size tensors.** Every new ``[B, T, n, d]`` tensor is a fresh allocation, and on
  Linux/glibc blocks of 32 MiB and more are ``mmap``-ed and page-faulted in on first touch —
  ~20 ms for a 32 MiB state, 6× the cost of the copy itself. Autograd over the readable
  version makes one such gradient per use of ``X`` (RMS norm, projection, read, mix) and then
  adds them. Here three autograd Functions share one gradient buffer: the last one
  (:class:`_Write`) allocates ``∂L/∂X``, the earlier ones add their terms into it in place
  (``addcmul_``, ``addmm_``), so a forward+backward allocates exactly two full-size tensors,
  the output and ``∂L/∂X``. Autograd delivers that buffer to them through a *conduit*: each
  Function outputs a one-element stand-in for ``X`` (its shape, strides 0) that the next one
  takes as an input, and the gradient of ``X`` travels back along the conduits (the Functions
  return none for ``X`` itself). Not a view of ``X``: TorchDynamo refuses to trace Functions
  whose outputs are views of their inputs, and with the conduit
  ``torch.compile(fullgraph=True)`` traces the fast path (there the additions are traced out
  of place, as the compiler would make them anyway).
* **Token-last small tensors.** The per-token weights are ``n × n`` matrices: with the token
  axis last (``[n, n, B·T]``) each Sinkhorn–Knopp step is one vectorised ``log_softmax`` over
  a short leading axis (~12× faster on CPU than over the trailing 4-element axes).
* **Sinkhorn–Knopp backward by recomputation** (:class:`_SinkhornKnopp`): the forward keeps
  only the logits; the backward recomputes the ``2·t_max`` iterates and applies the exact
  derivative of each log-normalisation, ``∂x = ∂y − softmax(x) · Σ ∂y`` (the gradient of the
  unrolled iteration, as autograd computes it for the readable version, without storing
  ``2·t_max`` autograd nodes).
* Matrix products with the transposed operand passed as a transposed view, which the BLAS takes
  as a flag (``g @ Xᵀ`` as a ``[1, d] × [d, n]`` product per token: ~3× faster than ``X g``).
* **Huge pages for the two fresh full-size tensors** (:func:`_fresh`): the output and ``∂L/∂X``
  are allocated empty, advised as transparent huge pages (``madvise(MADV_HUGEPAGE)``, on Linux,
  what ``THP_MEM_ALLOC_ENABLE=1`` does for all of PyTorch) and first touched by the ``bmm`` that
  writes them: 2 MiB faults instead of 4 KiB ones. Measured (thread CPU time, one thread, the
  main configuration, interleaved with the previous version on a loaded 2-core machine):
  fwd+bwd 152 → 132 ms. The values are bitwise those of plain ``torch.bmm``.

What limits it (the roofline of benchmarks/roofline.py counts 5 passes over the 32 MiB state:
read X and write X' forward; read G', read X and write ∂X backward). In eager PyTorch every
op is its own pass, and this path makes about 21 (forward: projection, norm, read, mix, the
``h_post zᵀ`` update; backward: ``H_resᵀ G'``, ``∂H_res``, ``∂h_post``, ``∂z``, the read's,
the projection's and the norm's updates of ``∂X``, ``∂φ``), each at roughly copy bandwidth
(the per-token ``n × n`` products run as fast as a copy), plus the first touch of the two fresh
tensors. Blocking the passes by tokens so that a second pass reads from cache measured no
faster here (token blocks of 16–128). Reaching 3× the bound needs those passes fused into one
read of X and G' each — a compiled or hand-written kernel, not a sequence of ATen ops.

These Functions are once-differentiable (no double backward).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from hcspec.reference.sinkhorn import DEFAULT_ITERATIONS, check_arguments, working_precision

Tensor = torch.Tensor


def _log_iterates(log_m: Tensor, iterations: int) -> list[Tensor]:
    """All ``2·iterations`` log-domain iterates of Sinkhorn–Knopp on ``[n, n, N]`` logits
    (column step over axis 0, then row step over axis 1)."""
    iterates = []
    for _ in range(iterations):
        log_m = torch.log_softmax(log_m, dim=0)  # T_c: columns sum to 1
        iterates.append(log_m)
        log_m = torch.log_softmax(log_m, dim=1)  # T_r: rows sum to 1
        iterates.append(log_m)
    return iterates


class _SinkhornKnopp(torch.autograd.Function):
    """Log-domain Sinkhorn–Knopp on matrix-first logits ``[n, n, N]`` (``[i, j, token]``)."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, iterations: int) -> Tensor:
        ctx.iterations = iterations
        ctx.save_for_backward(logits)
        log_m = logits
        for _ in range(iterations):
            log_m = torch.log_softmax(torch.log_softmax(log_m, dim=0), dim=1)
        return log_m.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (logits,) = ctx.saved_tensors
        grad = grad.contiguous()  # reductions over the leading axes want the token axis dense
        iterates = _log_iterates(logits, ctx.iterations)
        # out = exp(y_last); each step y = log_softmax_dim(x) has ∂x = ∂y − exp(y)·Σ_dim ∂y,
        # which is aten's log_softmax backward (one fused kernel per step, as autograd uses).
        g = grad * iterates[-1].exp()
        for index in range(len(iterates) - 1, -1, -1):
            dim = index % 2  # even index: column step (axis 0); odd: row step (axis 1)
            g = torch.ops.aten._log_softmax_backward_data(g, iterates[index], dim, g.dtype)
        return g, None


def sinkhorn_knopp_matrix_first(logits: Tensor, iterations: int = DEFAULT_ITERATIONS) -> Tensor:
    """Sinkhorn–Knopp on logits laid out ``[n, n, ...]`` (matrix axes first, tokens last).

    Same result as ``sinkhorn_knopp(logits.movedim((0, 1), (-2, -1)))`` moved back, computed
    with :class:`_SinkhornKnopp` (vectorised over the trailing axes; backward by recomputation).
    Shapes: ``[n, n, *] -> [n, n, *]``. Dtype/device: as :func:`reference.sinkhorn_knopp`
    (float16/bfloat16 computed in float32 and cast back). No argument checks (internal use;
    :func:`sinkhorn_knopp_fast` is the checked entry point).
    """
    n = logits.shape[0]
    # contiguous: a moved-axes view would keep the token axis strided, and log_softmax over the
    # leading axes is fast only with the token axis dense
    work = working_precision(logits).reshape(n, n, -1).contiguous()
    out: Tensor = _SinkhornKnopp.apply(work, iterations)  # type: ignore[no-untyped-call]
    return out.reshape(logits.shape).to(logits.dtype)


def sinkhorn_knopp_fast(logits: Tensor, iterations: int = DEFAULT_ITERATIONS) -> Tensor:
    """:func:`reference.sinkhorn_knopp` (mHC §4.2, Eq. 8–9) computed by the fast path.

    Same contract — shapes ``[..., n, n] -> [..., n, n]``, dtype/device, finiteness for any
    finite logits, rows exact and columns within the convergence error — and the same values
    to rounding. It moves the matrix axes first, iterates ``log_softmax`` over them, and
    differentiates by recomputing the iterates in backward (less memory: the logits only).
    Once-differentiable.

    Raises:
        TypeError: ``logits`` is not a floating-point tensor.
        ValueError: ``logits`` is not at least 2-D with square trailing axes, or
            ``iterations`` is not an integer ≥ 1.
    """
    iterations = check_arguments(logits, iterations)
    matrix_first = logits.movedim((-2, -1), (0, 1))
    return sinkhorn_knopp_matrix_first(matrix_first, iterations).movedim((0, 1), (-2, -1))


def _conduit(x: Tensor) -> Tensor:
    """A one-element stand-in for ``x`` (same shape, all strides 0) through which autograd
    hands the shared gradient buffer ``∂L/∂X`` from one Function's backward to the next."""
    return torch.zeros((), dtype=x.dtype, device=x.device).expand(x.shape)


def _pass_conduit(ctx: Any, conduit: Tensor, carries_gradient: bool) -> Tensor:
    """``conduit``, marked non-differentiable when no gradient of ``X`` is wanted (so that no
    later backward allocates the buffer for nothing)."""
    if not carries_gradient:
        ctx.mark_non_differentiable(conduit)
    return conduit


_HUGE_PAGE_MIN_BYTES = 4 * 2**20
_MADV_HUGEPAGE = 14  # <sys/mman.h> on Linux


@functools.cache
def _madvise() -> Any:
    """libc's ``madvise`` on Linux, else None (then :func:`_fresh` is plain ``torch.empty``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def _fresh(shape: torch.Size, like: Tensor) -> Tensor:
    """An uninitialised ``shape`` tensor of ``like``'s dtype/device for a full-size result.

    On Linux CPU, for a block of at least 4 MiB, the pages of the block are first advised as
    transparent huge pages (``madvise(MADV_HUGEPAGE)``, what PyTorch's own
    ``THP_MEM_ALLOC_ENABLE=1`` does for every large allocation), so the first touch — made by
    the op that writes the result — faults in 2 MiB pages instead of 4 KiB ones. Nothing else
    changes: the values are those the op writes; where the advice is unavailable or refused
    (THP ``never``, another OS, a tracing compiler) it is plain ``torch.empty``.
    """
    out = torch.empty(shape, dtype=like.dtype, device=like.device)
    madvise = _madvise() if like.device.type == "cpu" else None
    if madvise is not None and out.nbytes >= _HUGE_PAGE_MIN_BYTES \
            and not torch.compiler.is_compiling():
        start = -(-out.data_ptr() // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (out.data_ptr() + out.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        madvise(start, end - start, _MADV_HUGEPAGE)  # advice only: the result is not checked
    return out


def _bmm_fresh(a: Tensor, b: Tensor) -> Tensor:
    """``torch.bmm(a, b)`` (``[k, i, j] @ [k, j, m]``) written into a :func:`_fresh` tensor; the
    plain op while a compiler traces (``out=`` and the advice are eager-only)."""
    if torch.compiler.is_compiling():
        return torch.bmm(a, b)
    return torch.bmm(a, b, out=_fresh(torch.Size((a.shape[0], a.shape[1], b.shape[2])), b))


def _in_place() -> bool:
    """Whether backward adds its terms into the delivered gradient buffer in place: in eager it
    is the buffer that :class:`_Write`'s backward allocated, owned by this chain. While
    TorchDynamo traces a backward it stands for the conduit (strides 0, not writable), so the
    out-of-place op is traced — what the compiler makes of the in-place one anyway."""
    return not torch.compiler.is_compiling()


class _Project(torch.autograd.Function):
    """``x [N, n, d] -> (x_flat φ as [m, N], ‖x_flat‖² [N], conduit)`` with ``x_flat = vec(x)``
    (``‖x_flat‖²`` in float32 for a float16/bfloat16 ``x``: the sum of n·d squares overflows
    float16 from an RMS of √(65504 / (n·d)) on).

    The conduit (:func:`_conduit`) goes on to :class:`_Read`; the buffer that arrives as its
    gradient holds ``∂L/∂X`` so far (the terms of :class:`_Write` and :class:`_Read`), the
    projection's terms are added into it, and it is returned as the gradient of ``x``.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, phi: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        flat = x.view(x.shape[0], -1)
        ctx.save_for_backward(x, phi)
        projected = torch.mm(phi.t(), flat.t())  # [m, N]: token axis last
        square_sum = torch.linalg.vector_norm(working_precision(flat), dim=1).square()
        return (projected, square_sum,
                _pass_conduit(ctx, _conduit(x), ctx.needs_input_grad[0]))

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_projected: Tensor | None, g_square_sum: Tensor | None,
                 g_conduit: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
        x, phi = ctx.saved_tensors
        flat = x.view(x.shape[0], -1)
        grad_x = grad_phi = None
        if ctx.needs_input_grad[0]:
            grad_flat = (g_conduit.view(flat.shape) if g_conduit is not None
                         else torch.zeros_like(flat))
            in_place = _in_place()
            if g_projected is not None:
                grad_flat = (grad_flat.addmm_ if in_place else grad_flat.addmm)(
                    g_projected.t(), phi.t())
            if g_square_sum is not None:
                grad_flat = (grad_flat.addcmul_ if in_place else grad_flat.addcmul)(
                    flat, (2.0 * g_square_sum).to(flat.dtype).unsqueeze(1))
            grad_x = grad_flat.view(x.shape)
        if ctx.needs_input_grad[1] and g_projected is not None:
            grad_phi = torch.mm(g_projected, flat).t()
        return grad_x, grad_phi


class _Read(torch.autograd.Function):
    """``(x [N, n, d], conduit, h_pre [N, n]) -> (x_in = h_preᵀ X [N, d], conduit)``.

    The gradient of ``x`` leaves through the conduit: the buffer arriving on the output conduit
    gets ``h_pre g_inᵀ`` added and goes back on the input conduit (``x`` itself gets none).
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, conduit: Tensor, h_pre: Tensor) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, h_pre)
        x_in = torch.bmm(h_pre.unsqueeze(1), x).squeeze(1)
        return x_in, _pass_conduit(ctx, _conduit(x), ctx.needs_input_grad[1])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_in: Tensor | None,
                 g_conduit: Tensor | None) -> tuple[None, Tensor | None, Tensor | None]:
        x, h_pre = ctx.saved_tensors
        grad_x = grad_h_pre = None
        if ctx.needs_input_grad[1]:
            grad_x = g_conduit if g_conduit is not None else torch.zeros_like(x)
            if g_in is not None:  # + h_pre g_inᵀ
                grad_x = (grad_x.addcmul_ if _in_place() else grad_x.addcmul)(
                    h_pre.unsqueeze(2), g_in.unsqueeze(1))
        if ctx.needs_input_grad[2]:
            grad_h_pre = (torch.zeros_like(h_pre) if g_in is None
                          else torch.bmm(g_in.unsqueeze(1), x.transpose(1, 2)).squeeze(1))
        return None, grad_x, grad_h_pre


class _Write(torch.autograd.Function):
    """``(x [N, n, d], conduit, H_res [N, n, n], h_post [N, n], z [N, d]) -> H_res X + h_post
    zᵀ``.

    Backward allocates ``∂L/∂X = H_resᵀ G'`` — the one full-size gradient buffer — and returns
    it on the conduit, so that :class:`_Read` and :class:`_Project` add their terms into it.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, conduit: Tensor, H_res: Tensor, h_post: Tensor,
                z: Tensor) -> Tensor:
        ctx.save_for_backward(x, H_res, h_post, z)
        return _bmm_fresh(H_res, x).addcmul_(h_post.unsqueeze(2), z.unsqueeze(1))

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        x, H_res, h_post, z = ctx.saved_tensors
        g = g.contiguous()
        need = ctx.needs_input_grad
        grad_x = None
        if need[1]:
            grad_x = _bmm_fresh(H_res.transpose(1, 2), g)
        grad_H = torch.bmm(g, x.transpose(1, 2)) if need[2] else None
        grad_h_post = torch.bmm(z.unsqueeze(1), g.transpose(1, 2)).squeeze(1) if need[3] else None
        grad_z = torch.bmm(h_post.unsqueeze(1), g).squeeze(1) if need[4] else None
        return None, grad_x, grad_H, grad_h_post, grad_z


def project(x: Tensor, phi: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``x [B, T, n, d]``, ``φ [n·d, m]`` -> ``(x_flat φ [m, B·T], ‖x_flat‖² [B·T], x
    [B·T, n, d], conduit [B·T, n, d])``: one read of the state for the mHC weight generation
    (mHC Eq. 7, with the RMS division moved after the projection as in §4.3.1). Token axis
    last. Pass the state and the conduit on to :func:`read`."""
    batch, tokens, n, d = x.shape
    flat = x.contiguous().view(batch * tokens, n, d)
    projected, square_sum, conduit = _Project.apply(flat, phi)  # type: ignore[no-untyped-call]
    return projected, square_sum, flat, conduit


def read(x: Tensor, conduit: Tensor, h_pre: Tensor) -> tuple[Tensor, Tensor]:
    """``x_in = h_preᵀ X`` per token: ``x [N, n, d]`` and its conduit (from :func:`project`),
    ``h_pre [N, n]`` -> ``(x_in [N, d], conduit [N, n, d])`` for :func:`write` (HC Eq. 3 /
    mHC Eq. 3, the read)."""
    out: tuple[Tensor, Tensor] = _Read.apply(x, conduit, h_pre)  # type: ignore[no-untyped-call]
    return out


def write(x: Tensor, conduit: Tensor, H_res: Tensor, h_post: Tensor, z: Tensor) -> Tensor:
    """``X' = H_res X + h_post zᵀ`` per token: ``x [N, n, d]`` and its conduit (from
    :func:`read`), ``H_res [N, n, n]``, ``h_post [N, n]``, ``z [N, d]`` -> ``[N, n, d]``
    (HC Eq. 4–5 / mHC Eq. 3, mix and write back)."""
    out: Tensor = _Write.apply(x, conduit, H_res, h_post, z)  # type: ignore[no-untyped-call]
    return out
