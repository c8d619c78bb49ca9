"""Every distributed mutant (tests/mutants/_parallel) is killed on 2 gloo ranks by the
property that names its bug; the reference passes the same properties
(test_parallel_harness.py)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from hcspec.conformance import check_parallel
from hcspec.conformance import families as catalogue
from hcspec.conformance.outputs import report as rp
from tests.mutants import _parallel

NAMES = sorted(m.name for m in pkgutil.iter_modules(_parallel.__path__)
               if not m.name.startswith("_"))

ONLY_FAILURES = {  # mutants whose bug leaves every other property passing
    "unreduced_replicated_gradients": {"parallel.parameter_gradients"},
    "chunk_by_global_rank": {"parallel.subgroups"},
}
IN_MESSAGE = {  # what the failure of the naming property must say
    "chunk_by_global_rank": "on the group of ranks [1] the sharded impl raised",
    "missing_rms_all_reduce": "split=hidden",
    "partial_projection_not_summed": "split=hidden",
    "rank_seeded_init": "parameters at init, rank 1: error",
    "wrong_gather_order": "its chunks are the expected chunks [1, 0]",
    "unreduced_replicated_gradients": "declared gradient='target'",
}

BY_ID = {p.id: p for p in catalogue.CATALOGUE if p.family == "parallel"}
PROPERTIES = tuple(BY_ID.values())


def test_one_mutant_per_distributed_bug_class() -> None:
    assert sorted(IN_MESSAGE) == NAMES


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
        assert IN_MESSAGE[name] in message, message
    if name in ONLY_FAILURES:
        assert {pid for pid, s in statuses.items() if s != rp.PASSED} == ONLY_FAILURES[name]


@pytest.mark.slow
def test_a_chunk_by_global_rank_fails_on_ranks_two_and_three_of_four() -> None:
    from tests.mutants._parallel import chunk_by_global_rank

    report = check_parallel(chunk_by_global_rank.make, world_size=4, device="cpu",
                            only=["parallel.forward", "parallel.subgroups"])
    statuses = {r.id: r.status for r in report.results}
    assert statuses == {"parallel.forward": rp.PASSED, "parallel.subgroups": rp.FAILED}
    message = next(r.message for r in report.results if r.id == "parallel.subgroups")
    assert "on the group of ranks [2, 3]" in message
