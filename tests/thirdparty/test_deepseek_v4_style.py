"""hcspec.conformance.adapters.deepseek_v4_style: a kit target from a module that returns
(pre, post, comb) and leaves the composition to the caller."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    V4StyleConnection,
    identity_site,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions, capabilities, check_required


class TinyV4(nn.Module):
    """A DeepSeek-V4-style module written for this test: sigmoid pre/post, softmax-first
    Sinkhorn–Knopp on comb, comb[i, j] = weight of input stream i in output stream j."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.n = n
        self.fn = nn.Parameter(torch.randn((2 + n) * n, n * d) * 0.3)
        self.base = nn.Parameter(torch.randn((2 + n) * n) * 0.3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        mix = x.flatten(2).to(self.fn.dtype) @ self.fn.T + self.base  # computes in its own dtype
        pre = torch.sigmoid(mix[..., :n])
        post = 2 * torch.sigmoid(mix[..., n:2 * n])
        comb = torch.softmax(mix[..., 2 * n:].unflatten(-1, (n, n)), dim=-1)
        for _ in range(30):
            comb = comb / comb.sum(dim=-2, keepdim=True)
            comb = comb / comb.sum(dim=-1, keepdim=True)
        return pre, post, comb


def _decompose(module: TinyV4, x: torch.Tensor) -> Decomposition:
    pre, post, comb = module(x)
    return Decomposition(pre, post, comb)


CONVENTIONS = Conventions(sinkhorn_variant="softmax", sinkhorn_iterations=30,
                          sinkhorn_iterations_count="rounds_from_softmax",
                          sinkhorn_exact_axis="columns")


def _make(comb: str = "source_target", **kw: object) -> V4StyleConnection:
    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb=comb, conventions=CONVENTIONS)  # type: ignore[arg-type]
    impl = factory(3, 5, **kw)  # type: ignore[arg-type]
    assert isinstance(impl, V4StyleConnection)
    return impl


def test_forward_is_the_callers_composition_with_comb_transposed() -> None:
    impl = _make(seed=2)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    pre, post, comb = impl.module(x)
    collapsed = torch.einsum("btn,btnd->btd", pre, x)
    expected = post.unsqueeze(-1) * torch.tanh(collapsed).unsqueeze(-2) + torch.einsum(
        "btij,btid->btjd", comb, x)
    torch.testing.assert_close(impl.forward(x, torch.tanh), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("orientation", ["source_target", "target_source"])
def test_weights_follow_the_declared_orientation_and_the_law(orientation: str) -> None:
    impl = _make(orientation, seed=1)
    x = torch.randn(1, 3, 3, 5, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    _, _, comb = impl.module(x)
    want = comb.transpose(-1, -2) if orientation == "source_target" else comb
    torch.testing.assert_close(H_res, want, rtol=0, atol=0)
    z = torch.sin(torch.einsum("btn,btnd->btd", h_pre, x))
    law = H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)
    torch.testing.assert_close(impl.forward(x, torch.sin), law, rtol=0, atol=1e-12)


def test_the_target_is_complete_and_declares_its_conventions() -> None:
    impl = _make()
    check_required(impl)
    assert capabilities(impl) == {"weights", "expand", "reduce", "parameters", "train_eval",
                                  "stack"}
    assert impl.conventions == CONVENTIONS and impl.kind == "mhc"
    h = torch.randn(2, 3, 5, dtype=torch.float64)
    torch.testing.assert_close(impl.reduce(impl.expand(h)), 3 * h)


def test_branch_called_once_and_seed_decides_the_init_without_touching_the_rng() -> None:
    state = torch.random.get_rng_state()
    a, b, c = _make(seed=3), _make(seed=3), _make(seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.module.fn, b.module.fn) and not torch.equal(a.module.fn, c.module.fn)
    calls = []
    a.forward(torch.randn(1, 2, 3, 5, dtype=torch.float64), lambda h: calls.append(1) or h)
    assert calls == [1]


def test_float32_module_composes_in_the_input_dtype() -> None:
    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb="source_target", conventions=CONVENTIONS, keep_float32=True)
    impl = factory(2, 4, dtype=torch.bfloat16)
    assert all(p.dtype == torch.float32 for p in impl.parameters())  # type: ignore[attr-defined]
    x = torch.randn(1, 2, 2, 4).to(torch.bfloat16)
    out = impl.forward(x, lambda h: h.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(ValueError, match="comb"):
        v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                        comb="rows", conventions=CONVENTIONS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="learned"):
        v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose, comb="source_target",
                        conventions=Conventions(reduce="learned"))
    impl = _make()
    with pytest.raises(ValueError, match="comb should be"):
        impl._decompose = lambda m, x: Decomposition(  # type: ignore[method-assign]
            torch.ones(1, 1, 3), torch.ones(1, 1, 3), torch.ones(1, 1, 2, 2))
        impl.forward(torch.randn(1, 1, 3, 5, dtype=torch.float64), torch.tanh)


