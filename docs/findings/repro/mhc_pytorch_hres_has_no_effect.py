"""Bug (design), mhc-pytorch 0.2.3: H_res never affects the output.

ManifoldHyperConnections replicates its [B,T,d] input into n identical streams, mixes them
with H_res, adds h_post * block output, and collapses the streams again - on every call.
H_res X for X = 1 h^T is (H_res 1) h^T, and with the default mean collapse only
1^T H_res 1 = n (exact, since the last Sinkhorn step normalises columns) survives; so
phi_res / b_res / alpha_res have no effect and zero gradient.  With collapse_mode="weighted"
they act only through Sinkhorn's convergence error in the row sums.
Run (with mhc-pytorch==0.2.3 installed):
    python docs/findings/repro/mhc_pytorch_hres_has_no_effect.py
"""
import torch
from mhc import ManifoldHyperConnections
from torch import nn

torch.manual_seed(0)
n, d = 4, 16
block = nn.Linear(d, d)
h = torch.randn(2, 5, d)
for mode in ("mean", "weighted"):
    torch.manual_seed(1)
    a = ManifoldHyperConnections(d, n, block, collapse_mode=mode)
    b = ManifoldHyperConnections(d, n, block, collapse_mode=mode)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():                          # change only the H_res generator
        b.phi_res.weight.normal_(0, 1.0)
        b.b_res.normal_(0, 1.0)
    ya, yb = a(h), b(h)
    a(h).square().sum().backward()
    print(f"collapse_mode={mode:8s} max |output change| = {(ya - yb).abs().max():.2e} "
          f"(output scale {ya.abs().max():.2f}); "
          f"|grad phi_res| = {a.phi_res.weight.grad.abs().max():.2e}, "
          f"|grad phi_pre| = {a.phi_pre.weight.grad.abs().max():.2e}")
