"""State family: the input and the parameters are left unchanged; eval is deterministic."""

from __future__ import annotations

import pytest

from hcspec.conformance.machinery.base import PropertyFailure
from tests.conformance.properties.support import run


def test_reference_passes() -> None:
    for pid in ("state.input_unchanged", "state.parameters_unchanged",
                "state.deterministic_eval"):
        run(pid, "reference:hc-dynamic")


def test_an_in_place_forward_fails() -> None:
    with pytest.raises(PropertyFailure, match="modified its input in place"):
        run("state.input_unchanged", "mutant:input_in_place")


def test_a_running_statistic_updated_in_eval_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"forward \(eval mode\) changed buffer"):
        run("state.parameters_unchanged", "mutant:running_stat_in_eval")
