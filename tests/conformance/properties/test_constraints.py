"""Constraints family (mHC): doubly stochastic H_res, the H_pre/H_post ranges."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.machinery.base import Inconclusive, NotApplicable, PropertyFailure
from hcspec.conformance.machinery.sinkhorn_bounds import gain_ceiling
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.strategies import Case
from tests.conformance.properties.support import run, unmet


def test_reference_passes() -> None:
    for pid in ("constraints.h_res_nonnegative", "constraints.h_res_exact_axis",
                "constraints.h_res_other_axis", "constraints.h_pre_range",
                "constraints.h_post_range", "constraints.stream_sum_preserved",
                "constraints.nonexpansive"):
        run(pid, "reference:mhc")


def test_sinkhorn_ending_on_columns_fails_the_exact_rows() -> None:
    with pytest.raises(PropertyFailure, match="row sum − 1"):
        run("constraints.h_res_exact_axis", "mutant:sinkhorn_columns_only")


def test_unbounded_h_post_leaves_its_range() -> None:
    with pytest.raises(PropertyFailure, match=r"H_post distance outside \[0, 2\]"):
        run("constraints.h_post_range", "mutant:h_post_unbounded", example=1, perturb=3.0)


def test_constraints_apply_to_mhc_and_need_readable_weights() -> None:
    assert unmet("constraints.nonexpansive", kind="hc-dynamic") == (
        "applies to mhc; the target's kind is hc-dynamic")
    hidden = unmet("constraints.nonexpansive", capabilities=frozenset(),
                   conventions=Conventions(state_domain="replicated"))
    assert hidden is not None and "weights(x)" in hidden
    assert unmet("constraints.nonexpansive", capabilities=frozenset()) is None  # probed


@pytest.mark.parametrize("pid", ["constraints.nonexpansive", "constraints.stream_sum_preserved"])
def test_a_bound_that_cannot_fail_is_inconclusive_not_passed(pid: str) -> None:
    """Perturbed ×3 at n = 4, every token's Birkhoff–Hopf column bound exceeds what any
    row-stochastic non-negative matrix can show (gain √n, column error n − 1): before, the case
    passed with allowances such as 4.7e5."""
    case = Case(2, 3, 4, 9, seed=0, perturb=1.0, param_scale=3.0)
    with pytest.raises(Inconclusive, match="no token has a bound that could fail"):
        run(pid, "reference:mhc", case)


def test_the_gain_ceiling_is_the_largest_gain_of_a_row_stochastic_matrix() -> None:
    for n in (2, 3, 4, 8):
        H = torch.zeros(n, n, dtype=torch.float64)
        H[:, 0] = 1.0  # every row sums to 1; the gain on e_1 is √n
        gain = float(torch.linalg.matrix_norm(H, ord=2))
        assert gain - 1 == pytest.approx(gain_ceiling(n), rel=1e-12)
        worst = max(float(torch.linalg.matrix_norm(
            torch.softmax(torch.randn(n, n, dtype=torch.float64) * 9, -1), ord=2))
            for _ in range(200))
        assert worst - 1 <= gain_ceiling(n) + 1e-12


MHC_LITE = ("constraints.h_res_exact_axis", "constraints.h_res_other_axis",
            "constraints.stream_sum_preserved", "constraints.nonexpansive")


@pytest.mark.parametrize("pid", MHC_LITE)
def test_mhc_lite_passes_its_exact_sums(pid: str) -> None:
    run(pid, "reference:mhc-lite", Case(2, 3, 3, 7, seed=0, perturb=1.0))


def test_the_summation_allowance_grows_with_the_terms() -> None:
    from hcspec.conformance import rules
    from hcspec.conformance.rules.base import Precision
    p = Precision.of(torch.float32, None, None)
    e = torch.finfo(torch.float32).eps
    lite = rules.EXACT_AXIS.apply(p, n=8, terms=40320)
    assert lite.allowance == pytest.approx((40320 + 8) * e)
    assert lite.floor == pytest.approx((40320 ** 0.5 + 9) * e)
    assert lite.allowance > 6.75e-5  # the blocked float32 sum of 8! permutations passes
    assert rules.EXACT_AXIS.apply(p, n=8).allowance < 6.75e-5  # the Sinkhorn rule would not
    assert rules.EXACT_AXIS.apply(p, n=3, terms=6).allowance == rules.EXACT_AXIS.apply(
        p, n=3).allowance  # few terms: never below the exact axis's own budget


def test_h_res_vertices_reaches_every_permutation_of_mhc_lite() -> None:
    run("constraints.h_res_vertices", "reference:mhc-lite")
    with pytest.raises(PropertyFailure) as failure:
        run("constraints.h_res_vertices", "mutant:birkhoff_duplicated_permutations")
    assert "but not P = " in str(failure.value)
    with pytest.raises(NotApplicable, match="orthostochastic"):
        run("constraints.h_res_vertices", "reference:mhc-ortho")


@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_h_res_vertices_steers_sinkhorn_logits_to_every_permutation(target: str) -> None:
    run("constraints.h_res_vertices", target)


def test_sinkhorn_of_saturated_logits_cannot_reach_a_vertex() -> None:
    with pytest.raises(PropertyFailure) as failure:
        run("constraints.h_res_vertices", "mutant:sinkhorn_logits_saturated")
    assert "vs the declared formula there" in str(failure.value)


def test_a_sinkhorn_target_without_logits_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="no logits"):
        run("constraints.h_res_vertices", "hcspec.reference.targets:deepseek_v4")


@pytest.mark.parametrize("n", [2, 3, 8])
def test_sinkhorn_at_c_times_p_is_at_its_fixed_point(n: int) -> None:
    """exp(c·P) has equal row and column sums: every round count gives (e^c P + J − P) /
    (e^c + n − 1), β(c) = (n − 1)/(e^c + n − 1) from P (the bound the steering compares)."""
    import math

    from hcspec.conformance.machinery.steering import VERTEX_LOGIT
    from hcspec.formulas.mhc import h_res
    from hcspec.spec.record import Formula, SinkhornSpec
    c = VERTEX_LOGIT
    P = torch.eye(n, dtype=torch.float64)[torch.randperm(n)]
    want = (math.exp(c) * P + 1 - P) / (math.exp(c) + n - 1)
    for rounds in (1, 3, 20):
        got = h_res(Formula(sinkhorn=SinkhornSpec(iterations=rounds)), c * P)
        assert float((got - want).abs().max()) < 1e-15
        assert float((got - P).abs().max()) == pytest.approx((n - 1) / (math.exp(c) + n - 1))


def test_a_declared_softmax_h_post_gets_no_sigma_hint() -> None:
    target = "tests.mutants.h_post_softmax_declared_sigmoid:make_declared"
    run("constraints.h_post_span", target)


def test_orthostochastic_sums_within_the_orthogonality_defect() -> None:
    from hcspec.formulas.mhc import orthostochastic
    L = torch.randn(64, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for steps in (1, 3, 30):
        H = orthostochastic(L, steps)
        X = torch.sqrt(H)  # |Q|: QQᵀ needs the signs, so recompute Q itself
        Q = L / torch.linalg.matrix_norm(L)[..., None, None]
        for _ in range(steps):
            Q = 1.5 * Q - 0.5 * Q @ Q.transpose(-1, -2) @ Q
        assert torch.allclose(X, Q.abs())
        defect = torch.linalg.matrix_norm(Q @ Q.transpose(-1, -2) - torch.eye(5), ord=2)
        rows = (H.sum(-1) - 1).abs().amax(-1)
        cols = (H.sum(-2) - 1).abs().amax(-1)
        assert bool((rows <= defect + 1e-12).all()) and bool((cols <= defect + 1e-12).all())
    assert float(rows.max()) < 1e-9  # 30 steps converge


ORTHO_CASE = Case(2, 3, 4, 7, seed=0, perturb=1.0)


@pytest.mark.parametrize("pid", (*MHC_LITE, "constraints.extreme_logits"))
def test_mhc_ortho_passes_within_its_newton_schulz_defect(pid: str) -> None:
    run(pid, "reference:mhc-ortho", ORTHO_CASE)


@pytest.mark.parametrize("mutant", ("ortho_one_step_dropped", "ortho_abs_not_squared"))
def test_an_orthostochastic_h_res_off_its_declared_defect_fails(mutant: str) -> None:
    with pytest.raises(PropertyFailure, match="orthostochastic"):
        run("constraints.h_res_exact_axis", f"mutant:{mutant}", ORTHO_CASE)


def test_the_newton_schulz_defect_bounds_the_sums_and_is_attained() -> None:
    from hcspec.conformance.metrics import newton_schulz_defect
    from hcspec.formulas.mhc import orthostochastic
    gen = torch.Generator().manual_seed(0)
    L = torch.eye(4, dtype=torch.float64) + torch.randn(500, 4, 4, generator=gen,
                                                        dtype=torch.float64)
    H = orthostochastic(L, 5)
    err = torch.maximum((H.sum(-1) - 1).abs().amax(-1), (H.sum(-2) - 1).abs().amax(-1))
    defect, amplification = newton_schulz_defect(L, 5)
    assert bool((err <= defect + 1e-13).all())
    assert float((err / defect).max()) > 0.9  # the bound is tight, not a loose envelope
    assert float(defect.median()) > 0.1  # 5 steps from random logits: far from converged
    assert bool((amplification >= 2.0 - 1e-12).all())
    q = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=gen)).Q
    assert float(newton_schulz_defect(q, 10)[0]) < 1e-14  # an orthogonal start stays one


def test_the_sinkhorn_vertices_are_all_permutations_up_to_n5_then_a_sample() -> None:
    import math

    from hcspec.conformance.machinery.steering import VERTEX_SAMPLE, vertex_sample
    assert len(vertex_sample(5, 0)) == math.factorial(5)
    big = vertex_sample(8, 3)
    assert len(big) == len(set(big)) == VERTEX_SAMPLE
    assert (0, 1, 2, 3, 4, 5, 6, 7) in big and (7, 6, 5, 4, 3, 2, 1, 0) in big
    assert all(sorted(p) == list(range(8)) for p in big)
