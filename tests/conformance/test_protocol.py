"""The adapter protocol: conventions validation and capability detection."""

from __future__ import annotations

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
