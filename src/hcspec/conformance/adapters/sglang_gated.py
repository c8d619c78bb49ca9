"""Adapter for SGLang 0.5.23's Qwen4-exp gated residual, from the released wheel: TARGET
``sglang:gated``.

**What runs.** ``GatedResidual`` of ``sglang/srt/layers/hyperconnection.py`` with the
configuration Qwen4-exp's decoder layer builds (``srt/models/qwen4_exp.py``:
``HyperConnectionConfig(hc_count, hidden_size, hc_lowrank, rms_norm_eps,
hc_per_branch_norm=True)``, so the norm is ``GroupedGemmaRMSNorm`` over ``n·d`` with one group a
stream). One step is what ``GatedResidualState`` (``layer_boundary/residual/gated.py``) calls for
the attention stage: its ``attn_mix`` (``GatedResidual.mix``: the grouped norm, the gate, the
mean of ``G ⊙ N``) returning ``(x_in, (X, N, partials))``, the branch on ``x_in``, then its
``attn_combine`` (``GatedResidual.combine``: ``X + 2σ(inject(N)/n) ⊗ F(x_in)``). The state class
itself is not imported: its package (``layer_boundary/__init__``) imports ``srt.configs``, which
needs transformers 5.19.0 and torchvision, which do not load next to a CPU torch 2.13; the
adapter makes the state's two calls itself (the lines of ``GatedResidualState._read`` and
``apply_attn_combine`` it stands in for pass the tuple through unchanged). ``reduce`` is the
model's ``hyper_connection_mixer`` (``GatedResidual(config, use_combine=False)``) as its
``_MixStreams`` calls it (``mix(x)[0]``); ``expand`` is ``_widen_streams`` (``n`` copies,
streams contiguous).

On a CPU the routes taken are the torch ones: ``_mix_compute`` and ``_combine_compute``
(``torch.compile``-d by the engine; the adapter runs them as the engine does, compiled, unless
``compiled=False``); the CUDA routes (the CuTe split-K ``hc_mix``, ``fused_hc_mix``, the JIT
combine, the decode gate stream ``hc_combine_gate``, the JIT grouped RMSNorm) need a GPU and are
named in ``tools/gpu_check.sh``.

Dtype: the parameters and the state in the kit's ``dtype`` (the model's is bfloat16: pass
``dtype=torch.bfloat16``); the grouped norm computes in float32 and casts back.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

import torch

from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.adapters._engine_gated import EngineGated

WRITTEN_FOR: Final = "0.5.23"
"""The SGLang release this adapter was read against."""

LOWRANK: Final = 4
"""``hc_lowrank`` of the adapter's config (the model's is 320; any r is the same step)."""

RMS_NORM_EPS: Final = 1e-6
"""``rms_norm_eps`` of the adapter's config (Qwen4-exp's)."""

MODULE: Final = "sglang.srt.layers.hyperconnection"
"""The module holding ``GatedResidual`` and ``HyperConnectionConfig``."""


_LOADED: dict[str, ModuleType] = {}
"""Imported modules by name (a test puts a mutant here)."""


def hyperconnection() -> Any:
    """``sglang.srt.layers.hyperconnection`` from the installed wheel (imported once; a module
    in ``_LOADED`` under :data:`MODULE` takes its place).

    Raises:
        ImportError: SGLang (or what the module imports: msgspec, Triton) is not installed.
        PackageChanged: the module has no ``GatedResidual`` taking the Qwen4-exp config.
    """
    module = _LOADED.get(MODULE)
    if module is None:
        module = _LOADED[MODULE] = importlib.import_module(MODULE)
    for name in ("GatedResidual", "HyperConnectionConfig", "GroupedGemmaRMSNorm"):
        if not hasattr(module, name):
            raise PackageChanged(f"{MODULE} has no {name} (written for SGLang {WRITTEN_FOR})")
    return module


def _eager(module: Any) -> None:
    """Replace the engine's ``torch.compile`` wrappers by the functions they wrap."""
    for name in ("_mix_compute", "_combine_compute"):
        fn = getattr(module, name)
        original = getattr(fn, "_torchdynamo_orig_callable", None)
        if original is None:
            raise PackageChanged(f"GatedResidual.{name} is not a torch.compile wrapper")
        object.__setattr__(module, name, original)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0, compiled: bool = True) -> EngineGated:
    """Factory for SGLang 0.5.23's ``GatedResidual`` as Qwen4-exp builds it, with a second one
    (``use_combine=False``) as ``reduce``; parameters in ``dtype`` drawn by the modules' own
    initialisation (norm weight 0, ``nn.Linear``'s default) under ``seed``. ``compiled=False``
    runs the engine's torch routes without ``torch.compile``.

    Raises:
        ImportError: SGLang is not installed. PackageChanged: the module changed.
    """
    del layer_index
    hc = hyperconnection()
    config = hc.HyperConnectionConfig(hc_count=n, hidden_size=d, params_dtype=dtype,
                                      hc_lowrank=LOWRANK, rms_norm_eps=RMS_NORM_EPS,
                                      hc_per_branch_norm=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        connection = hc.GatedResidual(config, use_mix=True, use_combine=True)
        mixer = hc.GatedResidual(config, use_combine=False)
    if not compiled:
        _eager(connection)
        _eager(mixer)
    notes = (f"SGLang {WRITTEN_FOR} wheel, srt/layers/hyperconnection.py GatedResidual "
             "(hc_per_branch_norm=True, as Qwen4-exp's layer builds it) called as "
             "GatedResidualState does: mix -> branch -> combine; x_in = mean_s(G_s ⊙ N_s), "
             "G = σ(up(silu(down(N)/n))), h_post = 2σ(inject(N)/n), X' = X + h_post ⊗ F(x_in) "
             "(H_res = I); the grouped RMSNorm in float32; reduce = "
             "hyper_connection_mixer.mix(x)[0]; "
             + ("torch.compile'd torch routes" if compiled else "eager torch routes")
             + f"; hc_lowrank {LOWRANK}")
    return EngineGated(connection, mixer, n, d, notes).to(dtype=dtype, device=device)
