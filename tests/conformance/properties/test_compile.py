"""Compile family: torch.compile(fullgraph=True) traces forward and matches eager."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.machinery.requirements import compile_backend, compile_unavailable
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import run, unmet

STANDINS = "tests.conformance.properties.precision_standins"


def test_backend_follows_the_profile() -> None:
    assert compile_backend(get_profile("quick")) == "eager"
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


@pytest.mark.slow
def test_an_output_without_autograd_graph_is_a_clean_failure() -> None:
    """Before: the kit's own traceback ('element 0 of tensors does not require grad')."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation
    from tests.conformance import standins

    report = check_implementation(standins.make_no_graph, profile="quick", device="cpu",
                                  only=["compile.fullgraph"])
    result = next(r for r in report.results if r.id == "compile.fullgraph")
    assert result.status == rp.FAILED, (result.status, result.message)
    assert "not connected to autograd" in result.message
    assert result.failure is not None and result.failure.traceback is None


@pytest.mark.slow
@pytest.mark.parametrize(("construct", "reason", "source"), [
    ("range", "perf_counter", "in __enter__"),
    ("autograd_function", "python_type", "in forward: `return x * _Scale.factor`"),
    ("manual_seed", "manual_seed", "in forward: `torch.manual_seed(0)`"),
])
def test_a_graph_break_names_dynamos_reason_and_the_users_source(
        construct: str, reason: str, source: str) -> None:
    """Before: a guessed hint 'data-dependent Python control flow' for all three."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation
    from tests.conformance import standins

    report = check_implementation(standins.graph_break_factory(construct), profile="quick",
                                  device="cpu", only=["compile.fullgraph"])
    result = next(r for r in report.results if r.id == "compile.fullgraph")
    assert result.status == rp.FAILED, (result.status, result.message)
    assert reason in result.message
    assert "tests/conformance/standins.py:" in result.message and source in result.message
    assert "data-dependent" not in result.message
    assert "data-dependent" not in (result.failure.hint or "")  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "float16"])
def test_a_compiled_path_that_differs_in_low_precision_fails(precision: str) -> None:
    """Compiled vs eager is the target against itself: a few units of roundoff in
    bfloat16/float16 (self_consistency), not 256·eps (2.0 in bfloat16, more than a compiled
    path that skips the mixing differs by)."""
    ctx = run("compile.fullgraph", f"{STANDINS}:make_{precision}_output")
    eps = rules.eps(ctx.precision.output)
    assert ctx.worst.error <= ctx.worst.tolerance == 4 * eps  # float32 inside, rounded out
    with pytest.raises(PropertyFailure, match=r"compiled \((aot_)?eager\) forward vs eager"):
        run("compile.fullgraph", f"{STANDINS}:make_{precision}_compiled_unmixed")


@pytest.mark.slow
def test_compiled_vs_eager_keeps_the_law_in_float64() -> None:
    ctx = run("compile.fullgraph", "reference:hc-dynamic")
    assert ctx.worst.tolerance == rules.law(torch.float64)


def test_a_declared_untraceable_forward_is_not_applicable_with_its_reason() -> None:
    assert unmet("compile.fullgraph") is None or "torch.compile" in str(
        unmet("compile.fullgraph"))  # only the compiler's own availability, if anything
    message = unmet("compile.fullgraph",
                    conventions=Conventions(untraceable="forward calls into a C library"))
    assert message == ("the impl declares that TorchDynamo cannot trace its forward: "
                       "forward calls into a C library")


@pytest.mark.parametrize("value", ["", "  ", 3])
def test_untraceable_must_be_a_reason(value: object) -> None:
    with pytest.raises(ValueError, match=r"conventions\.untraceable"):
        Conventions(untraceable=value)  # type: ignore[arg-type]


@pytest.mark.slow  # imports torch._inductor
def test_inductor_compiles_only_the_extra_examples_with_scalar_kernels() -> None:
    from torch._inductor import config as inductor_config

    from hcspec.conformance.families import compile as family

    before = inductor_config.cpp.simdlen
    assert family.SCALAR_KERNELS == {"cpp.simdlen": 0}
    with family._compile_settings("inductor", "cpu", canonical=False):
        assert inductor_config.cpp.simdlen == 0
    assert inductor_config.cpp.simdlen == before
    for backend, device, canonical in [("inductor", "cpu", True), ("aot_eager", "cpu", False),
                                       ("inductor", "cuda", False)]:
        with family._compile_settings(backend, device, canonical=canonical):
            assert inductor_config.cpp.simdlen == before
    with pytest.raises(RuntimeError), family._compile_settings("inductor", "cpu", False):
        raise RuntimeError("a failed compile")
    assert inductor_config.cpp.simdlen == before


def test_a_graph_break_reason_holds_no_memory_address() -> None:
    """Before: Dynamo's "Skip calling function `<function f at 0x7f…>`" reached the message, so
    the same failure read differently in every run (and in the JSON reports compared)."""
    from hcspec.conformance.families.compile import graph_break

    def f() -> None: ...

    reason, _ = graph_break(RuntimeError(f"Skip calling function `{f!r}`"))
    assert reason == "Skip calling function `<function " + f.__qualname__ + ">`", reason
