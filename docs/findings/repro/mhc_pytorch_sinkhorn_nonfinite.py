"""Bug, mhc-pytorch 0.2.3: Sinkhorn–Knopp exponentiates the logits without a shift.

apply_sinkhorn_knopp computes exp(logits) directly and divides by sums with no epsilon. A logit
above the dtype's exp range overflows to inf (inf/inf = NaN); a row of logits far below it
underflows to 0 (0/0 = NaN). The whole layer output becomes NaN. In float16 a row sum
overflows once its logits pass ~9.6 (n = 4: 4·e^9.6 ≈ 59000, the largest float16 is 65504),
which a layer reaches with ordinary weights (the kit's dtype.low_precision counterexample:
parameters with unit noise, n = 2, d = 3).
Run (with mhc-pytorch==0.2.3 installed):
    python docs/findings/repro/mhc_pytorch_sinkhorn_nonfinite.py
"""
import torch
from mhc import ManifoldHyperConnections
from torch import nn

torch.manual_seed(0)
n, d = 4, 16
h = torch.randn(2, 5, d)
cases = ((torch.float16, (9.0, 10.0, -15.0, -20.0)), (torch.float32, (80.0, 89.0, -100.0, -110.0)),
         (torch.float64, (700.0, 720.0, -740.0, -760.0)))
for dtype, values in cases:
    for v in values:
        m = ManifoldHyperConnections(d, n, nn.Linear(d, d), collapse_mode="weighted").to(dtype)
        with torch.no_grad():
            m.phi_res.weight.zero_()
            m.phi_res.bias.zero_()
            m.b_res[0, :] = v                       # one row of H_res logits set to v
        y = m(h.to(dtype))
        print(f"{dtype!s:14s} H_res logits row 0 = {v:7.1f}: output finite = "
              f"{bool(torch.isfinite(y).all())}")
