"""Agreement, verified: SGLang 0.5.23's Qwen4-exp GatedResidual (srt/layers/hyperconnection.py,
hc_per_branch_norm=True as the model builds it), run as its layer does (mix -> branch ->
combine), equals the published step written out here in float64:
N_s = (1 + w_s) X_s / sqrt(mean X_s^2 + eps), G = sigmoid(up(silu(down(vec N) / n))),
x_in = mean_s G_s N_s, X' = X + 2 sigmoid(inject(vec N) / n) F(x_in). Also prints what
qwen4_gate.py's Triton kernels compute (the per-layer-embedding gate, not the HC step). This
script does not use the kit. Run in the SGLang lane's venv, about 15 s:

    .ci-venv-sglang/bin/python docs/findings/repro/sglang_gated_step.py
"""

import torch
import torch.nn.functional as F
from sglang.srt.layers.hyperconnection import GatedResidual, HyperConnectionConfig

n, d, r, eps = 4, 8, 4, 1e-6
torch.manual_seed(0)
config = HyperConnectionConfig(hc_count=n, hidden_size=d, params_dtype=torch.float64,
                               hc_lowrank=r, rms_norm_eps=eps, hc_per_branch_norm=True)
module = GatedResidual(config)
with torch.no_grad():
    module.hc_norm.weight.normal_(0, 0.3)
x = 3 * torch.randn(6, n * d, dtype=torch.float64)


def branch(h: torch.Tensor) -> torch.Tensor:
    return torch.tanh(h)


mixed, residuals = module.mix(x)
got = module.combine(branch(mixed), residuals)

X = x.reshape(6, n, d)
w = module.hc_norm.weight.reshape(n, d)
N = (1 + w) * X / torch.sqrt(X.square().mean(-1, keepdim=True) + eps)
vecN = N.reshape(6, n * d)
G = torch.sigmoid(F.silu(vecN @ module.input_mix_weight_down.weight.T / n)
                  @ module.input_mix_weight_up.weight.T).reshape(6, n, d)
x_in = (G * N).mean(1)
post = 2 * torch.sigmoid(vecN @ module.block_inject_weight.weight.T / n)
want = (X + post.unsqueeze(-1) * branch(x_in).unsqueeze(1)).reshape(6, n * d)
print("max |SGLang - written-out step| =", (got - want).abs().max().item(),
      "(float32 norm: expect < 1e-5)")
