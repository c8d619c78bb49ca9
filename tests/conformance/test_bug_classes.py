"""A failure that matches a known bug class says so in one line (its hint), and a shrunk
failure also reports its severity at the unshrunk example."""

from __future__ import annotations

import pytest

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.conformance import fixed_logit_mhc, standins


def _failure(make: object, pid: str):  # type: ignore[no-untyped-def]
    report = check_implementation(make, profile="quick", device="cpu", only=[pid])  # type: ignore[arg-type]
    result = next(r for r in report.results if r.id == pid)
    assert result.status == rp.FAILED, (pid, result.status, result.message)
    assert result.failure is not None
    return result.failure


def test_a_transposed_h_res_is_named_and_shown_where_it_matters() -> None:
    """Before: shrunk towards init, where H_res is nearly symmetric, and only that small
    error shown; no class named."""
    from tests.mutants import h_res_transposed

    failure = _failure(h_res_transposed.make, "law.reported")
    assert failure.hint is not None and "H_res looks transposed" in failure.hint
    assert "perturb\":0.3" in failure.hint  # judged at the unshrunk, perturbed example
    assert failure.shrunk_from_figures.startswith("error ")
    assert float(failure.shrunk_from_figures.split()[1]) > 0.1
    assert failure.error is not None and failure.error < 0.1  # the shrunk case's own


def test_columns_normalised_last_is_named() -> None:
    from tests.mutants import sinkhorn_columns_only

    failure = _failure(sinkhorn_columns_only.make, "constraints.h_res_exact_axis")
    assert failure.hint is not None
    assert "the exact axis is columns, not rows" in failure.hint
    assert "sinkhorn_exact_axis='columns'" in failure.hint


def test_a_dropped_stream_is_named() -> None:
    from tests.mutants import sinkhorn_underflow_drops_stream

    failure = _failure(sinkhorn_underflow_drops_stream.make, "constraints.extreme_logits")
    assert failure.hint is not None and "a stream was dropped" in failure.hint


def test_an_all_ones_mixing_matrix_is_named() -> None:
    failure = _failure(standins.make_all_ones, "constraints.h_res_exact_axis")
    assert failure.hint is not None and "the mixing matrix is all ones" in failure.hint


@pytest.mark.slow
def test_sigma_for_two_sigma_is_named() -> None:
    report = check_implementation(fixed_logit_mhc.make_sigma, profile="ci", device="cpu",
                                  only=["constraints.h_post_span"])
    failure = report.results[-1].failure
    assert failure is not None and failure.hint is not None
    assert "H_post saturates at 1 (σ instead of 2σ" in failure.hint


def test_a_normed_branch_input_is_named() -> None:
    failure = _failure(standins.make_normed_branch_input, "law.reported")
    assert failure.hint is not None and "the branch sees Norm(x_in)" in failure.hint
