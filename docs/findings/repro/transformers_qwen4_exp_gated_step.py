"""transformers 5.23.0's Qwen4-exp gated hyper-connection computes the published gated step.

Builds ``Qwen4ExpTextGatedResidual`` from a tiny config (hidden_size 8, hc_count 3,
hc_lowrank 4; no weights downloaded), moves its weights away from the init, composes one step
as ``Qwen4ExpTextDecoderLayer`` does (``hyper_input + (F(mixed) ⊗ injection_weights)``) and
compares it with the step written out here from the equations, in float64:

    N_s = (1 + w_s) ⊙ X_s / sqrt(mean_k X_sk² + eps)        (group RMSNorm, a group per stream)
    G   = sigmoid(U silu(D vec(N) / n)),  x_in = mean_s(G_s ⊙ N_s)
    h_post = 2 sigmoid(W vec(N) / n),     X' = X + h_post ⊗ F(x_in)     (no mixing matrix)

Also prints what the same comparison gives for four departures (the sum over the streams, the
gate read from the raw streams, sigma instead of 2 sigma, no /n in the inject), to show each is
far from the module, and that the config refuses hc_count = 1.
Standalone: needs only torch==2.13.0 and transformers==5.23.0; does not use hcspec:
    python docs/findings/repro/transformers_qwen4_exp_gated_step.py
Observed (transformers 5.23.0, torch 2.13.0+cpu): float64 input, max |module − equations| =
1.7e-07 (the group norm computes in float32: ``self._norm(x.float())``, so a float64 state
gets float32 precision; the kit's target declares compute_dtype=float32); the departures
differ by 1.2 (sum), 0.77 (raw gate), 1.1 (sigma), 0.45 (no /n); hc_count = 1 is refused
(StrictDataclassClassValidationError wrapping "Qwen4-Exp requires hc_count > 1"). Exit
status 0.
"""

import torch
import torch.nn.functional as F
from transformers.models.qwen4_exp import configuration_qwen4_exp, modeling_qwen4_exp

N, D, R = 3, 8, 4
torch.manual_seed(0)
config = configuration_qwen4_exp.Qwen4ExpTextConfig(hidden_size=D, hc_count=N, hc_lowrank=R,
                                                    rms_norm_eps=1e-6)
module = modeling_qwen4_exp.Qwen4ExpTextGatedResidual(config).double()
with torch.no_grad():
    for p in module.parameters():
        p.add_(torch.randn_like(p) * 0.5)


def branch(a):
    return torch.tanh(a) * 1.5 + 0.25


def by_equations(x, streams="mean", gate_raw=False, post=2.0, inject_n=True):
    w = module.hc_norm.weight.reshape(N, D)
    down = module.input_mix_weight_down.weight
    up = module.input_mix_weight_up.weight
    inject = module.block_inject_weight.weight
    normed = (1 + w) * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    source = x if gate_raw else normed
    gate = torch.sigmoid(F.silu(source.flatten(-2) @ down.T / N) @ up.T).unflatten(-1, (N, D))
    read = (gate * normed).sum(-2)
    x_in = read if streams == "sum" else read / N
    logits = normed.flatten(-2) @ inject.T
    h_post = post * torch.sigmoid(logits / N if inject_n else logits)
    return x + h_post.unsqueeze(-1) * branch(x_in).unsqueeze(-2)


x = torch.randn(2, 5, N, D, dtype=torch.float64)
with torch.no_grad():
    mixed, hyper_input, injection_weights = module(x.flatten(-2))
    step = (hyper_input + (branch(mixed).unsqueeze(-2)
                           * injection_weights.unsqueeze(-1)).flatten(-2)).unflatten(-1, (N, D))
    print(f"max |module − equations|, float64 input: {(step - by_equations(x)).abs().max():.2g}")
    for name, kw in (("sum over the streams", {"streams": "sum"}),
                     ("gate from the raw streams", {"gate_raw": True}),
                     ("sigma instead of 2 sigma", {"post": 1.0}),
                     ("no /n in the inject", {"inject_n": False})):
        print(f"  departure '{name}': max |module − it| = "
              f"{(step - by_equations(x, **kw)).abs().max():.2g}")
try:
    configuration_qwen4_exp.Qwen4ExpTextConfig(hidden_size=D, hc_count=1)
    print("hc_count = 1 accepted")
except Exception as exc:  # the config's validator wraps the ValueError
    print(f"hc_count = 1 refused: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
