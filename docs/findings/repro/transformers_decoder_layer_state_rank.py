"""transformers' DeepSeek-V4 / GLM-5-Next decoder layer does not check the rank of its state.

The decoder layer keeps the residual as [B, S, hc_mult, D]; its hyper-connection reads
``batch_size, seq_len = hidden_streams.shape[:2]`` and flattens with
``view(batch_size, seq_len, -1)`` without checking that the state has four axes. This builds
each model's own decoder layer from a tiny config (no weights downloaded), replaces its
attention and MLP by token-wise stand-ins (a fixed linear map: the model would hand them
position embeddings and a mask; the shape handling shown here happens in the hyper-connections
around them), and calls the layer's own ``forward`` with:
  1. a proper [B, S, n, D] state (for contrast);
  2. a state with no sequence axis, [B, n, D], at hc_mult = n = 1 (the sizes fit the
     flattening): no error, and a [B, B, 1, D] output whose entry [i, j] mixes sample i's
     weights with sample j's state (it is printed);
  3. the same at n = 4: an error, but only the linear layer's size mismatch, not a message
     about the state's rank.
Standalone: needs only torch==2.13.0 and transformers; does not use hcspec. Run it once per
release:
    python docs/findings/repro/transformers_decoder_layer_state_rank.py
Observed with transformers 5.23.0 (DeepSeek-V4 and GLM-5-Next) and 5.8.0 (DeepSeek-V4; 5.8.0
has no GLM-5-Next, which the script reports): case 2 returns [2, 2, 1, 3] without an error;
case 3 raises RuntimeError (mat1 and mat2 shapes cannot be multiplied). Exit status 0.
"""

import importlib

import torch
import transformers
from torch import nn

MODELS = (("deepseek_v4", "DeepseekV4Config", "DeepseekV4DecoderLayer", 2),
          ("glm5_next", "Glm5NextTextConfig", "Glm5NextTextDecoderLayer", 3))


class StandIn(nn.Module):
    """A token-wise linear map on [..., D], returning ``outputs`` values as the replaced
    attention does (the output, then Nones), or the tensor alone (``outputs`` = 0: the MLP)."""

    def __init__(self, d: int, outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d, d)
        self.outputs = outputs

    def forward(self, hidden_states, *args, **kwargs):
        out = self.linear(hidden_states)
        return (out, *([None] * (self.outputs - 1))) if self.outputs else out


def layer(model: str, config_class: str, layer_class: str, attention_outputs: int, n: int,
          d: int) -> nn.Module:
    modeling = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    configuration = importlib.import_module(f"transformers.models.{model}.configuration_{model}")
    config = getattr(configuration, config_class)(hidden_size=d, hc_mult=n, hc_eps=1e-6,
                                                  rms_norm_eps=1e-6, hc_sinkhorn_iters=20)
    built = getattr(modeling, layer_class)(config, 0)
    linear = getattr(built, "block_type", "attention") == "linear_attention"  # GLM: one output
    built.self_attn = StandIn(d, 0 if linear else attention_outputs)
    built.mlp = StandIn(d, 0)
    for name in ("attn_hc", "ffn_hc"):  # draw the connection's parameters away from zero
        for p in getattr(built, name).parameters():
            nn.init.normal_(p, std=0.5)
    return built.eval()


def streams(out):
    return out[0] if isinstance(out, tuple) else out


print("transformers", transformers.__version__, "torch", torch.__version__)
torch.manual_seed(0)
for model, config_class, layer_class, attention_outputs in MODELS:
    try:
        importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    except ImportError:
        print(f"{layer_class}: not in this release")
        continue
    d = 3
    one = layer(model, config_class, layer_class, attention_outputs, 1, d)
    with torch.no_grad():
        x4 = torch.randn(2, 5, 1, d)
        print(f"{layer_class} hc_mult=1: [B, S, n, D] {list(x4.shape)} ->",
              list(streams(one(x4)).shape))
        x3 = torch.randn(2, 1, d)  # [B, n, D]: no sequence axis
        y = streams(one(x3))
        print(f"{layer_class} hc_mult=1: [B, n, D] {list(x3.shape)} -> {list(y.shape)} "
              "(no error)")
        # entry [i, j] of the output against the layer on sample j's state alone:
        alone = [streams(one(x3[j:j + 1].unsqueeze(1)))[0, 0] for j in range(2)]
        for i in range(2):
            for j in range(2):
                print(f"  output[{i}, {j}] - layer(sample {j} as [1, 1, 1, D]):",
                      f"{float((y[i, j] - alone[j]).abs().max()):.3g}")
    four = layer(model, config_class, layer_class, attention_outputs, 4, d)
    try:
        with torch.no_grad():
            y = streams(four(torch.randn(2, 4, d)))
    except RuntimeError as exc:
        print(f"{layer_class} hc_mult=4: [B, n, D] [2, 4, {d}]: RuntimeError:",
              str(exc).splitlines()[0])
    else:
        print(f"{layer_class} hc_mult=4: [B, n, D] [2, 4, {d}] -> {list(y.shape)} (no error)")
