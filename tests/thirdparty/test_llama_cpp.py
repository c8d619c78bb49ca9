"""The llama.cpp ggml adapter (:mod:`hcspec.conformance.adapters.llama_cpp`), run against the
built library: skipped where no ggml build is found (``python -m
hcspec.conformance.native.build``, or ``$HC_GGML_LIB``; the CI lane .ci/lanes/llama_cpp builds
it). The slow test builds a ggml with a planted bug (tools/ggml_mutants.py) and shows the kit's
run fail by a named property."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from hcspec.conformance.native import build as native_build
from hcspec.formulas.published import weights as published_weights

pytestmark = pytest.mark.skipif(native_build.unavailable() is not None,
                                reason=str(native_build.unavailable()))


def _params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"hc_fn": (rng.standard_normal((24, 32)) * 0.3).astype(np.float32),
            "hc_scale": np.array([0.9, 1.2, 1.6], np.float32),
            "hc_base": (rng.standard_normal(24) * 0.5).astype(np.float32)}


def test_the_ggml_weights_are_the_published_deepseek_v4_ones() -> None:
    from hcspec.conformance.native import ggml_steps

    params = _params(1)
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 8)).astype(np.float32)
    got = ggml_steps.sublayer_weights(ggml_steps.Settings(), params, x)
    want = published_weights("deepseek-v4", {k: torch.tensor(v, dtype=torch.float64)
                                             for k, v in params.items()},
                             torch.tensor(x, dtype=torch.float64))
    for name, g, w in zip(("h_pre", "h_post", "H_res"), got, want, strict=True):
        assert np.abs(g - w.numpy()).max() < 2e-6, name
    # H_res is combᵀ: its rows (the destinations) are the sums normalised last
    assert np.abs(got[2].sum(-1) - 1).max() < 1e-5
    assert np.abs(got[2].sum(-2) - 1).max() > 1e-7  # columns only approximately


def test_the_step_is_x_in_then_the_branch_then_post() -> None:
    from hcspec.conformance.adapters import llama_cpp

    impl = llama_cpp.make_deepseek_v4(4, 8, seed=3)
    with torch.no_grad():
        impl.params["hc_base"].copy_(torch.linspace(-1, 1, 24))
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    calls: list[torch.Tensor] = []

    def branch(h: torch.Tensor) -> torch.Tensor:
        calls.append(h)
        return torch.tanh(h @ w)

    out = impl.forward(x, branch)
    h_pre, h_post, h_res = impl.weights(x)
    assert len(calls) == 1 and calls[0].dtype == torch.float64
    x_in = torch.einsum("btn,btnd->btd", h_pre.double(), x)
    assert torch.allclose(calls[0], x_in, atol=1e-5)
    want = torch.einsum("btij,btjd->btid", h_res.double(), x) + h_post.double()[..., None] * (
        torch.tanh(calls[0] @ w))[..., None, :]
    assert out.dtype == torch.float32 and not out.requires_grad
    assert torch.allclose(out.double(), want, atol=1e-5)


def test_n_other_than_4_is_refused_before_any_native_call() -> None:
    from hcspec.conformance.adapters import llama_cpp

    with pytest.raises(ValueError, match="supported_expansion_rates"):
        llama_cpp.make_deepseek_v4(2, 8)


def test_threads_keep_the_parameters_and_the_output() -> None:
    from hcspec.conformance.adapters import llama_cpp

    impl = llama_cpp.make_deepseek_v4(4, 16, seed=4)
    x = torch.randn(1, 33, 4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    four = impl.threads(4)
    assert four.params is impl.params
    assert torch.equal(impl.forward(x, torch.tanh), four.forward(x, torch.tanh))


@pytest.mark.slow
def test_a_ci_subset_runs_every_kind_of_verdict() -> None:
    from hcspec.conformance.run.session import check_implementation

    report = check_implementation(
        "llama_cpp:deepseek-v4", profile="ci",
        only=["published.step", "exact.one_hot_copy", "determinism.thread_count",
              "gradients.closed_form", "reduction.mhc_n1_residual", "customop.opcheck"])
    status = {r.id: r.status for r in report.results}
    assert status["published.step"] == "passed"
    assert status["exact.one_hot_copy"] == "passed"  # the n = 2, 3 cases skipped, n = 4 ran
    assert status["determinism.thread_count"] == "passed"
    assert status["gradients.closed_form"] == "not_applicable"
    assert status["reduction.mhc_n1_residual"] == "not_applicable"  # n = 1 only: declared
    assert status["customop.opcheck"] == "not_applicable"  # no custom ops offered


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_a_planted_bug_fails_a_named_property(tmp_path: object) -> None:
    """Rebuilds ggml-cpu with comb read transposed in ggml_dsv4_hc_post (about 2-3 min)."""
    from pathlib import Path

    from tools import ggml_mutants

    (library,) = ggml_mutants.build_mutants(["comb_transposed"]).values()
    assert isinstance(tmp_path, Path)
    status, failed = ggml_mutants.run_kit(library, "quick", tmp_path / "r.json")
    assert status == 1
    assert "published.step" in failed and "law.reported" in failed


# --- llama_cpp:qwen4-exp ---------------------------------------------------------------------
def _published(impl: object) -> dict[str, object]:
    from hcspec.conformance.adapters import llama_cpp

    assert isinstance(impl, llama_cpp.LlamaCppQwen4ExpConnection)
    params = impl.published_parameters()
    return {k: (v.detach().double() if isinstance(v, torch.Tensor) else v)
            for k, v in params.items()}


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_ggml_gated_step_is_the_published_qwen4_exp_step_at_any_n(n: int) -> None:
    """No count is asserted by ggml_dsv4_hc_pre_gated or ggml_dsv4_hc_post (NULL comb): the
    step runs at n = 2, 3, 5, 8 and equals the float64 published step (the drawn norm weight
    is non-zero, so the converter's 1 + w fold is exercised)."""
    from hcspec.conformance.adapters import llama_cpp
    from hcspec.formulas import gated

    impl = llama_cpp.make_qwen4_exp(n, 16, seed=n)
    assert isinstance(impl, llama_cpp.LlamaCppQwen4ExpConnection)
    params = _published(impl)
    assert float(torch.as_tensor(params["hc_norm.weight"]).abs().max()) > 0.05
    x = torch.randn(2, 3, n, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    w = torch.randn(16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    calls: list[torch.Tensor] = []

    def branch(h: torch.Tensor) -> torch.Tensor:
        calls.append(h)
        return torch.tanh(h @ w.to(h.dtype))

    out = impl.forward(x, branch)
    assert len(calls) == 1 and out.dtype == torch.float32 and not out.requires_grad
    want = gated.step(params, x, branch)
    assert (out.double() - want).abs().max() < 2e-6
    x_in, h_post = impl.read_map(x)
    parts = gated.parts(params, x)
    assert parts.h_post is not None
    assert (x_in.double() - parts.x_in).abs().max() < 1e-6
    assert (h_post.double() - parts.h_post).abs().max() < 1e-6


def test_the_gated_write_is_the_identity_residual_plus_h_post_z() -> None:
    """``ggml_dsv4_hc_post`` with a NULL comb: X' = X + h_post zᵀ exactly in float32 (one
    product and one sum per entry)."""
    from hcspec.conformance.native import ggml_steps

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 3, 8)).astype(np.float32)
    z = rng.standard_normal((1, 5, 8)).astype(np.float32)
    post = rng.standard_normal((1, 5, 3)).astype(np.float32)
    got = ggml_steps.gated_write(ggml_steps.Settings(), {}, x, z, post)
    want = x + post[..., None] * z[..., None, :]
    assert np.array_equal(got, want)


def test_the_gated_target_refuses_one_stream_and_declares_its_read() -> None:
    from hcspec.conformance.adapters import llama_cpp

    with pytest.raises(ValueError, match="count <= 1"):
        llama_cpp.make_qwen4_exp(1, 8)
    impl = llama_cpp.make_qwen4_exp(2, 8)
    c = impl.conventions
    assert (c.read, c.residual_mixing, c.published, impl.kind) == (
        "elementwise", "identity", "qwen4-exp", "hc-dynamic")
    assert c.no_backward and c.supported_expansion_rates is None
    assert impl.weights is None  # no per-stream weights to report


@pytest.mark.slow
def test_the_gated_ci_run_passes_the_gated_and_published_families() -> None:
    from hcspec.conformance.run.session import check_implementation

    report = check_implementation("llama_cpp:qwen4-exp", profile="ci")
    status = {r.id: r.status for r in report.results}
    assert not [k for k, v in status.items() if v not in ("passed", "not_applicable")]
    for name in ("published.step", "published.load_roundtrip", "gated.law", "gated.read",
                 "gated.write", "gated.unmixed", "determinism.thread_count"):
        assert status[name] == "passed", name
    assert status["gradients.fd_input"] == "not_applicable"
    assert status["law.reported"] == "not_applicable"  # no per-stream weights
    assert status["customop.opcheck"] == status["customop.export"] == "passed"
    assert status["customop.vmap"] == status["customop.double_backward"] == "not_applicable"


def test_the_gated_forward_is_two_custom_ops_that_opcheck_and_export() -> None:
    """The forward calls hcspec_ggml::qwen4exp_read and ::qwen4exp_write (fake kernels for
    the shapes): opcheck passes on both calls custom_ops(x) names, and torch.export captures
    both, its program giving eager's output."""
    from hcspec.conformance.adapters import llama_cpp

    impl = llama_cpp.make_qwen4_exp(3, 8, seed=2, threads=2)
    assert isinstance(impl, llama_cpp.LlamaCppQwen4ExpConnection) and impl.thread_count == 2
    x = torch.randn(1, 4, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    calls = impl.custom_ops(x)
    assert [str(op) for op, _, _ in calls] == ["hcspec_ggml.qwen4exp_read.default",
                                               "hcspec_ggml.qwen4exp_write.default"]
    for op, args, kwargs in calls:
        torch.library.opcheck(op, args, kwargs)  # raises on a failed test

    class Step(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return impl.forward(t, torch.tanh)

    with torch.no_grad():  # as customop.export: else the forward's no_grad is a submodule
        exported = torch.export.export(Step(), (x,))
        graph = str(exported.graph)
        assert "qwen4exp_read" in graph and "qwen4exp_write" in graph
        assert torch.equal(exported.module()(x), Step()(x))


def test_an_assert_in_ggml_names_the_native_function() -> None:
    """The native-fault worker names ggml's frames: the n ≠ 4 GGML_ASSERT of
    ggml_dsv4_hc_comb (called directly, past the factory's refusal) is reported in it."""
    from hcspec.conformance.native import ggml_steps
    from hcspec.conformance.native.worker import NativeWorker, WorkerDied

    n, d = 3, 8
    worker = NativeWorker(timeout=120)
    args = (np.ones((2, n, d), np.float32), np.ones(((n + 2) * n, n * d), np.float32),
            np.ones(3, np.float32), np.zeros((n + 2) * n, np.float32), ggml_steps.Settings())
    try:
        with pytest.raises(WorkerDied) as died:
            worker.call(ggml_steps.read, args)
    finally:
        worker.close()
    assert died.value.signal == "SIGABRT"
    assert "GGML_ASSERT(hc == 4) failed" in died.value.stderr
    native = died.value.native
    assert native is not None and native.where == "ggml_dsv4_hc_comb (libggml-base.so)", native
    assert "ggml_abort (libggml-base.so) <- ggml_dsv4_hc_comb (libggml-base.so)" in str(
        died.value)
