"""The framework bridge (:mod:`hcspec.conformance.bridge`) on a NumPy-only stand-in framework
(tests/thirdparty/numpy_framework.py: a pure NumPy mHC with hand-written vjps), so it is
checked without mlx or jax: values and gradients against an independent torch computation, the
branch called once with its gradient from torch autograd, dtypes crossing unchanged, the kit's
gradient properties passing, and failing on a planted wrong vjp."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import torch

from hcspec.conformance.bridge import Built, Sublayer, bridged_target
from hcspec.conformance.protocol import Conventions, conventions_of
from hcspec.conformance.run.session import check_implementation
from tests.thirdparty import numpy_framework as npf


def standin_factory(wrong: bool = False) -> Any:
    """The stand-in as a kit target (``wrong``: the planted vjp bug)."""
    def build(n: int, d: int, layer_index: int, seed: int) -> Built:
        del layer_index
        sublayer = Sublayer(read=npf.make_read(wrong), write=npf.WRITE, weights=npf.WEIGHTS)
        return Built(npf.init(n, d, seed), sublayer)
    return bridged_target(npf.NumpyFramework, build,
                          conventions=Conventions(sinkhorn_iterations=npf.ITERATIONS),
                          compute_dtype=None)


def torch_step(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor,
               branch: Any) -> torch.Tensor:
    """The stand-in's math written again in torch (autograd differentiates it)."""
    n = x.shape[-2]
    logits = x.reshape(*x.shape[:2], -1) @ W + b
    h_pre = torch.sigmoid(logits[..., :n])
    h_post = 2 * torch.sigmoid(logits[..., n:2 * n])
    m = torch.exp(logits[..., 2 * n:].reshape(*x.shape[:2], n, n))
    for _ in range(npf.ITERATIONS):
        m = m / m.sum(-2, keepdim=True)
        m = m / m.sum(-1, keepdim=True)
    z = branch((h_pre.unsqueeze(-1) * x).sum(-2))
    return m @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def test_forward_and_gradients_equal_the_same_math_in_torch() -> None:
    n, d = 3, 4
    impl = standin_factory()(n, d, seed=3)
    x = torch.randn(2, 5, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    G = torch.randn_like(x)
    lin = torch.nn.Linear(d, d).double()
    calls: list[torch.Tensor] = []

    def branch(v: torch.Tensor) -> torch.Tensor:
        calls.append(v)
        return torch.tanh(lin(v))

    xb = x.clone().requires_grad_(True)
    out = impl.forward(xb, branch)
    assert len(calls) == 1 and isinstance(calls[0], torch.Tensor)
    assert out.dtype == torch.float64 and out.shape == x.shape
    W, b = (p.detach().clone().requires_grad_(True) for p in impl.parameters())
    xt = x.clone().requires_grad_(True)
    want = torch_step(W, b, xt, lambda v: torch.tanh(lin(v)))
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    got = torch.autograd.grad((out * G).sum(), [xb, *impl.parameters(), lin.weight])
    ref = torch.autograd.grad((want * G).sum(), [xt, W, b, lin.weight])
    for g, r in zip(got, ref, strict=True):  # x, W, b, and the branch's own weight
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_weights_match_the_torch_math_and_the_declaration_carries_the_precision() -> None:
    impl = standin_factory()(2, 3, seed=0)
    x = torch.randn(1, 2, 2, 3, dtype=torch.float64)
    h_pre, _, H_res = impl.weights(x)
    torch.testing.assert_close(H_res.sum(-1), torch.ones(1, 2, 2, dtype=torch.float64))
    W, b = impl.parameters()
    logits = x.reshape(1, 2, -1) @ W.detach() + b.detach()
    torch.testing.assert_close(h_pre, torch.sigmoid(logits[..., :2]))
    declared = conventions_of(impl)
    assert declared.compute_dtype is None and "numpy-standin" in declared.notes


def test_bfloat16_crosses_and_comes_back_as_bfloat16() -> None:
    impl = standin_factory()(2, 4, dtype=torch.bfloat16, seed=0)
    assert all(p.dtype == torch.bfloat16 for p in impl.parameters())
    x = torch.randn(1, 3, 2, 4).to(torch.bfloat16).requires_grad_(True)
    out = impl.forward(x, lambda v: v * 2)
    assert out.dtype == torch.float32  # NumPy computes the bfloat16 values in float32
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g.dtype == torch.bfloat16 and bool(torch.isfinite(g).all())


def test_the_kit_passes_the_standin_and_fails_a_wrong_vjp() -> None:
    only = ["gradients.fd_input", "gradients.fd_parameters", "gradients.closed_form",
            "law.reported"]
    good = check_implementation(standin_factory(), profile="quick", device="cpu", only=only)
    statuses = {r.id: r.status for r in good.results}
    assert all(statuses[i] == "passed" for i in only), statuses
    bad = check_implementation(standin_factory(wrong=True), profile="quick", device="cpu",
                               only=only)
    statuses = {r.id: r.status for r in bad.results}
    assert statuses["gradients.fd_input"] == "failed", statuses
    assert statuses["gradients.fd_parameters"] == "failed", statuses
    assert statuses["law.reported"] == "passed", statuses  # the forward is right


def test_a_bridged_target_declares_itself_untraceable_so_fullgraph_is_not_applicable() -> None:
    declared = conventions_of(standin_factory()(2, 3, seed=0))
    assert declared.untraceable is not None and "numpy-standin" in declared.untraceable
    report = check_implementation(standin_factory(), profile="quick", device="cpu",
                                  only=["compile.fullgraph"])
    result = next(r for r in report.results if r.id == "compile.fullgraph")
    assert result.status == "not_applicable", result
    assert "TorchDynamo cannot trace" in (result.message or "")
    assert declared.untraceable in (result.message or "")


MOOT = ("strides.non_contiguous", "shape.other_sequence_axes", "state.input_unchanged",
        "inference.modes")
"""The properties whose bug class the bridge itself rules out."""


def test_what_the_bridge_makes_moot_is_not_applicable_never_a_pass() -> None:
    declared = conventions_of(standin_factory()(2, 3, seed=0))
    assert declared.bridged == "numpy-standin"
    report = check_implementation(standin_factory(), profile="quick", device="cpu",
                                  only=list(MOOT))
    results = {r.id: r for r in report.results}
    for prop_id in MOOT:
        result = results[prop_id]
        assert result.status == "not_applicable", (prop_id, result.status)
        assert "the framework bridge makes this bug class impossible" in (result.message or "")
        assert "bridged from numpy-standin" in (result.message or "")
    # the same properties apply, and pass, on a torch target
    torch_report = check_implementation("reference:mhc", profile="quick", device="cpu",
                                        only=list(MOOT))
    assert {r.id: r.status for r in torch_report.results if r.id in MOOT} == dict.fromkeys(
        MOOT, "passed")


def test_the_framework_gets_a_copy_it_cannot_write_through() -> None:
    # a framework function that writes into the array it is given: the caller's state must
    # not change (why state.input_unchanged is moot on a bridged target)
    def writing(params: Any, x: Any) -> Any:
        out = npf.make_read()(params, x)
        x[...] = 0.0
        return out

    def build(n: int, d: int, layer_index: int, seed: int) -> Built:
        del layer_index
        read = npf.VjpFunction(writing, npf.make_read().vjp)
        return Built(npf.init(n, d, seed), Sublayer(read=read, write=npf.WRITE))

    impl = bridged_target(npf.NumpyFramework, build, conventions=Conventions(),
                          compute_dtype=None)(2, 3, seed=0)
    x = torch.randn(1, 2, 2, 3, dtype=torch.float64)
    before = x.clone()
    impl.forward(x, lambda v: v)
    assert torch.equal(x, before)


def test_importing_the_bridge_imports_no_framework() -> None:
    code = ("import sys, hcspec.conformance.bridge, hcspec.conformance.subjects.targets; "
            "print(sorted(m for m in ('mlx', 'jax', 'mlx_lm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