def _doc_example() -> str:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = text.split("### Modules in the DeepSeek-V4 style", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_example_is_a_complete_target_with_the_layers_composition() -> None:
    namespace: dict[str, object] = {}
    exec(compile(_doc_example(), "docs/conformance.md", "exec"), namespace)
    impl = namespace["make"](3, 8, seed=0)  # type: ignore[operator]
    check_required(impl)
    x = torch.randn(2, 3, 3, 8, dtype=torch.float64)
    pre, post, comb = impl.module(x)  # type: ignore[attr-defined]
    collapsed = torch.einsum("btn,btnd->btd", pre.double(), x)
    want = post.double().unsqueeze(-1) * collapsed.unsqueeze(-2) + comb.double().transpose(
        -1, -2) @ x
    torch.testing.assert_close(impl.forward(x, lambda h: h), want)  # type: ignore[attr-defined]
    _, _, H_res = impl.weights(x)  # type: ignore[attr-defined]
    torch.testing.assert_close(H_res.sum(-1), torch.ones(2, 3, 3, dtype=torch.float64),
                               atol=1e-5, rtol=0)  # rows of H_res exact (up to the eps)


@pytest.mark.slow
def test_the_kit_passes_the_documented_example_on_its_constraints() -> None:
    from hcspec.conformance.run.session import check_implementation

    namespace: dict[str, object] = {}
    exec(compile(_doc_example(), "docs/conformance.md", "exec"), namespace)
    report = check_implementation(namespace["make"], profile="quick",  # type: ignore[arg-type]
                                  only=["law.*", "constraints.*"], device="cpu")
    bad = [r.id for r in report.results if r.status in ("failed", "error")]
    assert bad == [], bad


def test_identity_mixing_adds_the_streams_unchanged_and_reports_the_identity() -> None:
    def no_comb(module: TinyV4, x: torch.Tensor) -> Decomposition:
        pre, post, _ = module(x)
        return Decomposition(pre, post, None)

    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), no_comb, comb="source_target",
                              conventions=Conventions(residual_mixing="identity"),
                              compose_dtype="float32")
    impl = factory(3, 4, seed=0)
    x = torch.randn(2, 2, 3, 4, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)  # type: ignore[attr-defined]
    assert torch.equal(H_res, torch.eye(3, dtype=torch.float64).expand(2, 2, 3, 3))
    z = torch.cos(torch.einsum("btn,btnd->btd", h_pre, x))
    want = x + h_post.unsqueeze(-1) * z.unsqueeze(-2)
    torch.testing.assert_close(impl.forward(x, torch.cos), want, rtol=0, atol=1e-6)  # float32
    declared_matrix = v4_style_target(lambda n, d, layer: TinyV4(n, d), no_comb,
                                      comb="source_target", conventions=CONVENTIONS)(3, 4)
    with pytest.raises(ValueError, match="residual_mixing"):
        declared_matrix.forward(x, torch.cos)


def test_a_module_that_consumes_pre_gives_it_to_weights_through_read_pre() -> None:
    def collapsed_only(module: TinyV4, x: torch.Tensor) -> Decomposition:
        pre, post, comb = module(x)
        return Decomposition(None, post, comb, (pre.unsqueeze(-1) * x).sum(-2))

    def read_pre(module: TinyV4, x: torch.Tensor) -> torch.Tensor:
        return module(x)[0]

    build = lambda n, d, layer: TinyV4(n, d)  # noqa: E731
    x = torch.randn(1, 2, 3, 5, dtype=torch.float64)
    full = v4_style_target(build, _decompose, comb="source_target", conventions=CONVENTIONS)
    lean = v4_style_target(build, collapsed_only, comb="source_target",
                           conventions=CONVENTIONS, read_pre=read_pre)
    a, b = full(3, 5, seed=5), lean(3, 5, seed=5)
    torch.testing.assert_close(b.forward(x, torch.tanh), a.forward(x, torch.tanh))  # type: ignore[attr-defined]
    for u, v in zip(b.weights(x), a.weights(x), strict=True):  # type: ignore[attr-defined]
        assert torch.equal(u, v)
    without = v4_style_target(build, collapsed_only, comb="source_target",
                              conventions=CONVENTIONS)(3, 5)
    with pytest.raises(ValueError, match="read_pre"):
        without.weights(x)  # type: ignore[attr-defined]


