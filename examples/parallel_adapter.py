"""A worked sharded adapter: a sequence-parallel mHC in Megatron-LM's layout, checked on ranks.

``SequenceParallelMHC`` stands for "someone else's code": the residual stream is one
``[s, b, n·C]`` tensor (sequence first, the n streams flattened into the hidden axis, as
Megatron-LM keeps it), split along s across the tensor-parallel group when
``sequence_parallel`` is on. It computes mHC's coefficients per token (mHC arXiv:2512.24880
Eq. 7–9: RMS norm of the flattened state, one fused projection, σ, 2σ, log-domain
Sinkhorn–Knopp), gathers the sequence before the sublayer and keeps its own tokens after it.
Its parameters are replicated on every rank; the framework all-reduces their gradients over the
group (what Megatron-LM does for parameters it marks ``sequence_parallel``).

The adapter translates the kit's ``[B, T, n, d]`` to ``[T, B, n·d]`` and back, the kit's
``[B, T, d]`` branch to the module's ``[s, b, C]`` sublayer, and declares the split and the
parameter map.

Run it:  hc-conformance run examples.parallel_adapter:make --world-size 2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from hcspec.conformance.parallel.protocol import ParameterShard

Sublayer = Callable[[torch.Tensor], torch.Tensor]


# --- someone else's code --------------------------------------------------------------------
class _GatherSequence(torch.autograd.Function):
    """All-gather along s (dim 0); backward: sum over the group, keep this rank's tokens."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[no-untyped-def]
        ctx.group = group
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        rank, world = dist.get_rank(ctx.group), dist.get_world_size(ctx.group)
        return grad.chunk(world, dim=0)[rank].contiguous(), None


class SequenceParallelMHC(nn.Module):
    """mHC on ``[s, b, n·C]`` with an optional sequence-parallel group."""

    def __init__(self, n: int, hidden: int, sinkhorn_iterations: int = 20,
                 group: dist.ProcessGroup | None = None, sequence_parallel: bool = False):
        super().__init__()
        self.n, self.hidden, self.iterations = n, hidden, sinkhorn_iterations
        self.group, self.sequence_parallel = group, sequence_parallel
        self.phi = nn.Parameter(torch.randn(n * hidden, n * n + 2 * n) / math.sqrt(n * hidden))
        self.bias = nn.Parameter(torch.zeros(n * n + 2 * n))
        self.alpha = nn.Parameter(torch.full((3,), 0.01))

    def forward(self, residual: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        s, b, _ = residual.shape
        n = self.n
        streams = residual.view(s, b, n, self.hidden)
        rms = residual.square().mean(dim=-1, keepdim=True).add(1e-6).rsqrt()
        logits = (residual * rms) @ self.phi  # [s, b, n² + 2n]
        pre = torch.sigmoid(self.alpha[0] * logits[..., :n] + self.bias[:n])
        post = 2 * torch.sigmoid(self.alpha[1] * logits[..., n:2 * n] + self.bias[n:2 * n])
        log_m = (self.alpha[2] * logits[..., 2 * n:] + self.bias[2 * n:]).view(s, b, n, n)
        for _ in range(self.iterations):  # columns, then rows (rows exact)
            log_m = log_m - log_m.logsumexp(dim=-2, keepdim=True)
            log_m = log_m - log_m.logsumexp(dim=-1, keepdim=True)
        mixing = log_m.exp()
        collapsed = (pre.unsqueeze(-1) * streams).sum(dim=-2)  # [s, b, C]
        if self.sequence_parallel:
            full = _GatherSequence.apply(collapsed, self.group)
            rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
            out = sublayer(full).chunk(world, dim=0)[rank]
        else:
            out = sublayer(collapsed)
        mixed = mixing @ streams + post.unsqueeze(-1) * out.unsqueeze(-2)
        return mixed.reshape(s, b, n * self.hidden)


# --- the adapter ------------------------------------------------------------------------------
def _to_megatron(x: torch.Tensor) -> torch.Tensor:
    """``[B, T, n, d] -> [T, B, n·d]``."""
    batch, tokens, n, d = x.shape
    return x.permute(1, 0, 2, 3).reshape(tokens, batch, n * d)


def _from_megatron(y: torch.Tensor, n: int) -> torch.Tensor:
    """``[T, B, n·d] -> [B, T, n, d]``."""
    tokens, batch, nd = y.shape
    return y.view(tokens, batch, n, nd // n).permute(1, 0, 2, 3)


def _sublayer(branch: Sublayer) -> Sublayer:
    """The kit's ``[B, T, d]`` branch as a ``[s, b, C]`` sublayer."""
    return lambda h: branch(h.transpose(0, 1)).transpose(0, 1)


class Shard:
    """This rank's part (the kit's ``ShardedImpl``): the same module, sequence parallel."""

    def __init__(self, adapter: Adapter, group: dist.ProcessGroup) -> None:
        self.adapter = adapter
        adapter.module.group, adapter.module.sequence_parallel = group, True

    def forward(self, x: torch.Tensor, branch: Sublayer) -> torch.Tensor:
        return self.adapter(x, branch)

    def parameter_shards(self) -> Sequence[ParameterShard]:
        # named as in the unsharded impl (the adapter), replicated, reduced by the framework
        return [ParameterShard(name, p, placement="replicated", gradient="framework")
                for name, p in self.adapter.named_parameters()]


class Adapter(nn.Module):
    """The kit's protocol around :class:`SequenceParallelMHC` (unsharded, and its shard)."""

    kind = "mhc"
    shard_splits = ("tokens",)

    def __init__(self, module: SequenceParallelMHC) -> None:
        super().__init__()
        self.module = module
        self.n, self.d = module.n, module.hidden
        self.sinkhorn_iterations = module.iterations

    def forward(self, x: torch.Tensor, branch: Sublayer) -> torch.Tensor:
        out = self.module(_to_megatron(x), _sublayer(branch))
        return _from_megatron(out, self.n)

    def shard(self, split: str, group: dist.ProcessGroup) -> Shard:
        if split != "tokens":
            raise ValueError(f"only the token split is supported, got {split!r}")
        return Shard(self, group)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> Adapter:
    """The kit's factory: the same seed gives the same parameters on every rank."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = SequenceParallelMHC(n, d)
    return Adapter(module.to(dtype=dtype, device=device))
