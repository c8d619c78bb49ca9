"""False-positive check: the conformance kit passes an implementation written
independently of the reference (tests/independent), for every kind, under ``ci``.

If this fails, find out which of the two is wrong before touching a tolerance: the
independent code's own tests (test_independent.py) check it against the spec's closed forms.
"""

from __future__ import annotations

import pytest

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.protocol import Conventions, conventions_of
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.subjects.targets import TargetError
from tests.conformance.helpers import is_expected_not_applicable
from tests.independent import kit_adapter, mhc


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(kit_adapter.FACTORIES))
def test_kit_passes_the_independent_implementation_under_ci(kind: str) -> None:
    report = check_implementation(kit_adapter.FACTORIES[kind], profile="ci", device="cpu")
    bad = [(r.id, r.status, r.message) for r in report.results
           if r.status not in (rp.PASSED, rp.NOT_APPLICABLE)]
    assert bad == []
    assert report.kind == kind
    for r in report.results:
        if r.status == rp.NOT_APPLICABLE:
            assert is_expected_not_applicable(r.message), (r.id, r.message)
    assert sum(r.status == rp.PASSED for r in report.results) >= 25


def test_the_adapter_translates_the_dict_declaration() -> None:
    declared = kit_adapter.as_conventions(mhc.make(4, 8))
    assert declared == Conventions(
        branch_input="x_in", reduce="sum", sinkhorn_exact_axis="rows", sinkhorn_iterations=20,
        notes=declared.notes)


def test_raw_mhc_factory_is_refused_for_its_unknown_declaration() -> None:
    """The raw factory declares ``internal_dtype``, a field the protocol does not have: the
    kit refuses it as a usage error naming that field (and the closest known one) before any
    property runs, rather than failing ``conventions.declaration``; through
    :mod:`tests.independent.kit_adapter` the same impl passes."""
    with pytest.raises(TypeError, match="internal_dtype"):
        conventions_of(mhc.make(4, 8))
    with pytest.raises(TargetError, match="internal_dtype"):
        check_implementation("tests.independent.mhc:make", profile="quick", device="cpu")