def test_the_stack_runs_the_sublayers_the_factory_builds_one_after_the_other() -> None:
    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb="source_target", conventions=CONVENTIONS)
    impl = factory(3, 5, layer_index=1, seed=2)
    assert isinstance(impl, V4StyleConnection)
    stack: Any = impl.stack(3)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    branches = [torch.sin, torch.cos, torch.tanh]
    want, used = x, []
    for k in range(3):  # sublayer k: layer_index 1 + k, seed 2 + k (its own parameters)
        sub = factory(3, 5, layer_index=1 + k, seed=2 + k)
        used.append(sub.weights(want))  # type: ignore[attr-defined]
        want = sub.forward(want, branches[k])
    torch.testing.assert_close(stack.forward(x, branches), want, rtol=0, atol=0)
    for got, expected in zip(stack.weights(x, branches), used, strict=True):
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert stack.sublayer(0) is impl and stack.layers == 3
    assert len(list(stack.parameters())) == 3 * len(list(impl.parameters()))


def test_the_stack_family_passes_on_the_helpers_stack() -> None:
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation

    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb="source_target", conventions=CONVENTIONS)
    report = check_implementation(factory, profile="quick", device="cpu", only=["stack"])
    statuses = {r.id: r.status for r in report.results if r.family == "stack"}
    assert statuses == dict.fromkeys(statuses, rp.PASSED) and len(statuses) == 4, statuses


def test_the_packages_own_stack_of_receives_the_sublayers_in_order() -> None:
    from hcspec.conformance.adapters._stacking import sequential_stack

    received: list[list[V4StyleConnection]] = []

    def stack_of(sublayers: list[V4StyleConnection]) -> Any:
        received.append(sublayers)
        return sequential_stack(sublayers)

    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb="source_target", conventions=CONVENTIONS, stack_of=stack_of)
    impl = factory(3, 5, seed=4)
    assert isinstance(impl, V4StyleConnection)
    impl.stack(2)
    (subs,) = received
    assert subs[0] is impl and len(subs) == 2
    later = factory(3, 5, layer_index=1, seed=5)
    assert all(torch.equal(p, q) for p, q in zip(subs[1].parameters(), later.parameters(),
                                                 strict=True))
    with pytest.raises(ValueError, match=r"layers: expected a positive int"):
        impl.stack(0)


def _tiny_logits(module: TinyV4, x: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = module.n
    mix = x.flatten(2).to(module.fn.dtype) @ module.fn.T + module.base
    return mix[..., :n], mix[..., n:2 * n], mix[..., 2 * n:].unflatten(-1, (n, n))


def test_the_logits_option_offers_the_modules_logits_in_the_row_form() -> None:
    assert "logits" not in capabilities(_make(seed=1))
    factory = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                              comb="source_target", conventions=CONVENTIONS,
                              logits=_tiny_logits)
    impl = factory(3, 5, seed=1)
    assert "logits" in capabilities(impl)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    pre, post, res = impl.logits(x)  # type: ignore[attr-defined]
    want_pre, want_post, comb = _tiny_logits(impl.module, x)  # type: ignore[attr-defined]
    assert torch.equal(pre, want_pre) and torch.equal(post, want_post)
    assert torch.equal(res, comb.transpose(-1, -2))  # H̃_res[i, j] belongs to H_res[i, j]
    # with the logits the variant family checks the declared Sinkhorn–Knopp variant: TinyV4
    # runs 30 full rounds after the softmax, not the 2·30 − 1 normalisations declared above
    import dataclasses

    from hcspec.conformance.run.session import check_implementation

    report = check_implementation(factory, profile="quick", only=["variant.h_res"])
    [failed] = [r for r in report.results if r.id == "variant.h_res"]
    assert failed.status == "failed" and "H_res matches 30 rounds" in failed.message
    declared = dataclasses.replace(CONVENTIONS, sinkhorn_iterations_count="rounds")
    fixed = v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose,
                            comb="source_target", conventions=declared, logits=_tiny_logits)
    report = check_implementation(fixed, profile="quick", only=["variant.h_res"])
    assert {r.id: r.status for r in report.results}["variant.h_res"] == "passed"


