"""Kit limitation, verified: gradients.fd_parameters on mlx_lm:deepseek-v41 under the thorough
profile fails on the finite differences, not on mlx-lm 0.32.2's gradient.

The failing case (n = 8, d = 11, state scale 10, parameters perturbed by N(0, 1)) is replayed
with the kit's own draws (its strategies and salts: the same parameters, state, branch, upstream
gradient and directions). For each direction, ``mx.vjp`` through the bridge is compared with
float64 torch autograd of DeepSeek-V4.1's formulas written again here, and with float64 central
differences at three steps. mx.vjp agrees with float64 autograd and with small-step differences
to float32 precision; the kit's step for an impl computing in float32 inside (3e-3 along an
N(0, 1) direction over all 7123 parameter entries, Richardson-extrapolated) is too large for this
strongly curved direction: even in exact float64 arithmetic it gives 1443.7 where the derivative
is 1125.8. Run (mlx-lm 0.32.2 and mlx[cpu] 0.32.4 installed, hcspec source tree, seconds):

    PYTHONPATH=. python docs/findings/repro/mlx_lm_fd_parameters_step.py
"""

import torch

from hcspec.conformance import salts, strategies
from hcspec.conformance.adapters import mlx_lm
from hcspec.conformance.machinery.building import Builder

ITERS, EPS, NORM_EPS = 20, 1e-6, 1e-20  # mlx-lm's ModelArgs defaults
case = strategies.Case(1, 1, 8, 11, layer_index=0, seed=1638, scale=10.0, perturb=1.0,
                       param_scale=1.0, branch="mlp")
n = case.n
impl = Builder(mlx_lm.make_deepseek_v41, torch.float64, "cpu").make(case)
x = strategies.stream_state(case, torch.float64, "cpu", salts.STATE)
branch = strategies.make_branch(case.branch, case.d, torch.float64, "cpu", seed=case.seed)
G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), torch.float64, "cpu")


def step64(fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """One DeepSeek-V4.1 sublayer in float64 torch (HyperConnection, _collapse, _expand)."""
    flat = x.reshape(*x.shape[:2], -1)
    flat = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + NORM_EPS)
    ids = torch.tensor([0] * n + [1] * n + [2] * n * n)
    mix = flat @ fn.T * scale[ids] + base
    pre = torch.sigmoid(mix[..., :n]) + EPS
    post = 2 * torch.sigmoid(mix[..., n:2 * n])
    comb = torch.softmax(mix[..., 2 * n:].reshape(*x.shape[:2], n, n), -1) + EPS
    comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    for _ in range(ITERS - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + EPS)
        comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    z = branch((pre.unsqueeze(-1) * x).sum(-2))
    return comb.transpose(-1, -2) @ x + post.unsqueeze(-1) * z.unsqueeze(-2)


params = list(impl.parameters())
bridged = torch.autograd.grad((impl.forward(x, branch) * G).sum(), params)
p64 = [p.detach().double().requires_grad_(True) for p in params]
exact = torch.autograd.grad((step64(*p64) * G).sum(), p64)
worst = 0.0
for k in range(salts.FD_PARAMETER_DIRECTION.shape[0]):
    vs = [strategies.gaussian(p.shape, case.seed, salts.FD_PARAMETER_DIRECTION.at(k, i),
                              torch.float64, "cpu") for i, p in enumerate(params)]

    def loss(t: float, vs: list[torch.Tensor] = vs) -> float:
        with torch.no_grad():
            return float((step64(*(p + t * v for p, v in zip(p64, vs, strict=True))) * G).sum())

    via_mlx = sum(float((g.double() * v).sum()) for g, v in zip(bridged, vs, strict=True))
    via_torch = sum(float((g * v).sum()) for g, v in zip(exact, vs, strict=True))
    print(f"direction {k}: mx.vjp {via_mlx:.6g}, float64 autograd {via_torch:.6g}")
    for h in (3e-3, 1e-4, 1e-6):
        central = (loss(h) - loss(-h)) / (2 * h)
        half = (loss(h / 2) - loss(-h / 2)) / h
        print(f"  float64 differences, step {h:g}: central {central:.6g}, "
              f"Richardson {(4 * half - central) / 3:.6g}")
    worst = max(worst, abs(via_mlx - via_torch) / max(abs(via_torch), 1.0))
print(f"largest relative difference mx.vjp vs float64 autograd: {worst:.2g}")
assert worst < 1e-4, "mx.vjp disagrees with float64 autograd"
print("mx.vjp is right; the kit's float32 step (3e-3) is too large for this direction")
