"""x-transformers 2.31.10: HyperConnection's residual mixing is the all-ones matrix.

Standalone (needs only torch and x-transformers==2.31.10; does not use hcspec).

``HyperConnection.prepare`` reshapes the residual logits ``alpha[..., s, 1:] [B, T, n, n]`` with
``rearrange('... (s1 s2) -> ... s1 s2', s2=n)``, which makes one 1 × n matrix per source stream
``s``, and hands those to ``sinkhorn``: a softmax over the size-1 axis gives 1, and the last
L1-normalisation of every round (over the size-1 axis again) gives 1. So the mixing weights
``alpha[..., s, 1 + j]`` are exactly 1 for every s, j, whatever the parameters: every output
stream is the SUM of all n input streams (not a doubly stochastic mix). With a zero branch, one
sublayer multiplies the mean stream by n; the residual-mixing parameters get no gradient.

Run: python docs/findings/repro/x_transformers_hres_all_ones.py
"""

import torch
import x_transformers.x_transformers as xt
from x_transformers import Decoder
from x_transformers.x_transformers import HyperConnection

torch.manual_seed(0)
n, d, B, T = 4, 8, 2, 3
hc = HyperConnection(d, layer_index=0, num_residual_streams=n, sinkhorn_iters=5)
with torch.no_grad():  # move far away from the init: the result does not depend on it
    for p in hc.parameters():
        p.add_(torch.randn_like(p))

streams = torch.randn(B * n, T, d)  # the decoder's layout: [(B·n), T, d], batch index outer
captured = {}
real_einsum = xt.einsum  # the module imports torch's einsum by name


def recording_einsum(eq, *ops):
    captured["alpha"] = ops[0]
    return real_einsum(eq, *ops)


xt.einsum = recording_einsum  # prepare's mix: einsum(eq, alpha, residuals)
try:
    branch_input, residuals, kw = hc.prepare(streams)
finally:
    xt.einsum = real_einsum
alpha = captured["alpha"]  # [B, T, n (source), 1 + n (branch input, then target streams)]
mix = alpha[..., 1:]
print("alpha[..., s, 1 + j] (residual mixing) for token (0, 0):\n", mix[0, 0])
print("all exactly 1:", bool((mix == 1).all()))

x = streams.reshape(B, n, T, d).permute(0, 2, 1, 3)  # [B, T, n, d]
sum_of_streams = x.sum(dim=2, keepdim=True).expand_as(x)
print("every mixed stream == sum of all input streams:",
      torch.allclose(residuals, sum_of_streams, atol=1e-5))

out = hc(torch.zeros(B, T, d), residuals, **kw)  # zero branch: pure residual path
ratio = out.reshape(B, n, T, d).mean(dim=1).norm() / x.mean(dim=2).norm()
print(f"zero branch: |mean stream| grows by {ratio.item():.3f} (n = {n}; a doubly stochastic "
      "H_res keeps it)")

hc.zero_grad()
branch_input, residuals, kw = hc.prepare(streams)
hc(branch_input, residuals, **kw).square().sum().backward()
res_cols = hc.static_alpha.grad[:, 1:]
print("grad of static_alpha's residual columns (max |.|):", res_cols.abs().max().item())
pre_col = hc.static_alpha.grad[:, 0]
print("grad of static_alpha's h_pre column    (max |.|):", pre_col.abs().max().item())

# The same inside a real Decoder: 4 feed-forward sublayers whose blocks output zero.
torch.manual_seed(0)
dec = Decoder(dim=d, depth=2, num_residual_streams=n, custom_layers=("f", "f", "f", "f"))
with torch.no_grad():
    for layer in dec.layers:
        for p in layer[1].parameters():
            p.zero_()  # every block outputs 0: only the residual path is left
h = torch.randn(B, T, d)
dec.final_norm = torch.nn.Identity()
print(f"Decoder, 4 sublayers with zero blocks: |output| / |input| = "
      f"{(dec(h).norm() / h.norm()).item():.1f} (n^4 · n = {n ** 5} from 4 mixes and the "
      "sum reduction; an identity residual path gives n)")
