"""SGLang 0.5.23's Qwen4-exp gated residual (``sglang:gated``) from the installed wheel, and
mutants of its gate (``GatedResidual``'s torch routes, the module's source changed at import:
the gate computed from the raw streams, its ``/n`` dropped, ``σ`` for the write's ``2σ``),
which the kit must kill.

Skipped where SGLang is not installed (its lane, .ci/lanes/sglang, installs it).
"""

from __future__ import annotations

import importlib.util
import inspect
import pathlib
from typing import Any

import pytest
import torch

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed", allow_module_level=True)

from hcspec.conformance import check_implementation
from hcspec.conformance.adapters import sglang_gated
from hcspec.formulas import gated
from tests.thirdparty._engine_mutants import failed

try:
    HC = sglang_gated.hyperconnection()
except ImportError as exc:  # what the module imports is missing in this venv
    pytest.skip(f"sglang.srt.layers.hyperconnection does not import: {exc}",
                allow_module_level=True)

KILLERS = ["gated.law", "gated.read", "gated.write", "published.step"]

_READ_START = ("        if normalized_input is not None:\n"
               "            assert self.config.hc_per_branch_norm")
MUTANTS: dict[str, list[tuple[str, str]]] = {
    # the gate reads X instead of N (the value stays N)
    "gate-from-raw": [
        (_READ_START, "        self._hcspec_raw = hyper_input\n" + _READ_START),
        ("F.linear(hyper_input_normed, input_mix_weight_down) / hc",
         "F.linear(self._hcspec_raw.to(hyper_input_normed.dtype), input_mix_weight_down) / hc")],
    "gate-without-n": [
        ("F.linear(hyper_input_normed, input_mix_weight_down) / hc",
         "F.linear(hyper_input_normed, input_mix_weight_down)")],
    "write-sigma-not-2sigma": [
        ("2 * torch.sigmoid(", "torch.sigmoid(")],
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


@pytest.mark.parametrize("compiled", [False, True])
def test_step_is_the_published_law(compiled: bool) -> None:
    """The engine's mix -> branch -> combine equals ``gated.step`` on its own tensors
    (float64; the grouped norm's float32 the only rounding), and ``read_map`` equals
    ``gated.parts``' ``x_in`` and ``h_post``."""
    n, d = 4, 8
    impl = sglang_gated.make(n, d, seed=2, compiled=compiled)
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
    impl = sglang_gated.make(n, d, seed=3, compiled=False)
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
    monkeypatch.setitem(sglang_gated._LOADED, sglang_gated.MODULE, _mutant(name, tmp_path))

    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return sglang_gated.make(n, d, compiled=False, **kwargs)

    report = check_implementation(factory, profile="ci", only=KILLERS)
    assert failed(report), f"mutant {name} survived: " + ", ".join(
        f"{r.id}={r.status}" for r in report.results)


@pytest.mark.slow
def test_unmutated_passes() -> None:
    """The killing properties pass on the unmutated module (so a kill is the mutation's)."""
    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return sglang_gated.make(n, d, compiled=False, **kwargs)

    report = check_implementation(factory, profile="ci", only=KILLERS)
    assert not failed(report), [(r.id, r.status) for r in report.results]
    assert set(KILLERS) <= {r.id for r in report.results if r.status == "passed"}
