"""Agreement, verified: vLLM 0.33.0's Qwen4-exp GatedResidual (the torch one,
models/qwen4_exp/common/hyperconnection.py, hc_per_branch_norm=True as the model builds it),
run as its layer does (mix -> branch -> combine), equals the published step written out here in
float64 (N_s = (1 + w_s) X_s / sqrt(mean X_s^2 + eps), G = sigmoid(up(silu(down(vec N) / n))),
x_in = mean_s G_s N_s, X' = X + 2 sigmoid(inject(vec N) / n) F(x_in)). This script does not use
the kit. Run in the vLLM lane's venv, about 10 s:

    .ci-venv-vllm/bin/python docs/findings/repro/vllm_gated_step.py
"""

import torch
import torch.nn.functional as F
from vllm.models.qwen4_exp.common.hyperconnection import GatedResidual, HyperConnectionConfig

n, d, r, eps = 4, 8, 4, 1e-6
torch.manual_seed(0)
config = HyperConnectionConfig(hc_count=n, hidden_size=d, params_dtype=torch.float64,
                               hc_lowrank=r, rms_norm_eps=eps, hc_per_branch_norm=True)
module = GatedResidual(config)
with torch.no_grad():
    module.hc_norm.weight.normal_(0, 0.3)
x = 3 * torch.randn(6, n * d, dtype=torch.float64)
mixed, residuals = module.mix(x)
got = module.combine(torch.tanh(mixed), residuals)

X = x.reshape(6, n, d)
N = (1 + module.hc_norm.weight.reshape(n, d)) * X / torch.sqrt(
    X.square().mean(-1, keepdim=True) + eps)
vecN = N.reshape(6, n * d)
G = torch.sigmoid(F.silu(vecN @ module.input_mix_weight_down.weight.T / n)
                  @ module.input_mix_weight_up.weight.T).reshape(6, n, d)
post = 2 * torch.sigmoid(vecN @ module.block_inject_weight.weight.T / n)
want = (X + post.unsqueeze(-1) * torch.tanh((G * N).mean(1)).unsqueeze(1)).reshape(6, n * d)
print("max |vLLM - written-out step| =", (got - want).abs().max().item(),
      "(float32 norm: expect < 1e-5)")
