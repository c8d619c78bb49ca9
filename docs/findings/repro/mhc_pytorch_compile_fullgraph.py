"""Kit limitation, verified: compile.fullgraph on mhc_pytorch:mhc fails in the adapter, not in
mhc-pytorch 0.2.3.

The package's ManifoldHyperConnections compiles with torch.compile(fullgraph=True) and its
compiled forward and input gradient equal eager (float64). What the kit compiles is the
adapter's forward, which (1) checks with torch.equal that the [B, T, n, d] state is replicated
(a data-dependent op: TorchDynamo stops with "Data dependent operator", aten.equal) and,
with that check removed, (2) reads the per-stream state through its CallRecorder (a
TorchFunctionMode), which raises inside the trace. Run (hcspec source tree, mhc-pytorch
installed; BACKEND aot_eager by default, `inductor` as in the thorough profile, ~1–2 min):

    PYTHONPATH=. python docs/findings/repro/mhc_pytorch_compile_fullgraph.py [BACKEND]
"""

import sys

import torch
import torch._dynamo as dynamo
from mhc import ManifoldHyperConnections
from torch import nn

from hcspec.conformance.adapters.mhc_pytorch import make

backend = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
torch.manual_seed(0)
n, d = 4, 8
h = torch.randn(2, 3, d, dtype=torch.float64)
G = torch.randn(2, 3, d, dtype=torch.float64)

module = ManifoldHyperConnections(d, n, nn.Linear(d, d), collapse_mode="mean").double()
h_eager = h.clone().requires_grad_(True)
y_eager = module(h_eager)
(g_eager,) = torch.autograd.grad((y_eager * G).sum(), h_eager)
compiled = torch.compile(module, fullgraph=True, backend=backend, dynamic=False)
h_comp = h.clone().requires_grad_(True)
y_comp = compiled(h_comp)
(g_comp,) = torch.autograd.grad((y_comp * G).sum(), h_comp)
print(f"package, fullgraph=True, {backend}: traced; max |forward - eager| = "
      f"{float((y_comp - y_eager).detach().abs().max()):.2g}, max |dL/dh - eager| = "
      f"{float((g_comp - g_eager).abs().max()):.2g}")

adapter = make(n, d, dtype=torch.float64)
branch = nn.Linear(d, d).double()
x = h.unsqueeze(2).expand(2, 3, n, d).contiguous()  # a replicated state, as the kit draws


def step(state: torch.Tensor) -> torch.Tensor:
    return adapter.forward(state, branch)


def try_compile(label: str) -> None:
    dynamo.reset()
    try:
        torch.compile(step, fullgraph=True, backend=backend, dynamic=False)(x)
        print(f"{label}: traced")
    except Exception as exc:
        lines = str(exc).splitlines()
        debug = next((ln.strip() for ln in lines if "debug context" in ln), "")
        print(f"{label}: {type(exc).__name__}: {lines[0]} [{debug}]")


try_compile("adapter forward")
adapter._hidden = lambda state: state[:, :, 0, :]  # type: ignore[method-assign]
try_compile("adapter forward without its torch.equal check")
