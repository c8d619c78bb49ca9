"""Stack family: L sublayers run by the implementation with its own carried state — the
reference passes, each planted stack bug fails the property written for it (naming the
sublayer), and a target or stack without a capability is not applicable with the reason."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from hcspec.conformance.adapters._stacking import SequentialStack, sequential_stack
from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import NotApplicable, PropertyFailure
from hcspec.conformance.machinery.stacking import LAYERS, build_stack, run_weights
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.protocol import STACK, capabilities
from hcspec.conformance.run.session import check_implementation
from hcspec.reference import ManifoldHyperConnection, targets
from hcspec.reference.stack import HyperConnectionStack
from tests.conformance.properties.support import context, run, unmet
from tests.mutants._stack import PreviousInputStack as PreviousInputStackForTest
from tests.mutants._stack import make_stacked

STACK_IDS = ("stack.unrolled_weights", "stack.stream_sum_preserved",
             "stack.carried_matches_recomputed", "stack.fd_gradients")


@pytest.mark.parametrize("prop_id", STACK_IDS)
@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_the_reference_stack_passes(prop_id: str, target: str) -> None:
    for example in range(2):  # the quick profile's examples
        ctx = run(prop_id, target, example=example)
        assert ctx.worst.label  # something was compared


@pytest.mark.parametrize("prop_id", ["stack.unrolled_weights", "stack.carried_matches_recomputed",
                                     "stack.fd_gradients"])
def test_the_reference_hc_stacks_pass(prop_id: str) -> None:
    run(prop_id, "reference:hc-dynamic", example=1)


def test_a_coefficient_from_the_wrong_sublayer_is_named_at_sublayer_1() -> None:
    with pytest.raises(PropertyFailure, match=r"sublayer 1: the stack's h_pre vs sublayer\(1\)"):
        run("stack.carried_matches_recomputed", "mutant:stack_carried_wrong_sublayer")
    run("stack.unrolled_weights", "mutant:stack_carried_wrong_sublayer")  # consistent report


def test_a_stale_pre_mix_fails_the_recomputation_and_the_unrolled_weights() -> None:
    with pytest.raises(PropertyFailure, match=r"sublayer 1: the stack's h_pre"):
        run("stack.carried_matches_recomputed", "mutant:stack_carried_stale")
    with pytest.raises(PropertyFailure, match=r"sublayer 1's branch input \(node 2\)"):
        run("stack.unrolled_weights", "mutant:stack_carried_stale")


def test_a_row_stochastic_carried_mixing_drifts_the_stream_sum_from_sublayer_1() -> None:
    with pytest.raises(PropertyFailure, match=r"after sublayers 0 … 1 \(F ≡ 0\)") as failure:
        run("stack.stream_sum_preserved", "mutant:stack_carried_rows_only")
    # the detail names the sublayer: sublayer 0's columns are Sinkhorn's, sublayer 1's are not
    errors = dict(re.findall(r"(\d): ([0-9.e+-]+)", str(failure.value).split("H_res: ")[1]))
    assert float(errors["1"]) > 1e3 * float(errors["0"])


def test_detached_carried_coefficients_fail_the_finite_differences() -> None:
    with pytest.raises(PropertyFailure, match=r"through 3 sublayers, w\.r\.t\. x"):
        run("stack.fd_gradients", "mutant:stack_carried_detached")
    run("stack.carried_matches_recomputed", "mutant:stack_carried_detached")  # forward exact


def test_without_the_capability_the_family_is_not_applicable() -> None:
    for prop_id in STACK_IDS:
        reason = unmet(prop_id, capabilities=frozenset({"weights", "parameters"}))
        assert reason is not None and "needs the capability stack" in reason
    assert "applies to mhc" in str(unmet("stack.stream_sum_preserved", kind="hc-static"))
    assert BY_ID["stack.stream_sum_preserved"].needs == {STACK}


class _Plain:
    """A minimal third-party impl: an mHC module without weights, stacking as independent
    sublayers (no weights on the stack)."""

    def __init__(self, n: int, d: int, layer_index: int, seed: int) -> None:
        self.inner = targets.mhc(n, d, layer_index=layer_index, seed=seed)
        self.n, self.d, self.kind = n, d, "mhc"
        self.layer_index, self.seed = layer_index, seed

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        return self.inner(x, branch)  # type: ignore[no-any-return]

    def parameters(self) -> Any:
        return self.inner.parameters()

    def stack(self, layers: int) -> SequentialStack:
        return sequential_stack([self] + [
            _Plain(self.n, self.d, self.layer_index + k, self.seed + k) for k in range(1, layers)])


def _make_plain(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0) -> _Plain:
    return _Plain(n, d, layer_index, seed)


def test_a_stack_without_weights_is_not_applicable_where_it_needs_them_and_checked_otherwise(
) -> None:
    impl = _make_plain(3, 5)
    assert STACK in capabilities(impl) and "weights" not in capabilities(impl)
    assert not hasattr(impl.stack(2), "weights")
    report = check_implementation(_make_plain, profile="quick", device="cpu", only=["stack"])
    status = {r.id: r for r in report.results}
    for prop_id in ("stack.unrolled_weights", "stack.stream_sum_preserved"):
        assert status[prop_id].status == rp.NOT_APPLICABLE, status[prop_id]
        assert "offers no weights(x, branches)" in (status[prop_id].message or "")
    for prop_id in ("stack.carried_matches_recomputed", "stack.fd_gradients"):
        assert status[prop_id].status == rp.PASSED, status[prop_id]
    achieved = status["stack.carried_matches_recomputed"].achieved or {}
    assert "coefficients not compared" in achieved.get("label", "")


def test_the_stack_is_perturbed_through_its_parameters() -> None:
    ctx = context("reference:mhc")
    case = BY_ID["stack.carried_matches_recomputed"].examples(ctx)[0]
    stack: Any = build_stack(ctx, case)
    fresh = targets.mhc(case.n, case.d, layer_index=case.layer_index + 2, seed=case.seed + 2)
    moved = [float((p - q).detach().abs().max()) for p, q in
             zip(stack.sublayer(2).parameters(), fresh.parameters(), strict=True)]
    assert stack.layers == LAYERS and max(moved) > 0.1  # the last sublayer was perturbed too


class _Short(ManifoldHyperConnection):
    def stack(self, layers: int, *, carry: bool | None = None) -> HyperConnectionStack:
        return super().stack(max(1, layers - 1), carry=carry)


def test_a_stack_of_the_wrong_depth_is_a_failure() -> None:
    ctx = context("reference:mhc")
    ctx.build.factory = lambda n, d, **kw: _Short(n, d, kw.get("layer_index", 0),
                                                  dtype=torch.float64)
    with pytest.raises(PropertyFailure, match=r"impl\.stack\(3\) returned .*'layers': 2"):
        build_stack(ctx, BY_ID["stack.unrolled_weights"].examples(ctx)[0])


def test_not_applicable_raised_by_a_check_names_the_missing_part() -> None:
    ctx = context("reference:mhc")
    with pytest.raises(NotApplicable, match=r"offers no weights"):
        run_weights(ctx, _make_plain(2, 3).stack(2), torch.zeros(1, 1, 2, 3,
                                                                  dtype=torch.float64), [])


class _SwappedOutputStack(HyperConnectionStack):
    """Returns X_L with its first two streams exchanged: every branch input and the stream sum
    stay right, so only the per-stream comparison of X_L can see it."""

    def _run(self, x: torch.Tensor, branches: Any) -> tuple[torch.Tensor, Any]:
        out, used = super()._run(x, branches)
        return out[..., [1, 0, *range(2, self.n)], :], used


class _SwappedOutput(ManifoldHyperConnection):
    def stack(self, layers: int, *, carry: bool | None = None) -> HyperConnectionStack:
        return _SwappedOutputStack(list(super().stack(layers).sublayers))  # type: ignore[arg-type]


def test_a_wrong_final_state_with_right_reads_and_sum_fails_stream_by_stream() -> None:
    ctx = context("reference:mhc")
    ctx.build.factory = lambda n, d, **kw: _SwappedOutput(n, d, kw.get("layer_index", 0),
                                                          dtype=torch.float64)
    prop = BY_ID["stack.unrolled_weights"]
    with pytest.raises(PropertyFailure, match=r"stream 0 of X_L after 3 sublayers"):
        prop.run(ctx, prop.examples(ctx)[0])


PREVIOUS_INPUT = "tests.mutants._stack:make_previous_input"


@pytest.mark.parametrize("prop_id", STACK_IDS)
def test_a_declared_previous_input_stack_passes_with_sublayers_beyond_the_first(
        prop_id: str) -> None:
    for example in range(2):  # the quick profile's examples
        ctx = run(prop_id, PREVIOUS_INPUT, example=example)
        assert ctx.worst.label  # something was compared


def test_the_declaration_decides_the_recomputation() -> None:
    """The same V4.1-style stack without its declaration fails the default (own-input) rule at
    sublayer 0 (it reads with e_0, not its own h_pre), and the declared one compares sublayer
    k's h_pre with sublayer k − 1's."""

    class Undeclared(PreviousInputStackForTest):
        pre_mix_from = "own_input"

    with pytest.raises(PropertyFailure, match=r"sublayer 0: the stack's h_pre vs sublayer\(0\)"):
        run("stack.carried_matches_recomputed", _target(Undeclared))


def test_a_pre_mix_from_the_new_state_fails_under_the_previous_input_design() -> None:
    with pytest.raises(PropertyFailure, match=r"sublayer 1: the stack's h_pre vs sublayer\(0\)"
                       r"\.weights\(…\)\.h_pre on the state entering sublayer 0"):
        run("stack.carried_matches_recomputed", "mutant:stack_previous_pre_from_new_state")


@pytest.mark.parametrize(("attrs", "message"), [
    ({"pre_mix_from": "next_input"}, "stack.pre_mix_from: expected one of"),
    ({"initial_pre_mix": None}, "needs initial_pre_mix"),
    ({"initial_pre_mix": torch.ones(2)}, r"needs initial_pre_mix.*got \[2\]"),
])
def test_an_invalid_carry_declaration_is_a_failure(attrs: dict[str, Any], message: str) -> None:
    cls = type("BadDeclaration", (PreviousInputStackForTest,), {})

    def init(self: Any, sublayers: Any, *, carry: bool = True) -> None:
        PreviousInputStackForTest.__init__(self, sublayers, carry=carry)
        for name, value in attrs.items():
            setattr(self, name, value)

    cls.__init__ = init  # type: ignore[misc]
    with pytest.raises(PropertyFailure, match=message):
        run("stack.carried_matches_recomputed", _target(cls))


def _target(stack_class: type[HyperConnectionStack]) -> str:
    """A ``module:factory`` target string for the reference mHC stacked as ``stack_class``."""
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> Any:
        return make_stacked(stack_class, n, d, layer_index, dtype, device, seed)

    name = f"_made_{stack_class.__name__}_{id(stack_class)}"
    globals()[name] = make
    return f"{__name__}:{name}"


class _ReportsCarryReadsOwn(PreviousInputStackForTest):
    """Reports V4.1's coefficients, but its forward reads every sublayer with its own pre-mix."""

    def forward(self, x: torch.Tensor, branches: Any) -> torch.Tensor:
        return HyperConnectionStack._run(self, x, branches)[0]


def test_under_the_previous_input_design_the_output_is_checked_against_the_composed_chain(
) -> None:
    with pytest.raises(PropertyFailure, match=r"the stack's X_L vs composing the recomputed "
                       r"coefficients \(h_pre from the previous sublayer\)"):
        run("stack.carried_matches_recomputed", _target(_ReportsCarryReadsOwn))
