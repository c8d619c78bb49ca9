"""Limitation of Triton's interpreter (Triton 3.9.0), not of the package under test:
`tl.dot` on bfloat16 operands returns garbage under TRITON_INTERPRET=1.

The interpreter stores bfloat16 as uint16 and multiplies the raw bit patterns in `tl.dot`
(github.com/triton-lang/triton/issues/11584; the maintainers: not supported yet). float16 and
float32 dots, and bfloat16 operands cast to float32 first, are exact. LigerMHC's bfloat16
path (x and phi in bfloat16: the tensor-core `tl.dot` of its coefficient kernel) is hit: its
h_pre / h_post / H_res come out wrong by O(1) under the interpreter, so the kit's adapter
rejects bfloat16 there and the bfloat16 path is checked only on CUDA.
Run (with triton==3.9.0 installed; no GPU needed):
    python docs/findings/repro/triton_interpreter_bf16_dot.py
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede the kernel's definition

import torch
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
               CAST: tl.constexpr):
    m, k, n = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    if CAST:
        a, b = a.to(tl.float32), b.to(tl.float32)
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


torch.manual_seed(0)
a, b = torch.randn(16, 32), torch.randn(32, 16)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for cast in (False, True):
        out = torch.empty(16, 16)
        dot_kernel[(1,)](a.to(dtype), b.to(dtype), out, M=16, K=32, N=16, CAST=cast)
        want = a.to(dtype).float() @ b.to(dtype).float()
        print(f"{dtype!s:15s} operands{' cast to float32' if cast else '':17s}: "
              f"max |tl.dot - matmul| = {float((out - want).abs().max()):.3g}")
