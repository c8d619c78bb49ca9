"""transformers' DeepSeek-V4 hyper-connection step, measured against the DeepSeek-V4 formulas.

Builds DeepseekV4HyperConnection from a tiny config (no weights downloaded), sets its
parameters away from the init (fixed seed, the same numbers in every release), runs the
package's own DeepseekV4DecoderLayer.forward with attention and MLP replaced by fixed
functions (norms by the identity), and compares with the same step written here from the
DeepSeek-V4 description:
    pre = sigmoid(.) + eps, post = 2 sigmoid(.),
    comb = softmax(logits, -1) + eps, one column normalisation, then iters - 1 (row, column)
    rounds, every denominator + eps,
    X'_j = post_j F(sum_i pre_i X_i) + sum_i comb[i, j] X_i   (comb consumed transposed).
Run it once per release, in an environment with torch==2.13.0 and
transformers==5.8.0, then transformers==5.23.0:
    python docs/findings/repro/transformers_deepseek_v4_releases.py
"""

import torch
import transformers
from torch import nn
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

n, d, iters, eps = 4, 16, 20, 1e-6
config = DeepseekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=iters, hc_eps=eps,
                          rms_norm_eps=1e-6)
hcs = []
for seed in (1, 2):
    hc = m.DeepseekV4HyperConnection(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # trained-looking parameters, identical in every release
        hc.fn.copy_(torch.randn(hc.fn.shape, generator=g) * 0.5)
        hc.base.copy_(torch.randn(hc.base.shape, generator=g))
        hc.scale.copy_(torch.rand(3, generator=g) + 0.5)
    hcs.append(hc)

lin = torch.randn(d, d, generator=torch.Generator().manual_seed(3)) / d**0.5
attn = lambda h: torch.tanh(h @ lin)  # noqa: E731
mlp = lambda h: torch.sin(1.7 * h)  # noqa: E731

layer = m.DeepseekV4DecoderLayer.__new__(m.DeepseekV4DecoderLayer)
nn.Module.__init__(layer)
layer.attn_hc, layer.ffn_hc = hcs
layer.self_attn = lambda h, **kw: (attn(h), None)
layer.mlp = lambda h, input_ids=None: mlp(h)
layer.input_layernorm = layer.post_attention_layernorm = nn.Identity()


def weights(hc, x):
    flat = x.flatten(2).float()
    flat = flat * torch.rsqrt(flat.square().mean(-1, keepdim=True) + 1e-6)
    mix = flat @ hc.fn.T
    s = hc.scale
    pre = torch.sigmoid(mix[..., :n] * s[0] + hc.base[:n]) + eps
    post = 2 * torch.sigmoid(mix[..., n:2 * n] * s[1] + hc.base[n:2 * n])
    logits = mix[..., 2 * n:].unflatten(-1, (n, n)) * s[2] + hc.base[2 * n:].view(n, n)
    comb = torch.softmax(logits, dim=-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    return pre, post, comb


def step(hc, x, f):
    pre, post, comb = weights(hc, x)
    z = f((pre.unsqueeze(-1) * x).sum(2))
    return post.unsqueeze(-1) * z.unsqueeze(-2) + comb.transpose(-1, -2) @ x


x = torch.randn(2, 5, n, d, generator=torch.Generator().manual_seed(4))
with torch.no_grad():
    theirs = layer(x)
    ours = step(hcs[1], step(hcs[0], x, attn), mlp)
    post, comb, _ = hcs[0](x)
    _, post_ref, comb_ref = weights(hcs[0], x)

print(f"transformers {transformers.__version__}, torch {torch.__version__}")
print(f"  post range [{post.min():.4f}, {post.max():.4f}] (DeepSeek-V4 2*sigmoid: "
      f"[{post_ref.min():.4f}, {post_ref.max():.4f}])")
print(f"  max |comb - comb_DeepSeek-V4| = {(comb - comb_ref).abs().max():.3e}; comb row sums "
      f"off by {(comb.sum(-1) - 1).abs().max():.1e}, column sums by "
      f"{(comb.sum(-2) - 1).abs().max():.1e}")
print(f"  decoder layer (two steps) vs the DeepSeek-V4 step: max |diff| = "
      f"{(theirs - ours).abs().max():.3e} (output scale {ours.abs().max():.2f})")
