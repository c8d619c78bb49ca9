"""Public strategies generate what they promise."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from hcspec.conformance import strategies as hst
from hcspec.conformance.strategies import Case


@settings(max_examples=30, deadline=None, database=None)
@given(hst.doubly_stochastic_matrices(4))
def test_doubly_stochastic_matrices_are_doubly_stochastic(H: torch.Tensor) -> None:
    assert bool((H >= 0).all())
    ones = torch.ones(4, dtype=H.dtype)
    torch.testing.assert_close(H.sum(-1), ones)
    torch.testing.assert_close(H.sum(-2), ones)


@settings(max_examples=30, deadline=None, database=None)
@given(hst.cases(max_n=3, max_d=6, d_more_than_n=True, min_batch=2))
def test_cases_respect_their_bounds(case: Case) -> None:
    assert 1 <= case.n <= 3 and case.d > case.n and case.batch >= 2
    assert Case.from_json(case.to_json()) == case
    assert hst.stream_state(case, torch.float32).shape == case.shape


def test_branches_shapes_and_token_mixing() -> None:
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    for name in hst.BRANCHES:
        assert hst.make_branch(name, 6, torch.float64)(x).shape == x.shape
    mix = hst.make_branch("token_mixing", 6, torch.float64)
    changed = x.clone()
    changed[:, 3] += 1.0
    diff = (mix(changed) - mix(x)).abs().amax(dim=(0, 2))
    assert float(diff[:3].max()) == 0.0 and float(diff[3:].min()) > 0  # causal, not token-wise
    with pytest.raises(ValueError, match="unknown branch"):
        hst.make_branch("cubic", 6, torch.float64)


def test_generation_is_reproducible_and_dtype_independent() -> None:
    case = Case(2, 3, 4, 8, seed=7)
    a = hst.stream_state(case, torch.float64)
    b = hst.stream_state(case, torch.float32)
    assert torch.equal(a, hst.stream_state(case, torch.float64))
    torch.testing.assert_close(b.double(), a, rtol=1e-6, atol=1e-6)


def test_case_validation_and_json_errors() -> None:
    with pytest.raises(ValueError, match=r"Case\.n"):
        Case(n=0)
    with pytest.raises(ValueError, match="unknown fields"):
        Case.from_json('{"n": 2, "colour": 1}')
    with pytest.raises(ValueError, match="JSON object"):
        Case.from_json("[1, 2]")
