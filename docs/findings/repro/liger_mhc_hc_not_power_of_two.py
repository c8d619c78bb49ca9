"""Bug (minor), liger-kernel 0.8.5: LigerMHC accepts any number of streams `hc` but its
kernels only run when `hc` is a power of two.

The kernels index the streams with `tl.arange(0, HC)`, and Triton allows `tl.arange` only
over a power-of-two range. `LigerMHC(hc=3, ...)` constructs without a word (the docstring
recommends "[2, 16]" and says nothing of powers of two) and the first forward fails inside
Triton: "arange's range must be a power of 2" (a compilation error on CUDA; under the
interpreter the same ValueError wrapped in an InterpreterError). hc = 1, 2, 4, 8 work.
Run (with liger-kernel==0.8.5 and triton installed; without a CUDA device the script turns
on Triton's CPU interpreter before the kernels are imported):
    python docs/findings/repro/liger_mhc_hc_not_power_of_two.py
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the kernels' import

from liger_kernel.transformers.mhc import LigerMHC

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
for hc in (2, 3, 4, 5, 6, 8):
    module = LigerMHC(torch.nn.Identity(), hc=hc, c=16, phi_dtype=torch.float32,
                      allow_fp32=True).to(device)
    x = torch.randn(1, 2, hc, 16, device=device)
    try:
        y = module(x)
        result = f"forward ok, output {list(y.shape)}"
    except Exception as exc:  # the Triton error, whatever its wrapper
        result = f"built, forward raised {type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
    print(f"hc={hc}: {result}")
