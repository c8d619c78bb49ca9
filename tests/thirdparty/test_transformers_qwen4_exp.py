"""The transformers:qwen4-exp target (transformers 5.23.0 ``Qwen4ExpTextGatedResidual``): its
forward is the package's own module composed as ``Qwen4ExpTextDecoderLayer`` composes it, it
equals the published ``qwen4-exp`` step of its own tensors, ``reduce`` is the model's
``hyper_connection_mixer``, and the init is the model's own."""

from __future__ import annotations

import importlib.util

import pytest
import torch

if (importlib.util.find_spec("transformers") is None
        or importlib.util.find_spec("transformers.models.qwen4_exp") is None):
    pytest.skip("transformers without qwen4_exp (it ships from 5.23.0)", allow_module_level=True)

from hcspec.conformance.protocol import capabilities, check_required, conventions_of
from hcspec.conformance.subjects import targets
from hcspec.formulas import gated

NAME = "transformers:qwen4-exp"


def _make(n: int = 3, d: int = 8, **kw: object) -> torch.nn.Module:
    impl = targets.resolve(NAME).factory(n, d, **kw)
    with torch.no_grad():  # away from the init (weight 0, small Linear weights)
        gen = torch.Generator().manual_seed(5)
        for p in impl.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return impl


def _branch(a: torch.Tensor) -> torch.Tensor:
    return torch.tanh(a) * 1.5 + 0.25


def test_forward_is_the_modules_step_composed_as_the_decoder_layer() -> None:
    impl = _make()
    x = torch.randn(2, 3, 3, 8, dtype=torch.float64)
    with torch.no_grad():
        mixed, hyper, inject = impl.connection(x.flatten(-2))
        by_hand = hyper + (_branch(mixed).unsqueeze(-2) * inject.unsqueeze(-1)).flatten(-2)
        got = impl(x, _branch)
    assert got.shape == x.shape
    assert torch.equal(got.flatten(-2), by_hand)


def test_forward_equals_the_published_step_of_its_own_tensors() -> None:
    impl = _make(seed=2)
    x = torch.randn(2, 4, 3, 8, dtype=torch.float64)
    params = {k: (v.detach().double() if isinstance(v, torch.Tensor) else v)
              for k, v in impl.published_parameters().items()}
    with torch.no_grad():
        error = (impl(x, _branch) - gated.step(params, x, _branch)).abs().max().item()
    assert error < 1e-5  # the group norm computes in float32 (declared compute_dtype)
    assert error > 0.0  # ... and so it is not the float64 step bit for bit
    with torch.no_grad():
        wrong = gated.step(params, x, _branch, gated.GatedFormula(streams="sum"))
        assert (impl(x, _branch) - wrong).abs().max().item() > 1e-2


def test_reduce_is_the_models_mixer_and_the_target_is_complete() -> None:
    impl = _make()
    check_required(impl)
    x = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(impl.reduce(x), impl.mixer(x.flatten(-2)))
        assert impl.mixer.block_inject_weight is None
    assert {"reduce", "expand", "published_parameters", "load_published",
            "parameters"} <= capabilities(impl)
    declared = conventions_of(impl)
    assert (declared.read, declared.residual_mixing, declared.published) == (
        "elementwise", "identity", "qwen4-exp")


def test_init_is_the_models_own_and_one_stream_is_refused() -> None:
    first = targets.resolve(NAME).factory(2, 4, seed=7)
    again = targets.resolve(NAME).factory(2, 4, seed=7)
    other = targets.resolve(NAME).factory(2, 4, seed=8)
    assert torch.count_nonzero(first.connection.hc_norm.weight) == 0  # scale 1 + 0
    for a, b, c in zip(first.parameters(), again.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
        if a.abs().sum() > 0:
            assert not torch.equal(a, c)
    with pytest.raises(Exception, match="hc_count > 1"):  # the config validator wraps it
        targets.resolve(NAME).factory(1, 4)


def test_load_published_round_trips() -> None:
    source, sink = _make(seed=1), _make(seed=2)
    sink.load_published({k: v.detach().clone() for k, v in source.published_parameters().items()
                         if isinstance(v, torch.Tensor)})
    x = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(sink(x, _branch), source(x, _branch))
