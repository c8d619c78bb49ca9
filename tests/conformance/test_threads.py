"""The kit runs a target's code with one intra-op thread and gives the caller's setting back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from hcspec.conformance.adapters.reference import make_hc_static
from hcspec.conformance.run import threads
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.run.threads import KIT_THREADS

pytestmark = pytest.mark.skipif(not threads._threads_settable(),
                                reason="torch's parallel backend is not OpenMP: the kit leaves "
                                       "the thread count alone")


@pytest.fixture
def two_threads() -> Iterator[int]:
    """The caller runs with two intra-op threads (one more than the kit), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(KIT_THREADS + 1)
    yield KIT_THREADS + 1
    torch.set_num_threads(before)


def test_the_target_runs_with_the_kits_threads_and_the_caller_keeps_its_own(
        two_threads: int) -> None:
    seen: list[int] = []

    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        seen.append(torch.get_num_threads())
        return make_hc_static(n, d, **kw)

    report = check_implementation(make, profile="quick", device="cpu",
                                  only=["shape.output", "law.probed"])
    assert report.ok
    assert seen and set(seen) == {KIT_THREADS}
    assert torch.get_num_threads() == two_threads
    assert all(not r.global_state_changes for r in report.results)
    assert report.global_state_changes == []


def test_a_target_that_sets_the_thread_count_is_named_and_undone(two_threads: int) -> None:
    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        torch.set_num_threads(3)
        return make_hc_static(n, d, **kw)

    report = check_implementation(make, profile="quick", device="cpu", only=["shape.output"])
    change = f"torch.get_num_threads() (worker thread) {KIT_THREADS} -> 3"
    assert change in report.global_state_changes
    assert change in report.results[0].global_state_changes
    assert torch.get_num_threads() == two_threads


def test_the_block_restores_when_it_raises(two_threads: int) -> None:
    changed: list[str] = []
    with pytest.raises(RuntimeError), threads.intra_op_threads(1, two_threads, changed):
        assert torch.get_num_threads() == 1
        raise RuntimeError("boom")
    assert torch.get_num_threads() == two_threads
    assert changed == []
