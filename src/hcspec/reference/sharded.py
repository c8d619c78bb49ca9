"""Sharded hyper-connections on ``torch.distributed``: the token axis or the model axis split.

Two splits of the state ``X: [B, T, n, d]`` across the ``W`` ranks of a process group, each
rank holding one contiguous chunk, in group-rank order:

* ``"tokens"`` (sequence parallel): rank r holds tokens ``[r·T/W, (r+1)·T/W)``, ``[B, T/W, n, d]``.
  Every HC kind computes its weights per token (HC Eq. 10–13, mHC Eq. 7–9), so the weights
  need no collective; neither does the mixing ``H_res X`` (it acts on the stream axis only).
* ``"hidden"`` (model axis split): rank r holds columns ``[r·d/W, (r+1)·d/W)`` of every stream,
  ``[B, T, n, d/W]``. The mixing ``H_res X + h_post zᵀ`` and the read ``h_preᵀ X`` act per
  column, so they need no collective either; what does need one is every reduction over d
  that produces the weights: mHC's RMS norm of ``vec(X)`` and its projections ``x' φ`` (one
  all-reduce of ``1 + 2n + n²`` partial sums per token), dynamic HC's per-stream LayerNorm and
  its projections ``X̄ W`` (two all-reduces: ``n`` sums, then ``n(n + 3)`` centred sums).
  Static HC needs none.

The branch (the sublayer ``F``) is the whole sublayer as a function of the full ``[B, T, d]``
input: each rank all-gathers its chunk of ``x_in = h_preᵀ X`` along the split axis, calls the
branch once on the gathered tensor (so a token-mixing branch such as attention sees the whole
sequence, in order) and keeps its own chunk of the output. That gather is the sublayer's
communication (Megatron-LM's sequence parallelism does the same around attention), not HC's.

A sharded module is built from an unsharded reference module (:func:`shard_connection`) and
registers the same parameter names: a parameter the split leaves whole (replicated) is the very
same tensor; under ``"hidden"``, the parameters indexed by d (mHC's φ rows, dynamic HC's ``W``)
are replaced by this rank's rows (:meth:`ShardedHyperConnection.shard_parameter`). The
gradients of sharded parameters are complete on their rank (the backward of the all-reduce
sums the upstream gradients); those of replicated parameters hold only this rank's share of
the loss and must be summed over the group by the training framework (as DDP does).
docs/reference.md ("Sharded HC and mHC") counts the collectives.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import torch
import torch.distributed as dist
from torch import nn

# The layout is the kit's (one statement, see that module); re-exported here.
from hcspec.formulas.sharding import SPLITS as SPLITS
from hcspec.formulas.sharding import Split as Split
from hcspec.formulas.sharding import local_chunk as local_chunk
from hcspec.formulas.sharding import split_axis as split_axis
from hcspec.reference.connection import Branch, HyperConnection, Weights, apply_connection
from hcspec.reference.dynamic import DynamicHyperConnection
from hcspec.reference.manifold import ManifoldHyperConnection
from hcspec.reference.sinkhorn import sinkhorn_knopp
from hcspec.reference.static import StaticHyperConnection


class _AllReduceSum(torch.autograd.Function):
    """Sum over the group; the backward sums the upstream gradients over the group too (every
    rank's output feeds its own share of the loss)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        out = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        summed: torch.Tensor = _AllReduceSum.apply(grad, ctx.group)  # type: ignore[no-untyped-call]
        return summed, None


class _AllGather(torch.autograd.Function):
    """Concatenate the ranks' chunks along ``axis`` in group-rank order; the backward returns
    this rank's chunk of the group-summed upstream gradient (a reduce-scatter)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, axis: int,
                group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.axis, ctx.group = axis, group
        ctx.rank, ctx.world = dist.get_rank(group), dist.get_world_size(group)
        chunks = [torch.empty_like(tensor, memory_format=torch.contiguous_format)
                  for _ in range(ctx.world)]
        dist.all_gather(chunks, tensor.contiguous(), group=group)
        return torch.cat(chunks, dim=axis)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        # gloo has no reduce-scatter: sum the whole gradient, then keep this rank's chunk
        # (W times the traffic of a reduce-scatter, which NCCL runs instead).
        grad = grad.contiguous()
        if dist.get_backend(ctx.group) == dist.Backend.NCCL:
            chunks = list(grad.chunk(ctx.world, dim=ctx.axis))
            out = torch.empty_like(chunks[ctx.rank], memory_format=torch.contiguous_format)
            dist.reduce_scatter(out, [c.contiguous() for c in chunks], group=ctx.group)
            return out, None, None
        total = grad.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
        step = total.shape[ctx.axis] // ctx.world
        return total.narrow(ctx.axis, ctx.rank * step, step).contiguous(), None, None


def all_reduce_sum(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``Σ_ranks tensor`` on every rank, differentiable (backward: the same all-reduce).

    Shapes/dtype/device: those of ``tensor`` (the same on every rank). Raises as
    ``torch.distributed.all_reduce`` (no initialised process group, mismatched shapes).
    """
    out: torch.Tensor = _AllReduceSum.apply(tensor, group)  # type: ignore[no-untyped-call]
    return out


def all_gather(tensor: torch.Tensor, axis: int,
               group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """The ranks' ``tensor`` concatenated along ``axis`` in group-rank order, differentiable
    (backward: this rank's chunk of the group-summed gradient).

    Shapes: every rank's ``tensor`` has the same shape; the result is ``W`` times longer along
    ``axis``. Raises as ``torch.distributed.all_gather``.
    """
    out: torch.Tensor = _AllGather.apply(tensor, axis, group)  # type: ignore[no-untyped-call]
    return out


class ShardedHyperConnection(nn.Module):
    """One hyper-connected sublayer, sharded: ``module(x_local, branch) -> x_next_local``.

    Built from an unsharded reference connection by :func:`shard_connection` (or a subclass's
    constructor), on every rank of ``group``; see the module docstring for the splits, the
    branch and the parameters. Attributes: ``n``, ``d`` (the full hidden size), ``kind``,
    ``split``, ``rank``, ``world``, ``d_local`` (``d / W`` under ``"hidden"``, else ``d``).

    Args:
        module: the unsharded connection (its parameters are shared or sliced, never copied
            for the replicated ones).
        split: ``"tokens"`` or ``"hidden"``.
        group: the process group (None: the default group); it must be initialised.

    Raises:
        ValueError: unknown ``split``; ``d`` not divisible by the world size under ``"hidden"``.
        RuntimeError: no initialised process group (from ``torch.distributed``).
    """

    kind: ClassVar[str]
    sharded_by_hidden: ClassVar[tuple[str, ...]] = ()
    """Parameter names indexed by d (sharded under ``"hidden"``); the rest are replicated."""

    def __init__(self, module: HyperConnection, split: str,
                 group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        split_axis(split)
        self.split: str = split
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.n, self.d = module.n, module.d
        if split == "hidden" and self.d % self.world:
            raise ValueError(f"d = {self.d} is not divisible by the world size {self.world}")
        self.d_local = self.d // self.world if split == "hidden" else self.d
        self._unsharded = (module,)  # a tuple: not registered, its parameters are ours
        for name, param in module.named_parameters(recurse=False):
            if self.is_sharded(name):
                local = self.shard_parameter(name, param.detach()).clone()
                setattr(self, name, nn.Parameter(local))
            else:
                setattr(self, name, param)

    def is_sharded(self, name: str) -> bool:
        """Whether parameter ``name`` is split across the ranks (else replicated)."""
        return self.split == "hidden" and name in self.sharded_by_hidden

    def shard_parameter(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """This rank's part of the unsharded parameter ``name`` (a view; indexing only, so it
        also maps index tensors). Replicated parameters are returned whole.

        Shapes: as the unsharded parameter, with its d axis cut to ``d / W`` (see the
        subclasses)."""
        return full

    def _columns(self) -> slice:
        lo = self.rank * self.d_local
        return slice(lo, lo + self.d_local)

    def _check_local(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[-2:] != (
                self.n, self.d_local):
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"expected this rank's chunk of the state, [B, T_local, n, d_local] with "
                f"n={self.n}, d_local={self.d_local} (split {self.split!r}), got {got}")
        return x

    def weights(self, x: torch.Tensor) -> Weights:
        """The effective per-token weights at this rank's chunk ``x [B, T_local, n, d_local]``:
        ``(h_pre, h_post [B, T_local, n], H_res [B, T_local, n, n])``, identical on every rank
        under ``"hidden"`` (after the all-reduces) and the rows of this rank's tokens under
        ``"tokens"``.

        Raises:
            ValueError: ``x`` is not ``[B, T_local, n, d_local]``.
        """
        x = self._check_local(x)
        if self.split == "tokens":
            return self._unsharded[0]._weights(x)  # per token: no collective
        return self._hidden_weights(x)

    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` on this rank's chunk (HC Eq. 3–5, mHC Eq. 3).

        ``branch`` is the whole sublayer on the full ``[B, T, d]`` input (the same on every
        rank): it is called once, on ``x_in`` all-gathered along the split axis, and this
        rank keeps its chunk of the output.

        Shapes: ``x [B, T_local, n, d_local] -> [B, T_local, n, d_local]``.
        Dtype/device: those of ``x`` (which must match the parameters').

        Raises:
            ValueError: ``x`` is not ``[B, T_local, n, d_local]``, or the branch returns a
                shape other than the gathered input's.
        """
        x = self._check_local(x)
        axis = split_axis(self.split)

        def local_branch(x_in: torch.Tensor) -> torch.Tensor:
            gathered = all_gather(x_in, axis, self.group)
            z = branch(gathered)
            if not isinstance(z, torch.Tensor) or z.shape != gathered.shape:
                got = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
                raise ValueError(f"the branch returned {got}, expected {tuple(gathered.shape)}")
            return local_chunk(z, self.split, self.rank, self.world)

        return apply_connection(x, local_branch, *self.weights(x))

    def extra_repr(self) -> str:
        return (f"n={self.n}, d={self.d}, split={self.split!r}, rank={self.rank}, "
                f"world={self.world}")


class ShardedStaticHyperConnection(ShardedHyperConnection):
    """Static HC, sharded: the weights are constants, so neither split needs a collective
    (HC Eq. 14 init as the unsharded module; every parameter replicated)."""

    kind: ClassVar[str] = "hc-static"

    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        module = self._unsharded[0]
        assert isinstance(module, StaticHyperConnection)
        return module._static_weights(x)


class ShardedDynamicHyperConnection(ShardedHyperConnection):
    """Dynamic HC, sharded (HC Eq. 10–13). Under ``"hidden"`` the per-stream LayerNorm over d
    takes two all-reduces per token (the ``n`` stream sums for the means, then ``n`` centred
    sums of squares together with the ``n(n + 2)`` centred projections ``(X − μ) W``, from
    which ``X̄ W = (X − μ) W / σ``); ``W_pre``, ``W_post``, ``W_res`` are split by rows."""

    kind: ClassVar[str] = "hc-dynamic"
    W_pre: torch.Tensor
    W_post: torch.Tensor
    W_res: torch.Tensor
    s_alpha: torch.Tensor
    s_beta: torch.Tensor
    sharded_by_hidden: ClassVar[tuple[str, ...]] = ("W_pre", "W_post", "W_res")

    def shard_parameter(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """``W_pre [d]``, ``W_post [d]``, ``W_res [d, n]``: rows ``[r·d/W, (r+1)·d/W)``."""
        return full[self._columns()] if self.is_sharded(name) else full

    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        module = self._unsharded[0]
        assert isinstance(module, DynamicHyperConnection)
        h_pre, h_post, H_res = module._static_weights(x)
        mean = all_reduce_sum(x.sum(dim=-1), self.group) / self.d  # [B, T, n]
        centred = x - mean.unsqueeze(-1)
        W = torch.cat([self.W_pre.unsqueeze(1), self.W_post.unsqueeze(1), self.W_res], dim=1)
        partial = torch.cat([centred.square().sum(dim=-1, keepdim=True), centred @ W], dim=-1)
        total = all_reduce_sum(partial, self.group)  # [B, T, n, 1 + 2 + n]
        inv_std = torch.rsqrt(total[..., :1] / self.d + module.norm_eps)
        projected = total[..., 1:] * inv_std  # X̄ W: [B, T, n, 2 + n]
        dyn_pre = self.s_alpha * torch.tanh(projected[..., 0])
        dyn_post = self.s_beta * torch.tanh(projected[..., 1])
        dyn_A_r = self.s_alpha * torch.tanh(projected[..., 2:])  # paper A_r layout
        return h_pre + dyn_pre, h_post + dyn_post, H_res + dyn_A_r.transpose(-1, -2)


class ShardedManifoldHyperConnection(ShardedHyperConnection):
    """mHC, sharded (mHC Eq. 7–9). Under ``"hidden"`` each rank holds, for every stream i, the
    columns ``[r·d/W, (r+1)·d/W)``, i.e. the entries ``i·d + k`` of ``vec(X)``, and the same rows
    of ``φ_pre``, ``φ_post``, ``φ_res``; one all-reduce per token sums the ``1 + 2n + n²``
    partial results (``‖vec(X)‖²`` and ``vec(X) φ``), after which every rank computes the same
    ``H_pre``, ``H_post`` and Sinkhorn–Knopp ``H_res``."""

    kind: ClassVar[str] = "mhc"
    phi_pre: torch.Tensor
    phi_post: torch.Tensor
    phi_res: torch.Tensor
    b_pre: torch.Tensor
    b_post: torch.Tensor
    b_res: torch.Tensor
    alpha_pre: torch.Tensor
    alpha_post: torch.Tensor
    alpha_res: torch.Tensor
    sharded_by_hidden: ClassVar[tuple[str, ...]] = ("phi_pre", "phi_post", "phi_res")

    def shard_parameter(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """``φ [n·d, m]``: the rows ``i·d + k`` for every stream i and this rank's columns k,
        ``[n·d/W, m]`` (stream-major, as this rank's ``vec`` of its chunk)."""
        if not self.is_sharded(name):
            return full
        rows = full.reshape(self.n, self.d, *full.shape[1:])[:, self._columns()]
        return rows.reshape(self.n * self.d_local, *full.shape[1:])

    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        module = self._unsharded[0]
        assert isinstance(module, ManifoldHyperConnection)
        batch, tokens, n, d_local = x.shape
        x_flat = x.reshape(batch, tokens, n * d_local)  # this rank's entries of vec(X)
        phi = torch.cat([self.phi_pre, self.phi_post, self.phi_res], dim=1)
        partial = torch.cat([x_flat.square().sum(dim=-1, keepdim=True), x_flat @ phi], dim=-1)
        total = all_reduce_sum(partial, self.group)  # [B, T, 1 + 2n + n²]
        inv_rms = torch.rsqrt(total[..., :1] / (n * self.d) + module.norm_eps)
        projected = inv_rms * total[..., 1:]  # RMSNorm(vec X) φ, Eq. 7
        proj_pre, proj_post = projected[..., :n], projected[..., n : 2 * n]
        proj_res = projected[..., 2 * n :].reshape(batch, tokens, n, n)  # mat(): row-major
        h_pre = torch.sigmoid(self.alpha_pre * proj_pre + self.b_pre)  # Eq. 8
        h_post = 2.0 * torch.sigmoid(self.alpha_post * proj_post + self.b_post)
        H_res = sinkhorn_knopp(self.alpha_res * proj_res + self.b_res,
                               module.sinkhorn_iterations)  # Eq. 9
        return h_pre, h_post, H_res


_SHARDED: Final[tuple[tuple[type[HyperConnection], type[ShardedHyperConnection]], ...]] = (
    (ManifoldHyperConnection, ShardedManifoldHyperConnection),
    (DynamicHyperConnection, ShardedDynamicHyperConnection),  # before its base class
    (StaticHyperConnection, ShardedStaticHyperConnection),
)


def shard_connection(module: HyperConnection, split: str,
                     group: dist.ProcessGroup | None = None) -> ShardedHyperConnection:
    """The sharded counterpart of a reference connection, on this rank of ``group``.

    Raises:
        TypeError: ``module`` is not a reference static, dynamic or manifold connection.
        ValueError: as :class:`ShardedHyperConnection`.
    """
    for unsharded, sharded in _SHARDED:
        if isinstance(module, unsharded):
            return sharded(module, split, group)
    raise TypeError(f"no sharded form for {type(module).__name__}")
