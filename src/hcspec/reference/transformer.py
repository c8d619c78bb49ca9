"""A small decoder-only transformer whose sublayers are wrapped by a chosen connection.

Layout (HC arXiv:2409.19606 §2 and Alg. 2; docs/reference.md, Conventions): token + learned position
embedding ``h₀``; for hyper-connections replicate it into n streams ``X₀ = 1_n h₀ᵀ``; then
L layers, each a causal self-attention sublayer and an FFN sublayer, every sublayer wrapped by
its own connection (``layer_index`` 2l and 2l + 1), the full multi-stream output of one being
the next one's input; sum the streams ``h_L = 1ᵀ X_L``; final RMSNorm; unembedding.
Every branch is pre-norm: ``F = f ∘ RMSNorm``.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from hcspec.reference import _checks
from hcspec.reference.connection import HyperConnection
from hcspec.reference.dynamic import DynamicHyperConnection
from hcspec.reference.manifold import ManifoldHyperConnection
from hcspec.reference.sinkhorn import DEFAULT_ITERATIONS
from hcspec.reference.static import StaticHyperConnection
from hcspec.reference.streams import expand_streams, reduce_streams

ConnectionName = Literal["residual", "hc-static", "hc-dynamic", "mhc"]
OutputInit = Literal["divide", "multiply", "off"]
CONNECTIONS: tuple[str, ...] = get_args(ConnectionName)


class CausalSelfAttention(nn.Module):
    """Pre-norm causal multi-head self-attention branch: ``[B, T, d] -> [B, T, d]``.

    ``F(x) = W_o · Attention(RMSNorm(x))`` with fused bias-free q/k/v projections and
    ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``. Mixes tokens (causally),
    never batch elements. ``out`` is the output projection whose init the network scales.

    Raises:
        ValueError: ``d`` not divisible by ``n_heads``.
    """

    def __init__(self, d: int, n_heads: int, norm_eps: float) -> None:
        super().__init__()
        if d % n_heads:
            raise ValueError(f"d={d} must be divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.norm = nn.RMSNorm(d, eps=norm_eps)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        heads = (batch, tokens, self.n_heads, d // self.n_heads)
        q, k, v = (t.reshape(heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out: torch.Tensor = self.out(y.transpose(1, 2).reshape(batch, tokens, d))
        return out


class FeedForward(nn.Module):
    """Pre-norm FFN branch ``F(x) = W_2 · GELU(W_1 · RMSNorm(x) + b_1) + b_2``, ``[B, T, d]``.

    ``down`` (``W_2``) is the output projection whose init the network scales.
    """

    def __init__(self, d: int, d_ff: int, norm_eps: float) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=norm_eps)
        self.up = nn.Linear(d, d_ff)
        self.down = nn.Linear(d_ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down(F.gelu(self.up(self.norm(x))))
        return out


class Block(nn.Module):
    """One layer: attention and FFN branches, each with its own connection (None: residual)."""

    def __init__(
        self,
        attn: CausalSelfAttention,
        ffn: FeedForward,
        attn_connection: HyperConnection | None,
        ffn_connection: HyperConnection | None,
    ) -> None:
        super().__init__()
        self.attn = attn
        self.ffn = ffn
        self.attn_connection = attn_connection
        self.ffn_connection = ffn_connection

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.attn_connection is None or self.ffn_connection is None:
            h: torch.Tensor = x + self.attn(x)
            h = h + self.ffn(h)
            return h
        mid: torch.Tensor = self.attn_connection(x, self.attn)
        out: torch.Tensor = self.ffn_connection(mid, self.ffn)
        return out


class HCTransformer(nn.Module):
    """Decoder-only transformer; ``residual``, ``hc-static``, ``hc-dynamic`` or ``mhc`` connections.

    Args:
        vocab_size: number of token ids. d: hidden size. n_layers: L (each has an attention and
            an FFN sublayer, so 2L connections). n_heads: attention heads (must divide d).
        n: expansion rate for the hyper-connections; ignored for ``residual`` (one stream).
        connection: which connection wraps every sublayer.
        d_ff: FFN inner size (default 4d). max_seq_len: positions of the learned position
            embedding. norm_eps: ε of every RMSNorm (branches and final norm).
        init_std: std of the normal init of embeddings and linear weights (biases are 0).
        output_init: the HC paper's √n scaling of the output projections' init std
            (attention ``out`` and FFN ``down``), see below: ``"divide"`` (default),
            ``"multiply"`` or ``"off"``. Has no effect for ``residual`` or n = 1.
        sinkhorn_iterations: Sinkhorn–Knopp rounds for ``mhc``.
        dtype, device: the whole model is moved there after init (torch's defaults when None).

    The √n reading. HC (implementation details) scales the init std of the output modules
    "by √n" without saying whether it multiplies or divides. This reference divides:
    ``std = init_std / √n``. Reason: each branch output is written into all n streams
    (``h_post = 1``) and the head sums the n streams, so one branch contributes n copies of its
    output to ``h_L``; once the streams diverge (learned ``h_pre``/``H_res``, dynamic weights)
    those copies are no longer identical, and dividing by √n keeps the variance of the branch
    contributions to the summed output at the single-stream level — the same argument as the
    1/√(2L) output-projection scaling of GPT-2-style inits for sums over depth. Multiplying
    would grow the branch outputs with n relative to the embedding. Both readings (and none)
    are selectable with ``output_init``.

    Init equivalence. With ``hc-static`` at init every stream holds the pre-norm residual
    stream and the head sees n times it; the final RMSNorm removes the factor n exactly when
    ``norm_eps = 0`` and up to ε otherwise (RMSNorm(n·h) with ε equals RMSNorm(h) with ε/n²).
    So ``hc-static`` at init equals ``residual`` *with the same branch weights* (copy them: the
    default ``output_init`` makes the two inits differ by the factor √n on purpose);
    ``hc-dynamic`` at init equals ``hc-static`` at init exactly.

    Forward: ``tokens [B, T]`` (integer ids, T ≤ max_seq_len) -> logits ``[B, T, vocab_size]``
    in the model's dtype. CPU/CUDA, float64/float32/bfloat16 (mHC's Sinkhorn–Knopp runs in
    float32 for bfloat16).

    Raises:
        ValueError: unknown ``connection`` or ``output_init``, a size not a positive integer,
            ``d`` not divisible by ``n_heads``; in forward, tokens not ``[B, T]`` integer ids
            or T > max_seq_len.
    """

    def __init__(
        self,
        vocab_size: int,
        d: int,
        n_layers: int,
        n_heads: int,
        n: int = 1,
        connection: ConnectionName = "residual",
        *,
        d_ff: int | None = None,
        max_seq_len: int = 256,
        norm_eps: float = 1e-6,
        init_std: float = 0.02,
        output_init: OutputInit = "divide",
        sinkhorn_iterations: int = DEFAULT_ITERATIONS,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if connection not in CONNECTIONS:
            raise ValueError(f"connection must be one of {CONNECTIONS}, got {connection!r}")
        if output_init not in get_args(OutputInit):
            raise ValueError(
                f"output_init must be one of {get_args(OutputInit)}, got {output_init!r}"
            )
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        self.d = _checks.positive_int("d", d)
        self.n_layers = _checks.positive_int("n_layers", n_layers)
        _checks.positive_int("n_heads", n_heads)
        self.connection: ConnectionName = connection
        self.n = 1 if connection == "residual" else _checks.positive_int("n", n)
        self.max_seq_len = _checks.positive_int("max_seq_len", max_seq_len)
        d_ff = 4 * d if d_ff is None else _checks.positive_int("d_ff", d_ff)

        self.embed = nn.Embedding(vocab_size, d)
        self.pos_embed = nn.Embedding(max_seq_len, d)
        self.blocks = nn.ModuleList(
            Block(
                CausalSelfAttention(d, n_heads, norm_eps),
                FeedForward(d, d_ff, norm_eps),
                self._make_connection(2 * layer, sinkhorn_iterations),
                self._make_connection(2 * layer + 1, sinkhorn_iterations),
            )
            for layer in range(n_layers)
        )
        self.final_norm = nn.RMSNorm(d, eps=norm_eps)
        self.unembed = nn.Linear(d, vocab_size, bias=False)
        self._init_branch_weights(init_std, output_init)
        self.to(device=device, dtype=dtype)

    def _make_connection(self, layer_index: int, iterations: int) -> HyperConnection | None:
        n, d = self.n, self.d
        if self.connection == "hc-static":
            return StaticHyperConnection(n, d, layer_index)
        if self.connection == "hc-dynamic":
            return DynamicHyperConnection(n, d, layer_index)
        if self.connection == "mhc":
            return ManifoldHyperConnection(n, d, layer_index, sinkhorn_iterations=iterations)
        return None

    def output_init_factor(self, output_init: OutputInit) -> float:
        """The factor applied to ``init_std`` for output projections under ``output_init``."""
        root = math.sqrt(self.n)
        return {"divide": 1.0 / root, "multiply": root, "off": 1.0}[output_init]

    def _init_branch_weights(self, init_std: float, output_init: OutputInit) -> None:
        out_std = init_std * self.output_init_factor(output_init)
        with torch.no_grad():
            for module in (self.embed, self.pos_embed, self.unembed):
                module.weight.normal_(0.0, init_std)
            for block in self.blocks:
                assert isinstance(block, Block)
                for linear, std in (
                    (block.attn.qkv, init_std),
                    (block.attn.out, out_std),
                    (block.ffn.up, init_std),
                    (block.ffn.down, out_std),
                ):
                    linear.weight.normal_(0.0, std)
                    if linear.bias is not None:
                        linear.bias.zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, T, vocab_size]`` for integer ``tokens [B, T]`` (see the class docstring)."""
        if (
            not isinstance(tokens, torch.Tensor)
            or tokens.dim() != 2
            or tokens.dtype.is_floating_point
            or tokens.dtype.is_complex
        ):
            got = (
                (tuple(tokens.shape), tokens.dtype) if isinstance(tokens, torch.Tensor) else tokens
            )
            raise ValueError(f"expected integer token ids of shape [B, T], got {got}")
        if tokens.shape[1] > self.max_seq_len:
            raise ValueError(
                f"sequence length {tokens.shape[1]} exceeds max_seq_len={self.max_seq_len}"
            )
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.embed(tokens) + self.pos_embed(positions)
        if self.connection == "residual":
            for block in self.blocks:
                h = block(h)
        else:
            x = expand_streams(h, self.n)
            for block in self.blocks:
                x = block(x)
            h = reduce_streams(x)
        logits: torch.Tensor = self.unembed(self.final_norm(h))
        return logits
