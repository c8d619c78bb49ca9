"""Every registered theorem proves, and every id in REQUIRED_IDS (the theorems the spec must
provide) is registered."""

from __future__ import annotations

import pytest
import sympy

from hcspec.spec.registry import ProofResult, Theorem, all_theorems, get

REQUIRED_IDS = [
    "layout.paper_rows", "forward.shapes", "backward.closed_form",
    "reduction.prenorm_forward", "reduction.prenorm_backward",
    "reduction.postnorm_unreachable_static", "reduction.postnorm_dynamic",
    "ds.transpose_closure", "ds.product_closure", "ds.convex_closure", "ds.n1_unique",
    "ds.two_by_two_family", "ds.permutation_vertices", "ds.nonexpansive",
    "ds.stream_sum_preserved", "ds.gradient_stream_sum_preserved",
    "init.static_prenorm", "dynamic.init_equals_static",
    "duality.sequential", "duality.parallel", "unroll.connection_weights",
    "counts.params", "counts.flops", "mhc.n1_residual",
    "linear.backward", "matmul_chain.backward", "ffn.backward", "residual.direct_term",
    "prenorm.direct_term", "postnorm.no_bare_direct_term", "norm.jacobians",
    # cited by the conformance kit's range properties: these exact ids
    "mhc.h_pre_range", "mhc.h_post_range",
    "mhc.sinkhorn_variants", "mhc.sinkhorn_converges", "ds.permutation_isometry",
    "ds.birkhoff_decompositions", "dynamic.weights_bounded", "numeric.matches_formulas",
    "residual.gradient_norm_not_preserved",
    "unroll.gradient", "mhc.soft_start", "mhc.tensor_parallel_locality",
    "reduction.n1_expressiveness", "mhc.sinkhorn_seed_loop",
    # the general law and Qwen4-exp's gated read (spec/theorems/gated.py)
    "gated.general_law", "gated.stream_sum", "gated.per_stream_only", "gated.read_backward",
    "gated.constant_gate", "gated.n1_gated_prenorm", "gated.init_scale",
    "published.qwen4_exp_step",
]

ALL_IDS = [theorem.id for theorem in all_theorems()]


def test_generality_is_recorded_and_symbolic_where_promised() -> None:
    from hcspec.spec.registry import GENERALITIES

    by_id = {theorem.id: theorem.generality for theorem in all_theorems()}
    assert set(by_id.values()) <= set(GENERALITIES)
    for theorem_id in ("backward.closed_form", "ds.transpose_closure", "ds.product_closure",
                       "ds.convex_closure", "ds.stream_sum_preserved", "mhc.h_pre_range",
                       "mhc.h_post_range", "ds.nonexpansive",
                       "ds.gradient_stream_sum_preserved", "ds.permutation_isometry",
                       "linear.backward", "matmul_chain.backward", "ffn.backward",
                       "norm.jacobians", "residual.direct_term", "prenorm.direct_term",
                       "postnorm.no_bare_direct_term", "mhc.soft_start",
                       "mhc.tensor_parallel_locality", "mhc.sinkhorn_rows_exact",
                       "mhc.sinkhorn_variants", "mhc.sinkhorn_seed_loop",
                       "dynamic.init_equals_static", "dynamic.weights_bounded",
                       "reduction.postnorm_dynamic", "reduction.postnorm_unreachable_static",
                       "ds.permutation_vertices", "gated.general_law", "gated.stream_sum",
                       "gated.constant_gate", "gated.n1_gated_prenorm", "gated.init_scale"):
        assert by_id[theorem_id] == "all sizes", theorem_id
    for theorem_id in ("init.static_prenorm", "duality.sequential", "unroll.connection_weights",
                       "unroll.gradient", "duality.parallel",
                       "reduction.n1_expressiveness"):
        assert by_id[theorem_id] == "induction", theorem_id
    # its degree bound is assumed, not proven: the closed forms are checked on a grid
    assert by_id["counts.flops"] == "explicit sizes"


def test_unknown_generality_is_rejected() -> None:
    from hcspec.spec.registry import register

    with pytest.raises(ValueError, match=r"generality must be one of"):
        register(Theorem("test.vague", "s", ("a",), "c", "src", lambda: [], "mostly"))


def test_every_required_id_is_registered() -> None:
    missing = sorted(set(REQUIRED_IDS) - set(ALL_IDS))
    assert missing == []


@pytest.mark.slow
@pytest.mark.parametrize("theorem_id", ALL_IDS)
def test_theorem_proves(theorem_id: str, proof_results: dict[str, ProofResult]) -> None:
    result = proof_results[theorem_id]
    assert result.ok, result.error
    assert result.error is None
    assert len(result.steps) >= 1
    for label, expr in result.steps:
        assert isinstance(label, str) and label
        assert isinstance(expr, sympy.Basic)


@pytest.mark.parametrize("theorem_id", ALL_IDS)
def test_theorem_is_documented(theorem_id: str) -> None:
    theorem: Theorem = get(theorem_id)
    assert theorem.statement and theorem.cases
    assert "arXiv" in theorem.source or "chain rule" in theorem.source
    assert theorem.assumptions or theorem.setting, "every theorem states its setting"
