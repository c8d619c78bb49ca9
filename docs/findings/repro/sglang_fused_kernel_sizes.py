"""Kernel limitation (not reachable with DeepSeek-V4's n = 4, d = 7168), verified: SGLang
0.5.23's fused Triton mHC path (hc_mix_stats_sinkhorn: the split-K projection and the fused
reduce + Sinkhorn kernel, the DeepSeek-V4 layer's route on Hopper and Blackwell) asserts
n·d % 64 == 0 and spans the streams with tl.arange(0, HC), which Triton refuses for n not a
power of two; the Triton port _hc_split_sinkhorn_triton pads the streams to a power of two
and takes any n. This script does not use the kit. Run in the SGLang lane's venv, under
Triton's CPU interpreter (a few seconds):

    TRITON_INTERPRET=1 .ci-venv-sglang/bin/python docs/findings/repro/sglang_fused_kernel_sizes.py
"""

import torch
from sglang.kernels.ops.layernorm import mhc


def fused(n: int, d: int) -> str:
    x = torch.randn(3, n * d).bfloat16()
    fn = torch.randn(n * (n + 2), n * d) * 0.02
    try:
        _, _, comb = mhc.hc_mix_stats_sinkhorn(x, fn, torch.ones(3), torch.zeros(n * (n + 2)),
                                               n, 20, 1e-6, 1e-6)
        return f"ok, row sums {comb.sum(-1).flatten()[:2].tolist()}"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"


def split(n: int) -> str:
    mixes = torch.randn(3, 1, n * (n + 2))
    _, _, comb = mhc._hc_split_sinkhorn_triton(mixes, torch.ones(3), torch.zeros(n * (n + 2)),
                                               n, 20, 1e-6)
    return f"ok, row sums {comb.sum(-1).flatten()[:2].tolist()}"


for n, d in ((4, 16), (4, 8), (3, 64)):
    print(f"fused n={n} d={d}: {fused(n, d)}")
print(f"split n=3: {split(3)}")
