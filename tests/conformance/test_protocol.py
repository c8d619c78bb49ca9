"""The adapter protocol: conventions validation and capability detection."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hcspec.conformance.protocol import (
    Conventions,
    HyperConnectionImpl,
    capabilities,
    check_required,
    conventions_of,
)
from hcspec.reference import ManifoldHyperConnection, StaticHyperConnection
from hcspec.spec.record import Formula, Gate, SinkhornSpec
from tests.conformance.helpers import make_linear


def test_conventions_validate_their_values() -> None:
    with pytest.raises(ValueError, match="branch_input"):
        Conventions(branch_input="norm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sinkhorn_iterations"):
        Conventions(sinkhorn_iterations=0)
    with pytest.raises(ValueError, match="compute_dtype"):
        Conventions(compute_dtype=torch.int8)
    assert Conventions().formula.sinkhorn.effective_iterations == 20
    assert "not declared" in Conventions().describe()["sinkhorn_iterations"]
    assert Conventions(sinkhorn_iterations=10).formula.sinkhorn.effective_iterations == 10


def test_capabilities_are_detected_by_presence() -> None:
    module = ManifoldHyperConnection(2, 3)
    assert capabilities(module) == {"weights", "expand", "reduce", "parameters", "train_eval",
                                    "logits", "stack", "published_parameters",
                                    "load_published"}
    assert "logits" not in capabilities(StaticHyperConnection(2, 3, 0))
    assert isinstance(module, HyperConnectionImpl)
    assert capabilities(make_linear(2, 3)) == {"weights"}


def test_required_part_and_declaration_errors() -> None:
    with pytest.raises(TypeError, match=r"without the required n, d, kind, forward"):
        check_required(object())
    impl = make_linear(2, 3)
    impl.kind = "hc-magic"
    with pytest.raises(ValueError, match=r"impl\.kind"):
        check_required(impl)
    impl.conventions = "reduce=sum"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="Conventions or a mapping"):
        conventions_of(impl)
    impl.conventions = {"reduce": "sum", "colour": "blue"}  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"unknown field\(s\) \['colour'\]"):
        conventions_of(impl)


def test_conventions_hold_one_formula_and_the_flat_keywords_set_its_fields() -> None:
    c = Conventions(sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
                    sinkhorn_exact_axis="columns", sinkhorn_additive_eps=1e-6,
                    sinkhorn_denominator_eps=2e-6, sinkhorn_iterations=7, h_pre_eps=3e-6,
                    h_post_eps=4e-6, h_post_multiplier=1.0)
    assert c.formula == Formula(
        h_pre=Gate(1.0, 3e-6), h_post=Gate(1.0, 4e-6),
        sinkhorn=SinkhornSpec("softmax", "rounds_from_softmax", "columns", 1e-6, 2e-6, 7))
    assert Conventions(formula=c.formula) == c  # one value, however it was spelled
    assert Conventions.from_mapping({"sinkhorn_variant": "softmax", "h_pre_eps": 3e-6,
                                     "sinkhorn_iterations_count": "rounds_from_softmax"}
                                    ).formula.h_pre.eps == 3e-6
    # a keyword overrides the formula's field; replace keeps the rest of the record
    over = Conventions(formula=c.formula, sinkhorn_iterations=9)
    assert over.formula == dataclasses.replace(c.formula, sinkhorn=dataclasses.replace(
        c.formula.sinkhorn, iterations=9))
    assert dataclasses.replace(c, reduce="mean").formula == c.formula
    assert dataclasses.replace(c, h_post_multiplier=2.0).formula.h_post == Gate(2.0, 4e-6)
    with pytest.raises(ValueError, match="needs sinkhorn_variant='softmax'"):
        Conventions(formula=c.formula, sinkhorn_variant="exp")


def test_the_report_shows_the_flat_declarations_and_a_departure_elsewhere() -> None:
    plain = Conventions(h_post_multiplier=1.0).describe()
    assert list(plain)[:6] == ["branch_input", "norm_eps", "reduce", "compute_dtype",
                               "sinkhorn_iterations", "sinkhorn_exact_axis"]
    assert plain["h_post_multiplier"] == "1.0" and "formula" not in plain
    oriented = Conventions(formula=Formula(transposed=True)).describe()
    assert "transposed=True" in oriented["formula"]


def test_construction_keywords_and_header() -> None:
    from hcspec.conformance.protocol import Conventions, ConventionsError
    c = Conventions.from_mapping({"h_res_construction": "birkhoff",
                                  "birkhoff_permutations": [[0, 1, 2], [2, 0, 1]],
                                  "h_post_activation": "softmax"})
    assert c.formula.construction == "birkhoff"
    assert c.formula.permutations == ((0, 1, 2), (2, 0, 1))
    assert c.formula.h_post.activation == "softmax" and c.formula.h_post.multiplier == 2.0
    assert c.declared_fields() == ["h_res_construction", "birkhoff_permutations",
                                   "h_post_activation"]
    text = c.describe()
    assert not any(k.startswith("sinkhorn_") and k != "sinkhorn_gradient" for k in text)
    assert text["birkhoff_permutations"] == "2 declared"
    assert "not declared; mHC paper default" in Conventions().describe()["sinkhorn_iterations"]
    assert "sinkhorn_iterations" not in Conventions(
        h_res_construction="orthostochastic").describe()
    with pytest.raises(ConventionsError, match="h_res_construction"):
        Conventions.from_mapping({"h_res_construction": "qr"})
    with pytest.raises(ConventionsError, match="only a 'birkhoff'"):
        Conventions.from_mapping({"birkhoff_permutations": [[0, 1]]})
    with pytest.raises(ConventionsError, match="h_pre_activation"):
        Conventions.from_mapping({"h_pre_activation": "tanh"})
