"""nano-deepseek-v4 0.2.0: its HyperConnection is not DeepSeek-V4's mHC, yet it loads DeepSeek-V4
checkpoints into it unchanged.

Standalone (needs only torch and nano-deepseek-v4==0.2.0; does not use hcspec).

nano's `checkpoint.py` maps the official keys `hc_attn_fn/base/scale` (and `hc_ffn_*`) straight
onto `HyperConnection.fn/base/scale`. DeepSeek-V4's own formulas (DeepSeek's TileKernels
references `tile_kernels/torch/mhc.py` and Hugging Face transformers 5.23.0's
`DeepseekV4HyperConnection`, which agree) compute, from the same `fn/base/scale`:

    post = 2·σ(·)                      nano: σ(·) + eps          (half the write weight)
    comb = Sinkhorn(softmax(L) + eps)  nano: Sinkhorn(σ(L) + eps) (another matrix)
    X'_j = post_j·F + Σ_i comb[i, j] X_i   nano: Σ_i comb[j, i] X_i (transposed use)

(and DeepSeek's Sinkhorn starts with a column normalisation after the softmax, nano with rows).
This script builds nano's module, gives it checkpoint-like parameters, and compares its
decoder-layer step with DeepSeek-V4's formulas written out below on the same parameters.

Run: python docs/findings/repro/nano_deepseek_v4_formulas.py
"""

import torch
from nano_deepseek_v4.config import DeepSeekV4Config
from nano_deepseek_v4.modeling import HyperConnection

torch.manual_seed(0)
n, d, eps, iters = 4, 16, 1e-6, 20  # the Flash/Pro presets use hc_sinkhorn_iters=20
hc = HyperConnection(DeepSeekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=iters))
with torch.no_grad():  # checkpoint-like values: trained logits are not near zero
    hc.fn.normal_(0.0, 0.5)
    hc.base.normal_(0.0, 1.0)
    hc.scale.uniform_(0.5, 1.5)

X = torch.randn(2, 3, n, d)
z = torch.randn(2, 3, d)  # the sublayer's output, the same for both

post_nano, comb_nano, _ = hc(X)
out_nano = post_nano.unsqueeze(-1) * z.unsqueeze(-2) + torch.matmul(comb_nano, X)  # nano's layer

# DeepSeek-V4's formulas on the same parameters
flat = X.flatten(2)
flat = flat * torch.rsqrt(flat.square().mean(-1, keepdim=True) + 1e-6)
mix = flat @ hc.fn.T
s_pre, s_post, s_comb = hc.scale
post = 2 * torch.sigmoid(mix[..., n:2 * n] * s_post + hc.base[n:2 * n])
comb = torch.softmax(mix[..., 2 * n:].unflatten(-1, (n, n)) * s_comb
                     + hc.base[2 * n:].view(n, n), dim=-1) + eps
comb = comb / (comb.sum(-2, keepdim=True) + eps)
for _ in range(iters - 1):
    comb = comb / (comb.sum(-1, keepdim=True) + eps)
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
out_v4 = post.unsqueeze(-1) * z.unsqueeze(-2) + torch.einsum("btij,btid->btjd", comb, X)

with torch.no_grad():
    ratio = (post / post_nano).mean().item()
    comb_diff = (comb - comb_nano).abs().max().item()
    asymmetry = (comb - comb.transpose(-1, -2)).abs().max().item()
    rel = ((out_v4 - out_nano).norm() / out_v4.norm()).item()
print(f"post: DeepSeek-V4 / nano, mean ratio {ratio:.3f} (2σ vs σ + eps)")
print(f"comb: max |DeepSeek-V4 - nano| {comb_diff:.3f}")
print(f"comb used transposed by nano: max |combᵀ - comb| (DeepSeek-V4's) {asymmetry:.3f}")
print(f"decoder-layer step X': relative difference {rel:.3f}")
