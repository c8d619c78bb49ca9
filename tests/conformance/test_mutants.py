"""The kit rejects known-bad implementations: each mutant in tests/mutants is caught, and by
the property ids its docstring and ``CAUGHT_BY`` name."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tests.mutants as mutants_pkg
from conformance import report as rp
from conformance.properties import BY_ID
from conformance.runner import check_implementation

MUTANTS = sorted(m.name for m in pkgutil.iter_modules(mutants_pkg.__path__)
                 if not m.name.startswith("_"))


def test_the_eight_required_mutants_exist() -> None:
    assert {"h_res_transposed", "sinkhorn_rows_only", "sinkhorn_plain_domain",
            "branch_per_stream", "h_post_sigma", "folded_wrong_order", "input_in_place",
            "residual_detached"} <= set(MUTANTS)


@pytest.mark.parametrize("name", MUTANTS)
def test_mutant_is_caught_by_its_property(name: str) -> None:
    module = importlib.import_module(f"tests.mutants.{name}")
    caught_by = module.CAUGHT_BY
    assert caught_by and all(pid in BY_ID for pid in caught_by)
    for pid in caught_by:
        assert pid in (module.__doc__ or ""), f"{name}'s docstring must name {pid}"
    report = check_implementation(module.make, profile="ci", device="cpu", only=caught_by)
    status = {r.id: r for r in report.results}
    for pid in caught_by:
        result = status[pid]
        assert result.status == rp.FAILED, (pid, result.status, result.message)
        assert result.counterexample and result.reproduce and pid in result.reproduce
    assert not report.ok
