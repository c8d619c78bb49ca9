"""A declared Sinkhorn–Knopp denominator eps δ: the constraints allow the deviation it implies
(2δ on the exact axis, 4δ(1 + min(bound, 1)) on the other; docs/conformance.md, "Declared
eps"), so the published DeepSeek-V4 formula in float64 with its real ``hc_eps = 1e-6``
passes, and a Sinkhorn missing unit sums by more than that still fails."""

from __future__ import annotations

import torch

from hcspec.conformance import rules
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.reference.targets import deepseek_v4
from tests.mutants import sinkhorn_eps_beyond_declared

EPS_PROPERTIES = ("constraints", "reduction.mhc_n1_residual", "scale.constraints")


def test_the_deviation_follows_the_declared_eps() -> None:
    chain = rules.Precision.of(torch.float64, None, None, 1e-6)
    assert rules.sinkhorn_eps_deviation(chain, "exact") == 2e-6
    assert rules.sinkhorn_eps_deviation(chain, "other", 0.0) == 4e-6
    assert rules.sinkhorn_eps_deviation(chain, "other", 5.0) == 8e-6
    none = rules.Precision.of(torch.float64, None, None)
    assert rules.sinkhorn_eps_deviation(none, "exact") == 0.0
    assert rules.EXACT_AXIS.apply(chain, n=4).allowance > 2e-6
    assert rules.EXACT_AXIS.apply(none, n=4).allowance < 1e-13


def test_the_published_deepseek_v4_with_its_real_eps_passes_every_constraint() -> None:
    probe = deepseek_v4(4, 8)
    assert probe.hc_eps == 1e-6 and probe.conventions["sinkhorn_denominator_eps"] == 1e-6
    report = check_implementation(deepseek_v4, profile="ci", only=list(EPS_PROPERTIES))
    ran = {r.id: r for r in report.results}
    # constraints.h_res_vertices steers a declared birkhoff construction only: not applicable
    # to Sinkhorn–Knopp, with its reason
    assert ran["constraints.h_res_vertices"].status == rp.NOT_APPLICABLE
    constraint_ids = [i for i in ran if i.startswith("constraints.")
                      and i != "constraints.h_res_vertices"]
    assert len(constraint_ids) >= 9
    for prop_id in (*constraint_ids, "reduction.mhc_n1_residual", "scale.constraints"):
        assert ran[prop_id].status == rp.PASSED, (prop_id, ran[prop_id].message)


def test_a_sinkhorn_off_by_more_than_the_declared_eps_implies_fails() -> None:
    report = check_implementation(sinkhorn_eps_beyond_declared.make, profile="quick",
                                  only=["constraints.h_res_exact_axis"])
    result = next(r for r in report.results if r.id == "constraints.h_res_exact_axis")
    assert result.status == rp.FAILED, result.message
