"""Compile family: torch.compile(fullgraph=True) traces forward and matches eager."""

from __future__ import annotations

import pytest

from hcspec.conformance.profiles import get_profile
from hcspec.conformance.properties import PropertyFailure
from hcspec.conformance.properties.requirements import compile_backend, compile_unavailable
from tests.conformance.properties.support import run, unmet


def test_backend_follows_the_profile() -> None:
    assert compile_backend(get_profile("ci")) == "aot_eager"
    assert compile_backend(get_profile("thorough")) == "inductor"


@pytest.mark.slow
def test_aot_eager_is_usable_here() -> None:  # importing torch._dynamo takes seconds
    assert compile_unavailable("aot_eager", "cpu") is None
    assert unmet("compile.fullgraph") is None


@pytest.mark.slow
def test_a_graph_break_fails_fullgraph() -> None:
    with pytest.raises(PropertyFailure, match="fullgraph=True"):
        run("compile.fullgraph", "mutant:compile_graph_break")
