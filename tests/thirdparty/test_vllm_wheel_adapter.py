"""vLLM 0.33.0's mHC targets from the installed wheel (``vllm:mhc-torch``, ``vllm:mhc-triton``,
``vllm:mhc-cpu``), and mutants of its Triton pre-gate kernel patched at import.

Skipped where vLLM is not installed (its lane, .ci/lanes/vllm, installs it). Without a CUDA
device the module turns on Triton's CPU interpreter, and the engine's own no-driver context
(:func:`~hcspec.conformance.adapters.vllm_wheel.interpreter_context`), before vLLM is imported.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from typing import Any

import pytest
import torch

if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("vllm or triton is not installed", allow_module_level=True)
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hcspec.conformance import check_implementation
from hcspec.conformance.adapters import vllm_wheel
from tests.thirdparty._engine_mutants import failed, mutate

vllm_wheel.interpreter_context()
MODE = vllm_wheel.triton_mode()
DEVICE = "cuda" if MODE.name == "cuda" else "cpu"
TRITON = "vllm.model_executor.kernels.mhc.triton"


def _x(n: int, d: int) -> torch.Tensor:
    return 2.0 * torch.randn(2, 3, n, d, generator=torch.Generator().manual_seed(0))


def test_torch_target_comes_from_the_wheel() -> None:
    """``vllm:mhc-torch`` uses the installed wheel's ``torch.py`` and declares DeepSeek-V4's
    published layout; comb's rows and columns sum to one."""
    impl = vllm_wheel.make_torch(4, 8, seed=1)
    assert vllm_wheel.kernels("torch").__file__.startswith(
        os.path.dirname(importlib.util.find_spec("vllm").origin or ""))
    assert impl.conventions.published == "deepseek-v4"
    _, _, h_res = impl.weights(_x(4, 8))
    assert (h_res.float().sum(-1) - 1).abs().max().item() < 2e-2
    assert (h_res.float().sum(-2) - 1).abs().max().item() < 2e-2


@pytest.mark.skipif(MODE.name == "unavailable", reason=MODE.reason)
def test_triton_pre_gate_matches_the_torch_pre() -> None:
    """The split-K Triton pre gate equals ``mhc_pre_delayed_torch``'s pre (float32 rounding)."""
    impl = vllm_wheel.make_triton(4, 8, device=DEVICE, seed=2)
    ref = vllm_wheel.make_torch(4, 8, seed=2)
    pre, _, _ = impl.weights(_x(4, 8))
    rpre, _, _ = ref.weights(_x(4, 8))
    assert (pre.float() - rpre.float()).abs().max().item() < 1e-2


def test_cpu_target_reason_names_the_build() -> None:
    """On the CUDA wheel the CPU target is unavailable with the loader's error."""
    reason = vllm_wheel.cpu_unavailable()
    if reason is None:
        pytest.skip("this vLLM build has the compiled CPU ops")
    assert "vllm._C" in reason and "CPU build" in reason


GATE_MUTANTS: dict[str, list[tuple[str, str]]] = {
    "eps-dropped": [("tl.sigmoid(mixes * rstd * scale + base) + hc_pre_eps",
                     "tl.sigmoid(mixes * rstd * scale + base)")],
    "one-split-short": [("kmask = ks < splitk", "kmask = ks < splitk - 1")],
    "wrong-slice": [("+ js[None, :] * gemm_stride_j", "+ (js[None, :] + hc_mult) * gemm_stride_j")],
}


@pytest.mark.skipif(MODE.name == "unavailable", reason=MODE.reason)
@pytest.mark.parametrize("name", sorted(GATE_MUTANTS))
def test_gate_mutant_moves_pre(name: str, tmp_path: pathlib.Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each mutant of ``_mhc_pre_mix_kernel`` (vLLM has no Triton Sinkhorn: its gate kernel is
    the one mutated) changes ``pre`` beyond float32 rounding at saturating logits."""
    impl = vllm_wheel.make_triton(4, 8, device=DEVICE, seed=3)
    with torch.no_grad():
        impl.module.scale.mul_(400.0)
        impl.module.base[:4].fill_(-30.0)
    x = _x(4, 8)
    want = impl.weights(x)[0].float()
    mutant = mutate(sys.modules[TRITON], "_mhc_pre_mix_kernel", GATE_MUTANTS[name], tmp_path,
                    drop=["direct_register_custom_op("])
    monkeypatch.setitem(vllm_wheel._LOADED, "triton", mutant)
    got = impl.weights(x)[0].float()
    rel = ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item()
    assert rel > 1e-3, (name, rel)


GATE_KILLERS = ["law.reported", "constraints.h_pre_range", "published.step"]
"""The kit's properties run on the gate mutants (vllm:mhc-triton has no ``logits``, so the
variant family does not apply)."""


@pytest.mark.slow
@pytest.mark.skipif(MODE.name == "unavailable", reason=MODE.reason)
@pytest.mark.parametrize("name", sorted(GATE_MUTANTS))
def test_gate_mutant_is_killed_by_the_kit(name: str, tmp_path: pathlib.Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit (kernel profile) fails ``published.step`` on each mutant of
    ``_mhc_pre_mix_kernel``: one split short and the wrong slice move the output; eps dropped
    (``hc_pre_eps = 1e-6``, under the float32 budget at ordinary logits) is seen by the step's
    comparison of the gates at saturated logits relative to their own magnitude
    (:func:`hcspec.conformance.machinery.saturated_gates.saturated`)."""
    mutant = mutate(vllm_wheel.kernels("triton"), "_mhc_pre_mix_kernel", GATE_MUTANTS[name],
                    tmp_path, drop=["direct_register_custom_op("])
    monkeypatch.setitem(vllm_wheel._LOADED, "triton", mutant)

    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return vllm_wheel.make_triton(n, d, **kwargs)

    report = check_implementation(factory, profile="kernel", device=DEVICE, only=GATE_KILLERS)
    assert "published.step" in failed(report), [(r.id, r.status) for r in report.results]
    if name == "eps-dropped":
        step = next(r for r in report.results if r.id == "published.step")
        assert "saturated gate logits" in str(step.message), step.message


@pytest.mark.slow
@pytest.mark.skipif(MODE.name == "unavailable", reason=MODE.reason)
def test_unmutated_gate_passes_the_saturated_comparison() -> None:
    """The control: the wheel's own ``_mhc_pre_mix_kernel`` passes ``published.step`` (with its
    saturated-gate comparison) under the kernel profile."""
    report = check_implementation(vllm_wheel.make_triton, profile="kernel", device=DEVICE,
                                  only=["published.step"])
    assert "published.step" not in failed(report), [(r.id, r.status, r.message)
                                                    for r in report.results]
    assert any(r.id == "published.step" and r.status == "passed" for r in report.results)
