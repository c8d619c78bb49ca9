"""Every distributed mutant (tests/mutants/_parallel) is killed on 2 gloo ranks by the
property that names its bug, and that property passes for the reference."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from hcspec.conformance import report as rp
from hcspec.conformance.parallel import check_parallel
from hcspec.conformance.parallel.properties import BY_ID
from tests.mutants import _parallel

NAMES = sorted(m.name for m in pkgutil.iter_modules(_parallel.__path__)
               if not m.name.startswith("_"))


def test_one_mutant_per_distributed_bug_class() -> None:
    assert NAMES == ["missing_rms_all_reduce", "partial_projection_not_summed",
                     "rank_seeded_init", "unreduced_replicated_gradients",
                     "wrong_gather_order"]


@pytest.mark.parametrize("name", NAMES)
def test_mutant_is_killed_by_the_property_naming_its_bug(name: str) -> None:
    module = importlib.import_module(f"tests.mutants._parallel.{name}")
    assert module.CAUGHT_BY and all(pid in BY_ID for pid in module.CAUGHT_BY)
    assert all(pid in module.__doc__ for pid in module.CAUGHT_BY)
    report = check_parallel(module.make, world_size=2, device="cpu")
    statuses = {r.id: r.status for r in report.results}
    for pid in module.CAUGHT_BY:
        assert statuses[pid] == rp.FAILED, (pid, statuses)
        message = next(r.message for r in report.results if r.id == pid)
        assert "rank " in message and "case " in message


def test_unreduced_gradients_fail_only_the_gradient_property() -> None:
    from tests.mutants._parallel import unreduced_replicated_gradients as mutant

    report = check_parallel(mutant.make, world_size=2, device="cpu")
    failed = {r.id for r in report.results if r.status == rp.FAILED}
    assert failed == {"parallel.parameter_gradients"}
    message = next(r.message for r in report.results if r.status == rp.FAILED)
    assert "declared gradient='target'" in message


def test_wrong_gather_order_is_diagnosed() -> None:
    from tests.mutants._parallel import wrong_gather_order as mutant

    report = check_parallel(mutant.make, world_size=2, device="cpu",
                            only=["parallel.branch_gathered"])
    assert "its chunks are the expected chunks [1, 0]" in report.results[0].message
