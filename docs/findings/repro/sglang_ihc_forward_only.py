"""Declared difference, verified: SGLang 0.5.23's HY-V4 iHC Triton kernels (hy4_ihc.py) are
forward-only (no autograd: the output does not require grad although the input does), and
torch.compile(fullgraph=True) of fused_hy4_ihc_pre stops at the wrapper's probe of the optional
`hpc` package (`import hpc` inside _hpc_ihc_op). The forward itself matches the iHC law written
out here (pre = sigmoid(.) + eps, post = 2 sigmoid(.) + eps, X' = X + post F(sum_s pre_s X_s)).
This script does not use the kit. Run in the SGLang lane's venv, a few seconds:

    TRITON_INTERPRET=1 .ci-venv-sglang/bin/python docs/findings/repro/sglang_ihc_forward_only.py
"""

import torch
from sglang.kernels.ops.layernorm.hy4_ihc import fused_hy4_ihc_post, fused_hy4_ihc_pre

n, d, eps = 4, 8, 1e-6
torch.manual_seed(0)
fn = torch.randn(2 * n, n * d) / (n * d) ** 0.5
scale, base = torch.tensor([1.1, 0.9]), 0.5 * torch.randn(2 * n)
x = (3 * torch.randn(5, n, d)).requires_grad_()

y, post = fused_hy4_ihc_pre(x, fn, scale, base, 2.0, eps, eps)
out = fused_hy4_ihc_post(torch.tanh(y), x, post)
print("output requires grad:", out.requires_grad, "(forward-only kernels: False)")

flat = x.detach().reshape(5, n * d).double()
logits = flat @ fn.double().T * torch.rsqrt(flat.square().mean(-1, keepdim=True) + eps)
pre = torch.sigmoid(logits[:, :n] * scale[0] + base[:n]) + eps
post_want = 2 * torch.sigmoid(logits[:, n:] * scale[1] + base[n:]) + eps
x_in = (pre.unsqueeze(-1) * x.detach().double()).sum(1)
want = x.detach().double() + post_want.unsqueeze(-1) * torch.tanh(x_in).unsqueeze(1)
print("max |kernels - written-out iHC step| =", (out.double() - want).abs().max().item(),
      "(float32: expect < 1e-4)")
try:
    torch.compile(lambda t: fused_hy4_ihc_pre(t, fn, scale, base, 2.0, eps, eps)[0],
                  fullgraph=True, backend="eager")(x.detach())
    print("fullgraph compile succeeded (the finding no longer holds)")
except Exception as exc:  # torch._dynamo's Unsupported
    print("fullgraph compile fails:", str(exc).splitlines()[0][:160])
