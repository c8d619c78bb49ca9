"""Kit limitation, verified: hyper-connections 0.4.11 mHC with num_dynamic_alpha_proposals=2.

The package runs Sinkhorn–Knopp on each proposal's logits and averages the two results. The
kit bounds the row error of H_res (the axis not normalised last) by the Birkhoff–Hopf bound at
the projective diameter Δ of H_res itself; for an *average* of Sinkhorn outputs that Δ is
smaller than each proposal's, so the bound does not apply. This script replays the kit's
counterexample, records the package's two Sinkhorn outputs (nothing changed), and shows that
each is within the bound at its own Δ, and that the average's row error is an average of
theirs. Run (hcspec source tree, hyper-connections installed):

    PYTHONPATH=. python docs/findings/repro/hc_proposals_average_bound.py
"""

import torch

from hcspec.conformance import metrics, rules, strategies
from hcspec.conformance.adapters.hyper_connections import make_mhc

case = strategies.Case(batch=1, tokens=1, n=2, d=3, layer_index=0, seed=1, perturb=1.0,
                       branch="zero")  # the minimal counterexample printed by the kit
impl = make_mhc(case.n, case.d, layer_index=case.layer_index, seed=case.seed,
                num_dynamic_alpha_proposals=2)
with torch.no_grad():  # the kit's perturbation: N(0, perturb²) on every parameter
    for i, p in enumerate(impl.parameters()):
        p.add_(strategies.gaussian(p.shape, case.seed, 1000 + i, torch.float64, std=case.perturb))

recorded = []
sinkhorn = impl.module.residual_mix_constraint_fn


def recording(logits: torch.Tensor) -> torch.Tensor:
    out = sinkhorn(logits)
    recorded.append(out.detach())
    return out


impl.module.residual_mix_constraint_fn = recording
x = strategies.stream_state(case, torch.float64)
_, _, H_res = impl.weights(x)  # row form, [B, T, n, n]
per_proposal = recorded[-1].transpose(-1, -2).double()  # [p, B, T, n, n], row form

for name, H in [("average (what the package uses)", H_res.detach())] + [
        (f"proposal {k}", per_proposal[k]) for k in range(per_proposal.shape[0])]:
    row_error = float((H.sum(-1) - 1).abs().max())
    col_error = float((H.sum(-2) - 1).abs().max())
    bound = float(rules.sinkhorn_other_axis_bound(H, 20, torch.float32, False).max())
    delta = float(metrics.projective_diameter(H).max())
    print(f"{name:32s} Δ = {delta:6.3f}  column error {col_error:.1e}  row error "
          f"{row_error:.2e}  Birkhoff–Hopf bound at this Δ {bound:.2e}  "
          f"{'within' if row_error <= bound else 'EXCEEDS'}")
