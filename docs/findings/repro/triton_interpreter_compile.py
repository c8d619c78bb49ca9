"""Limitation of the environment, not of the package under test: under Triton's CPU
interpreter, TorchDynamo cannot trace a Triton kernel launch, so `torch.compile(...,
fullgraph=True)` of any function that launches one fails ("Unsupported method call").

The kit's compile.fullgraph fails on liger_kernel:mhc under the interpreter for this reason
alone: the same failure comes from a five-line kernel that adds one to a tensor. Whether
LigerMHC compiles with fullgraph=True on CUDA (where Dynamo handles user-defined Triton kernels)
is for tools/gpu_check.sh to show.
Run (with triton==3.9.0 installed; no GPU needed):
    python docs/findings/repro/triton_interpreter_compile.py
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede the kernel's definition

import torch
import triton
import triton.language as tl


@triton.jit
def add_one_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < N) + 1.0, mask=offs < N)


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_one_kernel[(triton.cdiv(x.numel(), 16),)](x, out, N=x.numel(), BLOCK=16)
    return out


x = torch.arange(5.0)
print("eager:", add_one(x).tolist())
try:
    compiled = torch.compile(add_one, fullgraph=True, backend="aot_eager")
    print("compiled:", compiled(x).tolist())
except Exception as exc:  # torch._dynamo.exc.Unsupported, whatever its wrapper
    print(f"torch.compile(fullgraph=True) raised {type(exc).__name__}: "
          f"{str(exc).splitlines()[0][:100]}")