def test_a_state_of_another_rank_reaches_the_package() -> None:
    """No validation in the helper's forward: the package's own error is what the kit sees
    (shape.other_sequence_axes then checks the package, not the helper)."""
    impl = _make(seed=1)
    for shape in ((2, 3, 5), (2, 2, 3, 3, 5)):  # [B, n, d] and [B, H, W, n, d]
        with pytest.raises(RuntimeError, match="cannot be multiplied"):  # TinyV4's flatten(2)
            impl.forward(torch.randn(*shape, dtype=torch.float64), lambda z: z)


# --- composing through the package's decoder layer (decoder_layer=...) -------------------------
class StandInDecoderLayer(nn.Module):
    """A decoder layer of the DeepSeek-V4 form written for this test: two sites, each
    ``X' = post·F(Σ pre_i X_i) + combᵀ X`` (``post``, ``comb`` cast to the state's dtype, as
    transformers' layer does); ``MISORIENTED`` mixes ``comb X`` instead."""

    MISORIENTED = False

    def __init__(self, attn_hc: Any, ffn_hc: Any, attn: Any, mlp: Any) -> None:
        super().__init__()
        self.attn_hc, self.ffn_hc, self.attn, self.mlp = attn_hc, ffn_hc, attn, mlp

    def _site(self, hc: Any, sublayer: Any, x: torch.Tensor) -> torch.Tensor:
        pre, post, comb = hc(x)
        collapsed = (pre.to(x.dtype).unsqueeze(-1) * x).sum(-2)
        mix = comb.to(x.dtype) if self.MISORIENTED else comb.to(x.dtype).transpose(-1, -2)
        return post.to(x.dtype).unsqueeze(-1) * sublayer(collapsed).unsqueeze(-2) + mix @ x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._site(self.ffn_hc, self.mlp, self._site(self.attn_hc, self.attn, x))


class MisorientedDecoderLayer(StandInDecoderLayer):
    MISORIENTED = True


def _neutral(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    site = identity_site(x)
    return site.pre, site.post, site.comb


def _through(layer_class: type[StandInDecoderLayer]) -> Any:
    def layer_of(module: TinyV4) -> Any:
        def step(x: torch.Tensor, branch: Any) -> torch.Tensor:
            out: torch.Tensor = layer_class(module, _neutral, branch, torch.zeros_like)(x)
            return out
        return step
    return v4_style_target(lambda n, d, layer: TinyV4(n, d), _decompose, comb="source_target",
                           conventions=CONVENTIONS, decoder_layer=layer_of)


def test_identity_site_leaves_the_streams_unchanged_exactly() -> None:
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64) * 1e3
    out = StandInDecoderLayer(_neutral, _neutral, torch.tanh, torch.zeros_like)(x)
    assert torch.equal(out, x)


def test_a_right_decoder_layer_gives_the_declared_composition_and_passes_the_law() -> None:
    from hcspec.conformance.run.session import check_implementation

    impl = _through(StandInDecoderLayer)(3, 5, seed=2)
    plain = _make(seed=2)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    torch.testing.assert_close(impl.forward(x, torch.tanh), plain.forward(x, torch.tanh),
                               rtol=0, atol=1e-12)
    report = check_implementation(_through(StandInDecoderLayer), profile="quick", device="cpu",
                                  only=["law"])
    bad = [(r.id, r.message) for r in report.results if r.status in ("failed", "error")]
    assert bad == [], bad
    assert {r.id for r in report.results if r.status == "passed"} >= {
        "law.reported", "law.reported_matches_probed"}


def test_a_decoder_layer_that_misorients_comb_fails_the_law() -> None:
    """The declaration says ``combᵀ X``; the package's layer mixes ``comb X``: composed from
    the declaration the target would pass, composed through the layer it fails."""
    from hcspec.conformance.run.session import check_implementation

    report = check_implementation(_through(MisorientedDecoderLayer), profile="quick",
                                  device="cpu", only=["law"])
    failed = {r.id for r in report.results if r.status == "failed"}
    assert {"law.reported", "law.reported_matches_probed"} <= failed, failed
    impl = _through(MisorientedDecoderLayer)(3, 5, seed=2)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    z = torch.tanh(torch.einsum("btn,btnd->btd", h_pre, x))
    law = H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)
    with torch.no_grad():
        assert float((impl.forward(x, torch.tanh) - law).abs().max()) > 1e-3
