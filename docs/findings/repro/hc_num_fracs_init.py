"""Bug, hyper-connections 0.4.11: HyperConnections(num_fracs=2) at init.

With every dynamic weight at zero and a zero branch, HC must leave the residual unchanged
(static H_res = I).  With num_fracs=2 it does not: the state is cut into (stream, fraction)
chunks of width d/f, and at init one chunk is copied over another (one chunk is lost), and the
branch reads a chunk of the wrong stream.  Shown by expressing every output chunk as a
combination of input chunks (d/f >= n*f so the chunks are linearly independent).
Run (with hyper-connections==0.4.11 installed):
    python docs/findings/repro/hc_num_fracs_init.py
"""
import torch
from hyper_connections import HyperConnections

n, d, f = 3, 32, 2
torch.manual_seed(0)
m = HyperConnections(n, dim=d, num_fracs=f, layer_index=0).double()
x = torch.randn(n, 1, d, dtype=torch.float64)        # batch 1, one token, folded (b s) layout
branch_input, add_residual = m(x)
out = add_residual(torch.zeros_like(branch_input))
chunks_in = x.reshape(n * f, d // f)                  # chunk index = stream * f + fraction
pinv = torch.linalg.pinv(chunks_in)
res_map = (out.reshape(n * f, d // f) @ pinv).round(decimals=6)
pre_map = (branch_input.reshape(f, d // f) @ pinv).round(decimals=6)
print("output chunk <- input chunk (expected identity):")
print(res_map.abs().argmax(-1).tolist(), "identity would be", list(range(n * f)))
print("branch-input fraction <- input chunk (expected stream 0's fractions [0, 1]):",
      pre_map.abs().argmax(-1).tolist())
print("zero branch leaves the state unchanged:", torch.allclose(out, x))
m1 = HyperConnections(n, dim=d, num_fracs=1, layer_index=0).double()
bi1, add1 = m1(x)
print("same check with num_fracs=1:", torch.allclose(add1(torch.zeros_like(bi1)), x))
