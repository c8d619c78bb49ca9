"""The custom-op family on Liger-Kernel's mHC (``liger_kernel:mhc-customop``): LigerMHC's
three autograd Functions registered by the adapter as ``torch.library`` custom ops
(:mod:`hcspec.conformance.adapters._liger_ops`), under Triton's CPU interpreter where
there is no CUDA device (as tests/thirdparty/test_liger_kernel.py sets it up).

Skipped where liger-kernel or Triton is not installed."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("liger_kernel", reason="liger-kernel is not installed")

from hcspec.conformance.adapters import liger_kernel
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation

MODE = liger_kernel.triton_mode()
if MODE.name == "unavailable":
    pytest.skip(f"LigerMHC's kernels cannot run here: {MODE.reason}", allow_module_level=True)
DEVICE = "cuda" if MODE.name == "cuda" else "cpu"


def test_the_custom_op_form_matches_the_module_and_its_gradients() -> None:
    plain = liger_kernel.make(4, 8, device=DEVICE, seed=3)
    ops = liger_kernel.make_customop(4, 8, device=DEVICE, seed=3)
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64, device=DEVICE, requires_grad=True)
    want = plain.forward(x, torch.tanh)
    (grad_want,) = torch.autograd.grad(want.square().sum(), x)
    got = ops.forward(x, torch.tanh)
    (grad_got,) = torch.autograd.grad(got.square().sum(), x)
    assert torch.equal(got, want)  # the same kernels, composed the same way
    assert torch.equal(grad_got, grad_want)  # the gradients are Liger's backward kernels'
    assert {name for name, _ in ops.named_parameters()} == {
        "module.phi", "module.b", "module.alpha_pre", "module.alpha_post", "module.alpha_res"}


def test_the_custom_op_family_on_liger() -> None:
    report = check_implementation("liger_kernel:mhc-customop", profile="quick",
                                  device=DEVICE, only=["customop"])
    results = {r.id: r for r in report.results if r.family == "customop"}
    assert {k: r.status for k, r in results.items()} == {
        "customop.opcheck": rp.PASSED, "customop.export": rp.PASSED,
        "customop.vmap": rp.PASSED, "customop.double_backward": rp.NOT_APPLICABLE}
    assert results["customop.double_backward"].message == (
        "the target does not declare double_backward=True (a backward that is itself "
        "differentiable)")
    for key in ("customop.export", "customop.vmap"):
        achieved = results[key].achieved
        assert achieved is not None and achieved["error"] == 0.0, (key, achieved)
