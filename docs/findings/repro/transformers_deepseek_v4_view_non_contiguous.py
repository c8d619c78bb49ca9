"""transformers' DeepSeek-V4 hyper-connection raises on a non-contiguous [B, S, n, D] state.

Builds DeepseekV4HyperConnection from a tiny config (no weights downloaded) and calls it on the
same state twice: once contiguous, once as a view whose last two axes are stored transposed
(the values are identical). Standalone: needs only torch==2.13.0 and transformers; does not use
hcspec. Run it once per release:
    python docs/findings/repro/transformers_deepseek_v4_view_non_contiguous.py
Observed: transformers 5.8.0 gives the same outputs for both (up to float32 rounding of the
reordered sums); 5.23.0 raises RuntimeError
("view size is not compatible with input tensor's size and stride") on the view.
"""

import torch
import transformers
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

n, d = 4, 16
config = DeepseekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=20, hc_eps=1e-6,
                          rms_norm_eps=1e-6)
torch.manual_seed(0)
hc = m.DeepseekV4HyperConnection(config)
x = torch.randn(2, 3, n, d)
view = x.transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, other strides
print("transformers", transformers.__version__, "view contiguous:", view.is_contiguous(),
      "equal values:", torch.equal(view, x))
with torch.no_grad():
    want = hc(x)
    try:
        got = hc(view)
    except RuntimeError as exc:
        print("non-contiguous state: RuntimeError:", exc)
    else:
        diff = max(float((a - b).abs().max()) for a, b in zip(got, want, strict=True))
        print("non-contiguous state: max |difference| from the contiguous copy's outputs:",
              f"{diff:.3g} (float32 rounding)")
