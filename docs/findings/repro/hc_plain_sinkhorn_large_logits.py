"""Bug, hyper-connections 0.4.11: default (plain-domain) Sinkhorn of the mHC modules.

With one source stream's H_res logits ~100 below the others (float32, which both modules use
internally), the default Sinkhorn gives NaN gradients, and from ~104 on it zeroes that stream's
whole column of H_res (the stream is dropped from every output).  log_domain_sinkhorn=True
is fine.  Run (with hyper-connections==0.4.11 installed):
    python docs/findings/repro/hc_plain_sinkhorn_large_logits.py
"""
import torch
from hyper_connections import ManifoldConstrainedHyperConnections as MHC
from hyper_connections.mHCv2 import ManifoldConstrainedHyperConnections as MHCv2

n, d = 3, 8
torch.manual_seed(0)
for cls, fold in ((MHC, True), (MHCv2, False)):
    for log_domain in (False, True):
        for gap in (100.0, 110.0):
            m = cls(n, dim=d, layer_index=0, log_domain_sinkhorn=log_domain)
            with torch.no_grad():
                # the logits of source stream 1 (its row in the package's layout)
                m.static_alpha[1, 1:] -= gap
            x = torch.randn(2, 4, n, d)
            xin = x.permute(0, 2, 1, 3).reshape(2 * n, 4, d) if fold else x
            branch_input, add_residual = m(xin)
            out = add_residual(torch.zeros_like(branch_input))  # = H_res X
            out = out.reshape(2, n, 4, d).permute(0, 2, 1, 3) if fold else out
            # does output depend on stream 1 at all?
            x2 = x.clone()
            x2[:, :, 1] += 1.0
            xin2 = x2.permute(0, 2, 1, 3).reshape(2 * n, 4, d) if fold else x2
            bi2, add2 = m(xin2)
            out2 = add2(torch.zeros_like(bi2))
            out2 = out2.reshape(2, n, 4, d).permute(0, 2, 1, 3) if fold else out2
            dropped = torch.equal(out, out2)
            (out * torch.randn_like(out)).sum().backward()
            nan_grad = not torch.isfinite(m.static_alpha.grad).all().item()
            module = cls.__module__.split('.')[-1]
            print(f"{module:42s} log_domain={log_domain!s:5s} gap={gap:5.0f} "
                  f"stream1_dropped={dropped!s:5s} nan_param_grad={nan_grad}")
