"""Bug, hyper-connections 0.4.11: the backward of the Triton Sinkhorn kernel
(`hyper_connections.triton_sinkhorn.TritonSinkhornFunction`, used by mHCv2 with
`use_triton_sinkhorn=True`) is exact only once Sinkhorn–Knopp has converged.

The forward runs `iters` rounds of column then row log-softmax. The backward kernel replays
`iters` rounds of the log-softmax backward but uses the *final* output in place of every
round's own softmax, which is the unrolled gradient only when all rounds give the same
matrix (converged). With ordinary logits (spread ~1) the two agree to ~1e-7; once the logits
spread enough that 20 rounds have not converged (the column sums of the result are still
off: `colsum err` below), the returned gradient is off by 10–90 % from the gradient of the
function the forward computed (here: autograd through the package's own PyTorch
`log_domain_sinkhorn_knopps`, which computes the same forward to ~1e-7, in float64).
Run (with hyper-connections==0.4.11 and triton installed; without a CUDA device the script
turns on Triton's CPU interpreter before the kernel is imported):
    python docs/findings/repro/hc_triton_sinkhorn_backward.py
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the kernel's import

from hyper_connections.mHCv2 import log_domain_sinkhorn_knopps
from hyper_connections.triton_sinkhorn import TritonSinkhornFunction

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
for spread in (0.1, 1.0, 3.0, 10.0, 30.0):
    logits = torch.randn(3, 4, 4) * spread
    upstream = torch.randn(3, 4, 4)
    kernel_in = logits.clone().to(device).requires_grad_(True)
    torch_in = logits.clone().double().requires_grad_(True)
    kernel_out = TritonSinkhornFunction.apply(kernel_in, 20)
    torch_out = log_domain_sinkhorn_knopps(torch_in, 20)
    (kernel_out * upstream.to(device)).sum().backward()
    (torch_out * upstream.double()).sum().backward()
    forward_err = float((kernel_out.double().cpu() - torch_out).abs().max())
    grad_err = float((kernel_in.grad.double().cpu() - torch_in.grad).norm() / torch_in.grad.norm())
    colsum_err = float((torch_out.sum(-2) - 1).abs().max())
    print(f"logit spread {spread:5.1f}: forward diff {forward_err:.1e}, colsum err "
          f"{colsum_err:.1e}, relative gradient error {grad_err:.1e}")
