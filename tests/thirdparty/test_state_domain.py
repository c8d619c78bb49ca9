"""The declared state domain 'replicated' (an impl that, like mhc-pytorch, only accepts
X = 1_n hᵀ): the kit draws replicated states, reports the probing properties not applicable
with the reason, checks the rest on the domain, and still catches a bug there."""

from __future__ import annotations

import functools

import torch

from hcspec.conformance.machinery.base import Context
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.inspection import inspect_target
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tests.thirdparty.standins import make_replicated

ONLY = ["shape", "law", "independence", "conventions.branch_input", "constraints.h_res_exact_axis",
        "constraints.stream_sum_preserved", "gradients.fd_input", "gradients.fd_parameters",
        "gradients.closed_form", "state.input_unchanged"]
PROBING = {"law.probed", "law.reported_matches_probed", "law.token_mixing_branch"}


def test_declared_domain_draws_replicated_states() -> None:
    info = inspect_target(make_replicated, "cpu", 0)
    assert info.conventions.state_domain == "replicated"
    assert info.conventions.formula.sinkhorn.iterations == 20  # from the attribute, not declared
    from hcspec.conformance.profiles import get_profile
    ctx = Context(factory=make_replicated, target_name="t", kind="mhc",
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=torch.float64, device="cpu", profile=get_profile("quick"))
    x = ctx.inputs.state(Case(2, 3, 4, 8, seed=5))
    assert torch.equal(x, x[..., :1, :].expand_as(x))
    assert x[..., 0, :].std() > 0.5  # the stream itself is a N(0, 1) draw, not a mean
    v = ctx.inputs.tangent(torch.randn(2, 3, 4, 8, dtype=torch.float64))
    assert torch.equal(v, v[..., :1, :].expand_as(v))


def test_replicated_impl_passes_on_its_domain_and_probing_is_not_applicable() -> None:
    report = check_implementation(make_replicated, profile="quick", device="cpu", only=ONLY)
    by_id = {r.id: r for r in report.results}
    assert not [r.id for r in report.results if r.status in rp.UNEXPECTED], report.summary
    for pid in PROBING:
        assert by_id[pid].status == rp.NOT_APPLICABLE
        assert "state_domain='replicated'" in by_id[pid].message
    for pid in ("law.reported", "gradients.fd_input", "gradients.closed_form"):
        assert by_id[pid].status == rp.PASSED and by_id[pid].examples > 0


def test_without_the_declaration_the_impl_is_given_general_states_and_fails() -> None:
    factory = functools.partial(make_replicated, declare=False)
    report = check_implementation(factory, profile="quick", device="cpu", only=["shape.output"])
    result = report.results[0]
    # forward raising on a case the factory accepted fails shape.output, naming the exception
    assert result.status == rp.FAILED and "stream-replicated" in result.message


def test_a_bug_on_the_replicated_domain_is_still_caught() -> None:
    factory = functools.partial(make_replicated, skip_h_pre=True)
    report = check_implementation(factory, profile="quick", device="cpu", only=["law.reported"])
    result = {r.id: r for r in report.results}["law.reported"]
    assert result.status == rp.FAILED and "branch input" in result.message
