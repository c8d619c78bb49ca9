"""The tolerance budgets (hcspec.conformance.rules) and the metrics they are stated for
(hcspec.conformance.metrics): the Birkhoff–Hopf bound holds for a correct Sinkhorn–Knopp and is
tight enough to reject one that skips the column normalisation."""

from __future__ import annotations

import math

import pytest
import torch

from hcspec.conformance import metrics, rules
from hcspec.reference import sinkhorn_knopp


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("std", [0.01, 0.3, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("iterations", [1, 3, 20])
def test_bound_holds_for_correct_sinkhorn(n: int, std: float, iterations: int) -> None:
    gen = torch.Generator().manual_seed(n * 100 + iterations)
    logits = torch.randn(300, n, n, generator=gen, dtype=torch.float64) * std
    H = sinkhorn_knopp(logits, iterations)
    err = (H.sum(dim=-2) - 1).abs().amax(dim=-1)
    bound = rules.sinkhorn_other_axis_bound(H, iterations, torch.float64, probed=False)
    assert bool((err <= bound).all()), float((err - bound).max())


def test_bound_is_tight_at_moderate_logits_and_rejects_rows_only() -> None:
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(300, 4, 4, generator=gen, dtype=torch.float64) * 0.5
    rows_only = torch.softmax(logits, dim=-1)
    bound = rules.sinkhorn_other_axis_bound(rows_only, 20, torch.float64, probed=False)
    err = (rows_only.sum(dim=-2) - 1).abs().amax(dim=-1)
    assert float(bound.median()) < 1e-6
    assert bool((err > bound).float().mean() > 0.99)


def test_projective_diameter_is_invariant_under_diagonal_scaling() -> None:
    gen = torch.Generator().manual_seed(2)
    K = torch.rand(5, 3, 3, generator=gen, dtype=torch.float64) + 0.1
    r = torch.rand(5, 3, 1, generator=gen, dtype=torch.float64) + 0.5
    c = torch.rand(5, 1, 3, generator=gen, dtype=torch.float64) + 0.5
    before = metrics.projective_diameter(K)
    after = metrics.projective_diameter(r * K * c)
    assert torch.allclose(before, after, atol=1e-12)
    assert float(metrics.projective_diameter(torch.eye(3, dtype=torch.float64))) == math.inf


def test_dtype_awareness_and_errors() -> None:
    assert rules.law(torch.float64) < rules.law(torch.float32)
    assert rules.low_precision(torch.bfloat16) > rules.low_precision(torch.float16)
    assert rules.effective_dtype(torch.float64, torch.float32) == torch.float32
    assert rules.effective_dtype(torch.float32, None) == torch.float32
    with pytest.raises(ValueError, match="floating dtype"):
        rules.eps(torch.int32)
    with pytest.raises(ValueError, match="iterations"):
        rules.sinkhorn_other_axis_bound(torch.eye(2), 0, torch.float64, False)
    assert metrics.scaled_error(torch.zeros(2), torch.zeros(3)) == math.inf
    assert metrics.scaled_error(torch.tensor([1.0, math.nan]), torch.ones(2)) == math.inf
    assert metrics.scaled_error(torch.tensor([2.5]), torch.tensor([2.0])) == pytest.approx(0.25)


def test_float32_gradients_allow_for_an_ill_conditioned_case_of_correct_code() -> None:
    """Found by the soak: the reference dynamic HC at d = 2 (a per-stream LayerNorm that
    cancels) and state scale 10 has float32 gradients 3.2e-4 away from float64 — above the
    well-conditioned floor 1024·eps32, within the allowance for the case's measured
    sensitivity."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation
    from hcspec.conformance.strategies import Case

    case = Case(batch=1, tokens=1, n=3, d=2, layer_index=0, seed=175, scale=10.0, perturb=1.0,
                param_scale=1.0, branch="linear")
    report = check_implementation("reference:hc-dynamic", device="cpu", case=case,
                                  only=["dtype.float32_gradients"])
    result = next(r for r in report.results if r.id == "dtype.float32_gradients")
    assert result.status == rp.PASSED, result.message
    assert result.achieved is not None
    error, tolerance = result.achieved["error"], result.achieved["tolerance"]
    assert error > rules.gradient_float32() > 1e-4  # the floor alone would fail it
    assert error < tolerance
