"""vLLM 0.33.0's Qwen4-exp gated residual (``vllm:qwen4-exp``, the torch ``GatedResidual`` of
``models/qwen4_exp/common/hyperconnection.py``) from the installed wheel, and mutants of its
gate (the module's source changed at import: the gate computed from the raw streams, its ``/n``
dropped, ``σ`` for the write's ``2σ``), which the kit must kill.

Skipped where vLLM is not installed (its lane, .ci/lanes/vllm, installs it).
"""

from __future__ import annotations

import importlib.util
import inspect
import pathlib
from typing import Any

import pytest
import torch

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed", allow_module_level=True)

from hcspec.conformance import check_implementation
from hcspec.conformance.adapters import vllm_gated
from hcspec.formulas import gated
from tests.thirdparty._engine_mutants import failed

try:
    HC = vllm_gated.hyperconnection()
except ImportError as exc:  # what the module imports is missing in this venv
    pytest.skip(f"{vllm_gated.MODULE} does not import: {exc}",
                allow_module_level=True)

KILLERS = ["gated.law", "gated.read", "gated.write", "published.step"]

_DOWN = "F.linear(hyper_input_normed, self.input_mix_weight_down.weight)"
MUTANTS: dict[str, list[tuple[str, str]]] = {
    # the gate reads X instead of N (the value stays N)
    "gate-from-raw": [
        (_DOWN, "F.linear(hyper_input.to(hyper_input_normed.dtype), "
                "self.input_mix_weight_down.weight)")],
    "gate-without-n": [
        (_DOWN + "\n            / self.hc_count\n", _DOWN + "\n")],
    "write-sigma-not-2sigma": [
        ("2.0 * torch.sigmoid(", "torch.sigmoid(")],
}


def _mutant(name: str, tmp: pathlib.Path) -> Any:
    """The installed ``hyperconnection`` module with ``MUTANTS[name]`` applied, imported from
    a file in ``tmp`` (each text must occur exactly once: the engine changed otherwise)."""
    source = inspect.getsource(HC)
    for old, new in MUTANTS[name]:
        assert source.count(old) == 1, f"{name}: {old!r} not found once (the engine changed)"
        source = source.replace(old, new)
    path = tmp / f"mutant_{name.replace('-', '_')}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"hcspec_mutant_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _x(n: int, d: int) -> torch.Tensor:
    return 3.0 * torch.randn(2, 3, n, d, dtype=torch.float64,
                             generator=torch.Generator().manual_seed(0))


def _perturbed(impl: Any) -> None:
    """Non-zero norm weights (the initialisation's are 0), so the ``1 + w`` counts."""
    w = impl.connection.hc_norm.weight
    with torch.no_grad():
        w.copy_(0.3 * torch.randn(w.shape, dtype=w.dtype,
                                  generator=torch.Generator().manual_seed(1)))


def test_step_is_the_published_law() -> None:
    """The engine's mix -> branch -> combine equals ``gated.step`` on its own tensors
    (float64; the grouped norm's float32 the only rounding), and ``read_map`` equals
    ``gated.parts``' ``x_in`` and ``h_post``."""
    n, d = 4, 8
    impl = vllm_gated.make(n, d, seed=2)
    _perturbed(impl)
    x = _x(n, d)

    def branch(h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h) * 1.5

    params = impl.published_parameters()
    want = gated.step(params, x, branch)
    got = impl(x, branch)
    assert got.shape == (2, 3, n, d)
    assert (got - want).abs().max().item() < 1e-5
    assert (got - x).abs().max().item() > 1e-2  # the write is not empty
    x_in, h_post = impl.read_map(x)
    p = gated.parts(params, x)
    assert (x_in - p.x_in).abs().max().item() < 1e-5
    assert p.h_post is not None
    assert (h_post - p.h_post).abs().max().item() < 1e-5
    assert h_post.min().item() > 0.0 and h_post.max().item() < 2.0


def test_reduce_is_the_mixer_read() -> None:
    """``reduce`` is the read of the second module (no write): ``gated.parts(write=False)``."""
    n, d = 3, 8
    impl = vllm_gated.make(n, d, seed=3)
    mixer: Any = impl.mixer
    params = {"hc_norm.weight": mixer.hc_norm.weight,
              "input_mix_weight_down": mixer.input_mix_weight_down.weight,
              "input_mix_weight_up": mixer.input_mix_weight_up.weight, "norm_eps": 1e-6}
    x = _x(n, d)
    want = gated.parts(params, x, write=False).x_in
    assert (impl.reduce(x) - want).abs().max().item() < 1e-5
    assert impl.expand(x[:, :, 0]).shape == (2, 3, n, d)
    assert torch.equal(impl.expand(x[:, :, 0])[:, :, 2], x[:, :, 0])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed(name: str, tmp_path: pathlib.Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit (ci profile, the gated and published step properties) fails on each mutant of
    the gate; the unmutated module passes them (:func:`test_unmutated_passes`)."""
    monkeypatch.setitem(vllm_gated._LOADED, vllm_gated.MODULE, _mutant(name, tmp_path))

    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return vllm_gated.make(n, d, **kwargs)

    report = check_implementation(factory, profile="ci", only=KILLERS)
    assert failed(report), f"mutant {name} survived: " + ", ".join(
        f"{r.id}={r.status}" for r in report.results)


@pytest.mark.slow
def test_unmutated_passes() -> None:
    """The killing properties pass on the unmutated module (so a kill is the mutation's)."""
    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return vllm_gated.make(n, d, **kwargs)

    report = check_implementation(factory, profile="ci", only=KILLERS)
    assert not failed(report), [(r.id, r.status) for r in report.results]
    assert set(KILLERS) <= {r.id for r in report.results if r.status == "passed"}
