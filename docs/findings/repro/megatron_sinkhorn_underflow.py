"""Megatron-LM (main, d98e8a64): SinkhornKnopp drops a stream when exp underflows.

Standalone (torch only; does not use hcspec). Needs a Megatron-LM checkout:

    MEGATRON_LM=/path/to/Megatron-LM python docs/findings/repro/megatron_sinkhorn_underflow.py

`megatron/core/transformer/hyper_connection.py` is loaded from the checkout by path; the four
Megatron modules it imports at the top are replaced by empty stand-ins (only `SinkhornKnopp`
is used, which needs none of them), so no GPU build, Transformer Engine or Apex is needed.

`SinkhornKnopp.forward` computes `exp(L - rowmax(L))` in the logits' dtype and then alternates
row and column sums clamped at 1e-6. When every entry of a column underflows to 0 (a logit
~745 below its row's maximum in float64, ~104 in float32, ~17 in float16), the clamp keeps the
division finite but the column stays 0: `1ᵀ H_res` is not `1ᵀ`, and that input stream is
dropped from every output. A log-domain Sinkhorn–Knopp on the same logits returns a doubly
stochastic matrix. In float16 the threshold is reached at ordinary logits.
"""

import importlib.util
import os
import sys
import types
from pathlib import Path

import torch

checkout = Path(os.environ.get("MEGATRON_LM", "."))
source = checkout / "megatron/core/transformer/hyper_connection.py"
if not source.is_file():
    sys.exit(f"set MEGATRON_LM to a Megatron-LM checkout (no {source})")

stubs = {
    "megatron.core.tensor_parallel.random": {"CheckpointWithoutOutputManager": object},
    "megatron.core.transformer.module": {"MegatronModule": torch.nn.Module},
    "megatron.core.transformer.transformer_config": {"TransformerConfig": object},
    "megatron.core.utils": {"nvtx_decorator": lambda message=None: (lambda f: f)},
}
for name, attributes in stubs.items():
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
spec = importlib.util.spec_from_file_location("megatron_hyper_connection", source)
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)


def log_domain(logits, iterations=20):
    log_m = logits.double()
    for _ in range(iterations):
        log_m = log_m - log_m.logsumexp(dim=-1, keepdim=True)
        log_m = log_m - log_m.logsumexp(dim=-2, keepdim=True)
    return log_m.exp()


for dtype, gap in ((torch.float64, 800.0), (torch.float32, 110.0), (torch.float16, 20.0)):
    # one source stream (column 1) whose logits are `gap` below the others in every row
    logits = torch.tensor([[0.0, -gap, 0.5], [0.3, -gap, 0.0], [0.0, -gap + 1.0, 0.2]],
                          dtype=dtype)
    H = hc.SinkhornKnopp.apply(logits.unsqueeze(0).unsqueeze(0), 20)[0, 0].double()
    print(f"{dtype!s:14} gap {gap:5}: column sums {H.sum(-2).tolist()}, "
          f"row sums {[round(v, 4) for v in H.sum(-1).tolist()]}, "
          f"stream 1 dropped={bool(H[:, 1].abs().max() == 0)}")
    L = log_domain(logits)
    print(f"{'':14} log domain : column sums {[round(v, 6) for v in L.sum(-2).tolist()]}, "
          f"row sums {[round(v, 6) for v in L.sum(-1).tolist()]}")
