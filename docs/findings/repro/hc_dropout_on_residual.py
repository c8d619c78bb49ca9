"""Bug (training mode only), hyper-connections 0.4.11: dropout is applied to the whole new state.

HyperConnections / ManifoldConstrainedHyperConnections (both layouts) apply nn.Dropout to
H_res X + h_post z (the residual path included), not to the branch output.  With a zero
branch the residual should pass through unchanged; in train mode with dropout=0.5 half of the
residual entries are zeroed and the rest doubled.
Run (with hyper-connections==0.4.11 installed):
    python docs/findings/repro/hc_dropout_on_residual.py
"""
import torch
from hyper_connections import HyperConnections, ManifoldConstrainedHyperConnections
from hyper_connections.mHCv2 import ManifoldConstrainedHyperConnections as V2

torch.manual_seed(0)
n, d = 3, 8
for cls, shape in ((HyperConnections, (2 * n, 4, d)),
                   (ManifoldConstrainedHyperConnections, (2 * n, 4, d)), (V2, (2, 4, n, d))):
    m = cls(n, dim=d, layer_index=0, dropout=0.5).train()
    x = torch.randn(*shape)
    bi, add = m(x)
    out = add(torch.zeros_like(bi))
    m.eval()
    bi, add = m(x)
    ref = add(torch.zeros_like(bi))
    print(f"{cls.__module__}: fraction of residual entries zeroed in train mode = "
          f"{(out == 0).float().mean():.3f}; kept entries scaled by "
          f"{(out[out != 0] / ref[out != 0]).mean():.3f}")
