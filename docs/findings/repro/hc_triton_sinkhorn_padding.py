"""Bug (extreme inputs), hyper-connections 0.4.11: the Triton Sinkhorn kernel returns NaN once
every logit of a row or a column is below -1e10.

`sinkhorn_kernel_forward_log` pads its 32×32 block (n ≤ 32 streams) with -1e10 and takes each
column's and row's maximum over `tl.where(mask, log_alpha, -1e10)`. When all valid logits of a
column (or row) are below -1e10, they are below the padding: the maximum is -1e10,
`exp(logit - max)` underflows to 0 for every valid entry, and `log(0)` gives -inf, then NaN. The
package's PyTorch log-domain Sinkhorn gives the right answer (a 1×1 matrix is [1]); a 2×2 with
only its off-diagonal at -2e10 is fine. The kit reached it with the parameters ×1e4
(constraints.extreme_logits, gradients.finite_extreme): the residual logit was -1.65e10.
Run (with hyper-connections==0.4.11 and triton installed; without a CUDA device the script
turns on Triton's CPU interpreter before the kernel is imported):
    python docs/findings/repro/hc_triton_sinkhorn_padding.py
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the kernel's import

from hyper_connections.mHCv2 import log_domain_sinkhorn_knopps
from hyper_connections.triton_sinkhorn import TritonSinkhornFunction

device = "cuda" if torch.cuda.is_available() else "cpu"
for logit in (-1e4, -1e9, -0.9e10, -1.1e10, -1.65e10):
    logits = torch.full((1, 1, 1), logit)
    kernel = TritonSinkhornFunction.apply(logits.to(device), 20)
    reference = log_domain_sinkhorn_knopps(logits, 20)
    print(f"1x1 logit {logit:9.3g}: Triton kernel {float(kernel):.3g}, "
          f"PyTorch log domain {float(reference):.3g}")
logits = torch.tensor([[[0.0, -2e10], [-2e10, 0.0]]])
print("2x2 [[0, -2e10], [-2e10, 0]]: Triton kernel",
      TritonSinkhornFunction.apply(logits.to(device), 20).flatten().tolist(),
      "PyTorch log domain", log_domain_sinkhorn_knopps(logits, 20).flatten().tolist())
