"""The kit's runs are reproducible: each property's exploration is seeded from its id and
``--seed``, and each case seeds torch's global RNG from its own seed."""

from __future__ import annotations

import json

import torch

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tests.conformance.helpers import LinearHC, make_dropout_on_output, make_linear

LAWS = ["law.reported", "law.probed", "independence.batch"]


def _failures(report: rp.Report) -> list[tuple[str, str, str, str | None]]:
    return [(r.id, r.status, r.message, r.counterexample) for r in report.results]


def test_a_target_using_the_global_rng_gets_the_same_report_every_run() -> None:
    torch.manual_seed(123)
    first = check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                                 only=LAWS)
    torch.manual_seed(456)  # a caller's RNG state must not leak into the report
    second = check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                                  only=LAWS)
    statuses = {r.id: r.status for r in first.results}
    assert statuses["law.reported"] == rp.FAILED  # dropout breaks the law...
    assert _failures(first) == _failures(second)  # ...the same way, with the same numbers


def test_the_reproduction_case_replays_the_same_failure() -> None:
    torch.manual_seed(1)
    report = check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                                  only=["law.probed"])
    failed = next(r for r in report.results if r.id == "law.probed")
    assert failed.status == rp.FAILED and failed.counterexample
    assert "error 0." in failed.message  # a number drawn through dropout's mask
    torch.manual_seed(2)
    replay = check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                                  only=["law.probed"],
                                  case=Case(**json.loads(failed.counterexample)))
    again = next(r for r in replay.results if r.id == "law.probed")
    assert (again.status, again.message) == (failed.status, failed.message)


def test_the_callers_global_rng_state_is_restored() -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                         only=["law.reported"])
    assert torch.equal(torch.rand(3), expected)


def _explored_shapes(seed: int) -> list[tuple[int, ...]]:
    seen: list[tuple[int, ...]] = []

    class Recording(LinearHC):
        def forward(self, x, branch):  # type: ignore[no-untyped-def]
            seen.append(tuple(x.shape))
            return super().forward(x, branch)

    def make(n: int, d: int, **kwargs: object) -> Recording:
        inner = make_linear(n, d, **kwargs)  # type: ignore[arg-type]
        return Recording(inner.h_pre, inner.h_post, inner.H_res, d)

    check_implementation(make, profile="ci", device="cpu", only=["law.probed"], seed=seed)
    return seen


def test_ci_explores_the_same_cases_for_a_seed_and_other_cases_for_another() -> None:
    assert _explored_shapes(0) == _explored_shapes(0)
    assert _explored_shapes(0) != _explored_shapes(1)


def test_the_dtype_family_compares_a_random_impl_with_itself_under_the_same_draws() -> None:
    """Dropout makes the law fail, but float32 vs float64 gradients and float16 vs float32
    forwards see the same masks: precision is judged on precision alone."""
    report = check_implementation(make_dropout_on_output, profile="quick", device="cpu",
                                  only=["dtype", "law.reported"])
    statuses = {r.id: r.status for r in report.results}
    assert statuses["law.reported"] == rp.FAILED
    assert statuses["dtype.float32_gradients"] == rp.PASSED
    assert statuses["dtype.low_precision"] == rp.PASSED
