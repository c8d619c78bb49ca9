"""nemo-automodel's DeepSeek-V4 block does not check the rank of its state.

``DeepseekV4Block.forward`` documents its state as ``[batch, sequence, hc_mult, hidden]``; its
hyper-connection flattens with ``flatten(start_dim=2)`` and the block collapses with
``(pre.unsqueeze(-1) * x).sum(dim=2)`` and mixes with ``matmul(comb.transpose(-1, -2), x)``,
without checking that the state has four axes. This builds the package's own
``DeepseekV4Block`` without its ``__init__`` (whose attention and MoE need a full model config
and backend): its two real ``DeepseekV4HyperConnection`` modules (``attn_hc``, ``ffn_hc``, torch
Sinkhorn backend, parameters drawn away from zero), token-wise stand-ins for the attention and
the MoE (a fixed linear map: the model would hand them position embeddings and routing; the
shape handling shown here happens in the hyper-connection code around them) and ``nn.RMSNorm``
norms, and calls the block's own ``forward`` with:
  1. a proper [B, S, n, D] state (for contrast);
  2. a state with no sequence axis, [B, n, D], at hc_mult = n = 1 (the sizes fit the
     flattening): no error, and a [B, B, 1, D] output whose entry [i, j] mixes sample i's
     weights with sample j's state (it is printed);
  3. the same at n = 4: an error, but only the linear layer's size mismatch, not a message
     about the state's rank.
Standalone: needs only torch==2.13.0, nemo-automodel==0.7.0 (installed with --no-deps) and
transformers==5.18.0 (and pillow, which the package imports); does not use hcspec. Run it once
per release:
    python docs/findings/repro/nemo_automodel_block_state_rank.py
Observed with nemo-automodel 0.7.0, transformers 5.18.0, torch 2.13.0+cpu: case 2 returns
[2, 2, 1, 3] without an error; case 3 raises RuntimeError (mat1 and mat2 shapes cannot be
multiplied). Exit status 0.
"""

from importlib.metadata import version

import torch
from nemo_automodel.components.models.deepseek_v4.layers import DeepseekV4HyperConnection
from nemo_automodel.components.models.deepseek_v4.model import DeepseekV4Block
from torch import nn


class StandIn(nn.Module):
    """A token-wise linear map on [..., D]; returns ``(output, None)`` as the package's attention
    does (``attention`` = True), or the tensor alone (the MoE, which also takes a padding mask)."""

    def __init__(self, d: int, attention: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(d, d)
        self.attention = attention

    def forward(self, hidden_states, *args, **kwargs):
        out = self.linear(hidden_states)
        return (out, None) if self.attention else out


def block(n: int, d: int) -> nn.Module:
    built = nn.Module.__new__(DeepseekV4Block)
    nn.Module.__init__(built)
    built.layer_idx, built.hc_mult, built.is_hash_routing_layer = 0, n, False
    built.self_attn, built.mlp = StandIn(d, True), StandIn(d, False)
    built.input_layernorm, built.post_attention_layernorm = nn.RMSNorm(d), nn.RMSNorm(d)
    for name in ("attn_hc", "ffn_hc"):
        hc = DeepseekV4HyperConnection(hc_mult=n, hidden_size=d, hc_sinkhorn_iters=20,
                                       hc_eps=1e-6, rms_norm_eps=1e-6, sinkhorn_backend="torch")
        for p in hc.parameters():  # draw the connection's parameters away from zero
            nn.init.normal_(p, std=0.5)
        setattr(built, name, hc)
    return built.eval()


def run(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return layer(x, position_embeddings=None)


print("nemo-automodel", version("nemo-automodel"), "transformers", version("transformers"),
      "torch", torch.__version__)
torch.manual_seed(0)
d = 3
one = block(1, d)
with torch.no_grad():
    x4 = torch.randn(2, 5, 1, d)
    print(f"DeepseekV4Block hc_mult=1: [B, S, n, D] {list(x4.shape)} ->", list(run(one, x4).shape))
    x3 = torch.randn(2, 1, d)  # [B, n, D]: no sequence axis
    y = run(one, x3)
    print(f"DeepseekV4Block hc_mult=1: [B, n, D] {list(x3.shape)} -> {list(y.shape)} (no error)")
    # entry [i, j] of the output against the block on sample j's state alone:
    alone = [run(one, x3[j:j + 1].unsqueeze(1))[0, 0] for j in range(2)]
    for i in range(2):
        for j in range(2):
            print(f"  output[{i}, {j}] - block(sample {j} as [1, 1, 1, D]):",
                  f"{float((y[i, j] - alone[j]).abs().max()):.3g}")
four = block(4, d)
try:
    with torch.no_grad():
        y = run(four, torch.randn(2, 4, d))
except RuntimeError as exc:
    print(f"DeepseekV4Block hc_mult=4: [B, n, D] [2, 4, {d}]: RuntimeError:",
          str(exc).splitlines()[0])
else:
    print(f"DeepseekV4Block hc_mult=4: [B, n, D] [2, 4, {d}] -> {list(y.shape)} (no error)")
