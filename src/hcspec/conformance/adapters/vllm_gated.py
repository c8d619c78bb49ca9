"""Adapter for vLLM 0.33.0's Qwen4-exp gated residual, from the released wheel: TARGET
``vllm:qwen4-exp``.

**What runs.** ``GatedResidual`` of ``vllm/models/qwen4_exp/common/hyperconnection.py`` (the
torch implementation, with its ``GroupedGemmaRMSNorm``) built with the settings Qwen4-exp's
decoder layer passes (``HyperConnectionConfig(hc_count, hidden_size, hc_lowrank,
rms_norm_eps, hc_per_branch_norm=True)``: one norm group a stream, a weight per element of
``n·d``), called as the module's own docstring and the decoder layer do: ``mix`` (the grouped
norm, the low-rank gate, the gated mean), the branch, ``combine`` (``X + 2σ(inject(N)/n) ⊗
F(x_in)``). ``reduce`` is the model's ``hyper_connection_mixer`` (``use_combine=False``),
``mix(x)[0]``; ``expand`` is the model's ``repeat(1, hc_count)``.

The NVIDIA and AMD subclasses (``qwen4_exp/{nvidia,amd}/hyperconnection.py``: the CuTe DSL
``hc_down_silu``, fused ``combine_and_mix``, tensor-parallel linears) need a GPU and vLLM's
distributed state: ``tools/gpu_check.sh``.

Dtype: the parameters and the state in the kit's ``dtype`` (the model's is bfloat16); the
grouped norm computes in float32 and casts back; ``mix`` and ``combine`` cast to the state's
dtype.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

import torch

from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.adapters._engine_gated import EngineGated

WRITTEN_FOR: Final = "0.33.0"
"""The vLLM release this adapter was read against."""

MODULE: Final = "vllm.models.qwen4_exp.common.hyperconnection"
"""The module holding ``GatedResidual`` and ``HyperConnectionConfig``."""

LOWRANK: Final = 4
"""``hc_lowrank`` of the adapter's config (the model's is 320; any r is the same step)."""

RMS_NORM_EPS: Final = 1e-6
"""``rms_norm_eps`` of the adapter's config (Qwen4-exp's)."""


_LOADED: dict[str, ModuleType] = {}
"""Imported modules by name (a test puts a mutant here)."""


def hyperconnection() -> Any:
    """``vllm.models.qwen4_exp.common.hyperconnection`` from the installed wheel (imported once;
    a module in ``_LOADED`` under :data:`MODULE` takes its place).

    Raises:
        ImportError: vLLM (or what ``vllm.config`` imports) is not installed.
        PackageChanged: the module has no ``GatedResidual`` / ``HyperConnectionConfig``.
    """
    module = _LOADED.get(MODULE)
    if module is None:
        module = _LOADED[MODULE] = importlib.import_module(MODULE)
    for name in ("GatedResidual", "HyperConnectionConfig"):
        if not hasattr(module, name):
            raise PackageChanged(f"{MODULE} has no {name} (written for vLLM {WRITTEN_FOR})")
    return module


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> EngineGated:
    """Factory for vLLM 0.33.0's torch ``GatedResidual`` as Qwen4-exp builds it, with a second
    one (``use_combine=False``) as ``reduce``; parameters in ``dtype`` drawn by the modules'
    own initialisation (norm weight 0, ``nn.Linear``'s default) under ``seed``.

    Raises:
        ImportError: vLLM is not installed. PackageChanged: the module changed.
    """
    del layer_index
    hc = hyperconnection()
    config = hc.HyperConnectionConfig(hc_count=n, hidden_size=d, params_dtype=dtype,
                                      hc_lowrank=LOWRANK, rms_norm_eps=RMS_NORM_EPS,
                                      hc_per_branch_norm=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        connection = hc.GatedResidual(config, role="attn")
        mixer = hc.GatedResidual(config, use_combine=False)
    notes = (f"vLLM {WRITTEN_FOR} wheel, models/qwen4_exp/common/hyperconnection.py "
             "GatedResidual (hc_per_branch_norm=True, grouped GemmaRMSNorm in float32): mix -> "
             "branch -> combine; x_in = mean_s(G_s ⊙ N_s), G = σ(up(silu(down(N)/n))), h_post "
             "= 2σ(inject(N)/n), X' = X + h_post ⊗ F(x_in) (H_res = I); reduce = "
             f"hyper_connection_mixer.mix(x)[0]; hc_lowrank {LOWRANK}")
    return EngineGated(connection, mixer, n, d, notes).to(dtype=dtype, device=device)
