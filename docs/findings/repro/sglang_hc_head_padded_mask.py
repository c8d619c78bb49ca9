"""Their bug (unreachable with DeepSeek-V4's hc_mult = 4), verified: SGLang 0.5.23's fused HC
head (kernels/ops/layernorm/mhc_head.py, fused_hc_head) passes the stream count rounded up to a
power of two as HC_MULT and masks the stream axis with `m_idx < HC_MULT`, which is always true:
for hc_mult = 3 the kernel reads a fourth row of hc_fn and hc_base past their ends and a fourth
"stream" of x (the next token's data), and adds it into y. For a power of two the result equals
the reference torch formula quoted in the file's own docstring. This script does not use the kit.
Run in the SGLang lane's venv under Triton's CPU interpreter (a few seconds):

    TRITON_INTERPRET=1 .ci-venv-sglang/bin/python docs/findings/repro/sglang_hc_head_padded_mask.py
"""

import torch
from sglang.kernels.ops.layernorm.mhc_head import fused_hc_head


def reference(x, hc_fn, hc_scale, hc_base, norm_eps, hc_eps):
    # the torch formula of mhc_head.py's docstring (DeepseekV4Model.hc_head)
    shape, dtype = x.size(), x.dtype
    flat = x.flatten(1).float()
    rsqrt = torch.rsqrt(flat.square().mean(-1, keepdim=True) + norm_eps)
    mixes = torch.nn.functional.linear(flat, hc_fn) * rsqrt
    pre = torch.sigmoid(mixes * hc_scale + hc_base) + hc_eps
    return torch.sum(pre.unsqueeze(-1) * flat.view(shape), dim=1).to(dtype)


torch.manual_seed(0)
for n in (4, 3):
    d, t = 16, 3
    storage = torch.randn(t * n * d + 64).bfloat16()  # slack after x, as in a larger buffer
    x = storage[: t * n * d].view(t, n, d)
    fn_storage = torch.randn((n + 1) * n * d) * 0.1
    fn = fn_storage[: n * n * d].view(n, n * d)
    base_storage = torch.full((n + 1,), 5.0)
    base = base_storage[:n]
    scale = torch.ones(1)
    got = fused_hc_head(x, fn, scale, base, 1e-6, 1e-6).float()
    want = reference(x, fn, scale, base, 1e-6, 1e-6).float()
    print(f"hc_mult={n}: max |fused - reference| = {(got - want).abs().max().item():.4g}"
          f" (|reference| max {want.abs().max().item():.3g})")
