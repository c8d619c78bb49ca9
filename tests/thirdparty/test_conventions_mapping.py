"""Conventions declared as a plain mapping (no kit import needed) and the
``sinkhorn_iterations`` attribute fallback."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.protocol import Conventions, ConventionsError, conventions_of
from hcspec.conformance.run.session import check_implementation
from hcspec.reference import targets


def test_mapping_is_read_as_conventions() -> None:
    impl = SimpleNamespace(conventions={"sinkhorn_exact_axis": "columns", "reduce": "mean",
                                        "compute_dtype": "float32", "sinkhorn_iterations": 7})
    got = conventions_of(impl)
    assert got == Conventions(sinkhorn_exact_axis="columns", reduce="mean",
                              compute_dtype=torch.float32, sinkhorn_iterations=7)


@pytest.mark.parametrize(("declared", "words"), [
    ({"sinkhorn_iters": 10}, ["unknown field", "sinkhorn_iters", "sinkhorn_iterations"]),
    ({"reduce": "max"}, ["conventions.reduce", "'max'"]),
    ({"compute_dtype": "float33"}, ["compute_dtype", "float33"]),
    ({"sinkhorn_iterations": 0}, ["sinkhorn_iterations", ">= 1"]),
    ({"sinkhorn_variant": "log"}, ["sinkhorn_variant", "'log'"]),
    ({"sinkhorn_iterations_count": "pairs"}, ["sinkhorn_iterations_count", "'pairs'"]),
    ({"sinkhorn_iterations_count": "rounds_from_softmax"}, ["needs", "'softmax'"]),
    ({"sinkhorn_denominator_eps": -1e-6}, ["sinkhorn_denominator_eps", "0 <= eps < 1"]),
    ({"h_pre_eps": 2.0}, ["h_pre_eps", "0 <= eps < 1"]),
    ({"h_post_multiplier": 0.0}, ["h_post_multiplier", "> 0"]),
    ({"h_post_multiplier": float("inf")}, ["h_post_multiplier", "finite"]),
    ({"output_dtype": "float33"}, ["output_dtype", "float33"]),
    ({"residual_mixing": "none"}, ["residual_mixing", "'none'"]),
    ({"reduce": "head"}, ["conventions.reduce", "'learned'"]),
])
def test_bad_mapping_is_a_clear_error(declared: dict[str, object], words: list[str]) -> None:
    with pytest.raises(ConventionsError) as info:
        conventions_of(SimpleNamespace(conventions=declared))
    assert all(w in str(info.value) for w in words), str(info.value)


def test_the_deepseek_v4_conventions_are_declarable_as_a_mapping() -> None:
    impl = SimpleNamespace(conventions={
        "sinkhorn_variant": "softmax", "sinkhorn_iterations_count": "rounds_from_softmax",
        "sinkhorn_additive_eps": 1e-6, "sinkhorn_denominator_eps": 1e-6, "h_pre_eps": 1e-6,
        "h_post_multiplier": 2.0, "reduce": "learned", "compute_dtype": "float32",
        "output_dtype": "float32", "residual_mixing": "identity"})
    got = conventions_of(impl)
    assert (got.formula.sinkhorn.start, got.formula.sinkhorn.count) == (
        "softmax", "rounds_from_softmax")
    sk = got.formula.sinkhorn
    assert (sk.additive_eps, sk.denominator_eps, got.formula.h_pre.eps) == (1e-6, 1e-6, 1e-6)
    assert (got.output_dtype, got.reduce, got.residual_mixing) == (
        torch.float32, "learned", "identity")
    described = got.describe()
    assert described["output_dtype"] == "torch.float32"
    assert described["sinkhorn_variant"] == "softmax"
    assert Conventions().describe()["output_dtype"] == "input dtype"
    assert Conventions().formula.h_post.multiplier == 2.0  # the mHC paper's 2σ(·) is the default


def test_not_a_mapping_is_rejected() -> None:
    with pytest.raises(TypeError, match="mapping of its fields, got list"):
        conventions_of(SimpleNamespace(conventions=["rows"]))


def test_sinkhorn_iterations_attribute_is_the_fallback() -> None:
    assert conventions_of(SimpleNamespace(sinkhorn_iterations=10)).formula.sinkhorn.iterations == 10
    declared = SimpleNamespace(sinkhorn_iterations=10, conventions={"sinkhorn_iterations": 5})
    assert conventions_of(declared).formula.sinkhorn.iterations == 5  # the declaration wins
    assert conventions_of(SimpleNamespace()).formula.sinkhorn.iterations is None
    with pytest.raises(ConventionsError, match="sinkhorn_iterations"):
        conventions_of(SimpleNamespace(sinkhorn_iterations="20"))


def _reference_with_mapping(n: int, d: int, **kwargs: object) -> object:
    module = targets.mhc(n, d, **kwargs)  # type: ignore[arg-type]
    module.conventions = {"notes": "declared as a dict"}
    return module


def test_a_run_uses_the_mapping_and_the_attribute() -> None:
    report = check_implementation(_reference_with_mapping, profile="quick", device="cpu",
                                  only=["constraints.h_res_other_axis", "conventions.declaration"])
    assert report.conventions["notes"] == "declared as a dict"
    assert report.conventions["sinkhorn_iterations"] == "20"  # the reference's attribute
    assert all(r.status == rp.PASSED for r in report.results), report.summary
