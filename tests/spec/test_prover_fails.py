"""The prover can fail: deliberately wrong statements are reported as not proven.

The wrong statements are throwaway Theorem objects built here, never registered.
"""

from __future__ import annotations

import sympy

from hcspec.spec import checks
from hcspec.spec import doubly_stochastic as ds
from hcspec.spec.registry import ProofFailure, Theorem
from hcspec.spec.theorems.connection import BackwardClaim, backward_proof
from hcspec.spec.theorems.doubly_stochastic import closure_proof


def throwaway(theorem_id: str, proof: object) -> Theorem:
    return Theorem(theorem_id, "deliberately wrong", (), "test", "test", proof)  # type: ignore[arg-type]


def test_backward_with_H_res_in_place_of_its_transpose_is_not_proven() -> None:
    wrong = BackwardClaim(grad_X=lambda s: s.H_res * s.G + s.h_pre * s.g_in.T)
    result = throwaway("test.wrong_backward", backward_proof(wrong, ())).prove()
    assert not result.ok
    assert result.error is not None and "∂L/∂X, symbolic n, d" in result.error
    assert "numeric gate" in result.error
    assert result.steps == ()
    explicit = backward_proof(wrong, ((2, 1),), symbolic=False)
    result = throwaway("test.wrong_backward", explicit).prove()
    assert not result.ok and "∂L/∂X at n=2, d=1: numeric gate" in (result.error or "")


def test_the_same_wrong_backward_passes_at_n1_where_transposes_coincide() -> None:
    # Shows the failure above comes from the wrong form, not from a prover that always fails.
    wrong = BackwardClaim(grad_X=lambda s: s.H_res * s.G + s.h_pre * s.g_in.T)
    proof = backward_proof(wrong, ((1, 1), (1, 2)), symbolic=False)
    assert throwaway("test.n1_backward", proof).prove().ok


def test_backward_with_a_wrong_h_post_gradient_is_not_proven() -> None:
    wrong = BackwardClaim(grad_h_post=lambda s: s.X * s.z)
    result = throwaway("test.wrong_h_post", backward_proof(wrong, ())).prove()
    assert not result.ok and "∂L/∂h_post" in (result.error or "")


def test_backward_with_a_wrong_branch_cotangent_is_not_proven() -> None:
    wrong = BackwardClaim(branch_cotangent=lambda s: s.G.T * s.h_pre)
    result = throwaway("test.wrong_g_z", backward_proof(wrong, ())).prove()
    assert not result.ok and "g_z = ∂L/∂z, symbolic n, d" in (result.error or "")
    result = throwaway("test.wrong_g_z", backward_proof(wrong, ((2, 2),), symbolic=False)).prove()
    assert not result.ok and "g_z at n=2, d=2" in (result.error or "")


def test_ill_shaped_backward_claim_is_not_proven() -> None:
    wrong = BackwardClaim(grad_H_res=lambda s: s.X.T * s.G)  # d×d, not n×n
    result = throwaway("test.ill_shaped", backward_proof(wrong, ())).prove()
    assert not result.ok and "H_res" in (result.error or "")


NEGATIVE = sympy.Matrix([[2, -1], [-1, 2]])  # unit row and column sums, negative entries


def test_ds_closure_claimed_for_a_matrix_with_a_negative_entry_is_not_proven() -> None:
    result = throwaway("test.negative_closure",
                       closure_proof("H M", lambda H, K: H * NEGATIVE, sizes=(2,))).prove()
    assert not result.ok
    assert "H M, n=2" in (result.error or "")


def test_ds_closure_of_a_sum_is_not_proven() -> None:
    result = throwaway("test.sum_closure", closure_proof("H + K", lambda H, K: H + K)).prove()
    assert not result.ok
    assert "H + K, n=1: numeric gate failed" in (result.error or "")


def test_require_doubly_stochastic_rejects_a_negative_entry_exactly() -> None:
    try:
        ds.require_doubly_stochastic("M", NEGATIVE)
    except ProofFailure as failure:
        assert "M" in str(failure)
    else:
        raise AssertionError("a matrix with a negative entry was accepted as doubly stochastic")


def test_numeric_gate_catches_a_wrong_tanh_identity_quickly() -> None:
    x = sympy.Symbol("x", real=True)
    wrong = (sympy.exp(2 * x) - 1) / (sympy.exp(2 * x) + 2)
    try:
        checks.require_equal("tanh", sympy.tanh(x), wrong)
    except ProofFailure as failure:
        assert "numeric gate" in str(failure)
    else:
        raise AssertionError("a wrong tanh identity was accepted")


def test_true_tanh_and_sech_identities_are_proven_exactly() -> None:
    x = sympy.Symbol("x", real=True)
    checks.require_equal("tanh as exp", sympy.tanh(x),
                         (sympy.exp(2 * x) - 1) / (sympy.exp(2 * x) + 1))
    checks.require_equal("d tanh = sech²", sympy.diff(sympy.tanh(x), x), sympy.sech(x) ** 2)


def test_an_unexpected_exception_in_a_proof_is_a_failed_proof() -> None:
    def broken() -> list[checks.Step]:
        raise RuntimeError("boom")

    result = throwaway("test.broken", broken).prove()
    assert not result.ok and "RuntimeError: boom" in (result.error or "")
