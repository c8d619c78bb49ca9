"""Declared difference, verified: SGLang 0.5.23's mHC pre/post cannot be captured whole by
torch.compile(fullgraph=True): hc_pre calls _mhc_pre_dispatch and hc_post _mhc_post_dispatch,
both wrapped by SGLang in torch._dynamo.disable (the engine opts its mHC dispatch out of graph
capture; its CUDA graphs capture the kernels instead). This script does not use the kit. Run in
the SGLang lane's venv (.ci/lanes/sglang build), a few seconds:

    .ci-venv-sglang/bin/python docs/findings/repro/sglang_dispatch_not_traceable.py
"""

import os

os.environ.setdefault("SGLANG_OPT_USE_TILELANG_MHC_PRE", "0")
import torch
from sglang.kernels.ops.layernorm import mhc

n, d, s = 4, 8, 3
fn = torch.randn(n * (n + 2), n * d) * 0.02
scale, base = torch.ones(3), torch.zeros(n * (n + 2))
x = torch.randn(s, n * d).bfloat16()


def pre(x: torch.Tensor) -> torch.Tensor:
    return mhc.hc_pre(x, fn, scale, base, n, 1e-6, 1e-6, 20, 2.0)[0]


eager = pre(x)
try:
    torch.compile(pre, fullgraph=True, backend="eager")(x)
    print("fullgraph compile succeeded (the finding no longer holds)")
except Exception as exc:  # torch._dynamo's Unsupported
    print("fullgraph compile fails:", type(exc).__name__, str(exc).splitlines()[0][:160])
print("graph-broken compile equals eager:",
      torch.equal(torch.compile(pre, backend="eager")(x), eager))
