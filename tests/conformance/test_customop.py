"""The custom-op family: on reference:mhc with its mixing registered as a ``torch.library``
custom op it passes; a fake kernel of the wrong shape fails ``customop.opcheck``; a forward
that bypasses the op it names fails ``customop.export``; a target without custom ops is not
applicable, with the reason."""

from __future__ import annotations

import pytest

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation


def _statuses(target: str) -> dict[str, rp.PropertyResult]:
    report = check_implementation(target, profile="quick", device="cpu", only=["customop"])
    return {r.id: r for r in report.results if r.family == "customop"}


def test_a_fully_registered_custom_op_passes() -> None:
    results = _statuses("tests.conformance.custom_op_target:make")
    assert {k: r.status for k, r in results.items()} == {
        "customop.opcheck": rp.PASSED, "customop.export": rp.PASSED,
        "customop.double_backward": rp.NOT_APPLICABLE, "customop.vmap": rp.NOT_APPLICABLE}
    assert results["customop.double_backward"].message == (
        "the target does not declare double_backward=True (a backward that is itself "
        "differentiable)")
    assert results["customop.export"].achieved is not None
    assert results["customop.export"].achieved["error"] == 0.0


def test_a_fake_kernel_of_the_wrong_shape_fails_opcheck() -> None:
    results = _statuses("tests.conformance.custom_op_target:make_bad_fake")
    failed = results["customop.opcheck"]
    assert failed.status == rp.FAILED and failed.failure is not None
    assert failed.message.startswith(
        "torch.library.opcheck failed for hcspec_test::mix_bad_fake: opcheck(op, ...): "
        "test_faketensor failed")
    assert "register_fake" in (failed.failure.hint or "")


def test_a_forward_bypassing_its_op_fails_export() -> None:
    results = _statuses("tests.conformance.custom_op_target:make_bypass")
    assert results["customop.opcheck"].status == rp.PASSED  # the op itself is fine
    failed = results["customop.export"]
    assert failed.status == rp.FAILED
    assert failed.message.startswith("the exported graph does not call the custom op(s) mix")


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static"])
def test_without_custom_ops_the_family_is_not_applicable(target: str) -> None:
    results = _statuses(target)
    assert {r.status for r in results.values()} == {rp.NOT_APPLICABLE}
    assert {k: r.message for k, r in results.items()} == {
        "customop.opcheck": "needs the capability custom_ops, which the impl does not offer "
                            "(see hcspec.conformance.protocol)",
        "customop.export": "needs the capability custom_ops, which the impl does not offer "
                           "(see hcspec.conformance.protocol)",
        "customop.double_backward": "the target does not declare double_backward=True (a "
                                    "backward that is itself differentiable)",
        "customop.vmap": "the target does not declare vmap=True (forward vmapped over a batch "
                         "of parameter sets)"}


@pytest.mark.slow
def test_a_declared_double_backward_is_checked() -> None:
    good = _statuses("tests.conformance.custom_op_target:make_double_backward")
    assert good["customop.double_backward"].status == rp.PASSED
    bad = _statuses("tests.conformance.custom_op_target:make_double_backward_detached")
    failed = bad["customop.double_backward"]
    assert failed.status == rp.FAILED
    assert failed.message.startswith("torch.autograd.gradgradcheck of forward failed: "
                                     "GradcheckError: Jacobian mismatch")
    assert bad["customop.opcheck"].status == rp.PASSED  # first order is fine


def test_a_declared_vmap_is_checked() -> None:
    good = _statuses("tests.conformance.custom_op_target:make_vmap")["customop.vmap"]
    assert good.status == rp.PASSED and good.achieved is not None
    assert good.achieved["error"] <= 1e-15
    bad = _statuses("tests.conformance.custom_op_target:make_vmap_item")["customop.vmap"]
    assert bad.status == rp.FAILED and bad.failure is not None
    assert bad.message.startswith("torch.vmap over 3 parameter sets failed: RuntimeError")
    assert ".item()" in bad.message and "register_vmap" in (bad.failure.hint or "")
