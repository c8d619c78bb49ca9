"""Adapter for llama.cpp's ggml hyper-connection ops (native C, through ctypes), written
against the ggml vendored by llama-cpp-python :data:`WRITTEN_FOR` (llama.cpp 0c1e5709).
TARGET ``llama_cpp:deepseek-v4``.

**What runs.** ggml's CPU backend, built by ``python -m hcspec.conformance.native.build`` (or
found through ``$HC_GGML_LIB``), computes one DeepSeek-V4 sublayer exactly as
``src/models/deepseek4.cpp`` composes it (``build_hc_pre`` lines 353–409, ``build_hc_post``
lines 411–423): the mixes with ggml's public primitives (``ggml_rms_norm``, ``ggml_mul_mat``,
``ggml_mul``/``ggml_add``, ``ggml_sigmoid``, ``ggml_scale_bias``, ``ggml_scale``) and the three
fused ops (``ggml_dsv4_hc_comb``, ``ggml_dsv4_hc_pre``, ``ggml_dsv4_hc_post``), each call cited
in :mod:`hcspec.conformance.native.ggml`. Every call runs in a worker process
(:mod:`hcspec.conformance.native.framework`): the state crosses as float32, the branch runs in
the kit's process between the worker's read and write, and an abort in ggml (its
``GGML_ASSERT``) becomes a failed property with the assert's line.

**Declared.** n = 4 only (``ggml_dsv4_hc_comb`` asserts ``hc == 4``; the factory refuses other
n, so those cases are skipped as unsupported), float32 compute and outputs, forward only
(``no_backward``: "ggml inference ops have no backward"), the published ``deepseek-v4``
layout (the tensors ``hc_fn [(n+2)n, n·d]``, ``hc_scale [3]``, ``hc_base [(n+2)n]`` are what
ggml receives, ggml's shapes being these reversed), Sinkhorn–Knopp from the softmax with
``hc_eps`` added and in every denominator, 20 iterations counted from the softmax, rows exact
(ggml's last normalisation is over ``src`` for each ``dst``, i.e. the rows of ``H_res =
combᵀ``), ``h_pre = σ + hc_eps``, ``h_post = 2σ``. Settings: ``hc_eps = norm_eps = 1e-6``,
``sinkhorn_iters = 20`` (DeepSeek-V4's config).

**Parameters.** llama.cpp loads them from a GGUF file and has no initialiser; the factory
draws ``hc_fn ~ N(0, 0.02²)`` from ``seed`` (NumPy), ``hc_scale = 1``, ``hc_base = 0``, kept in
float32 as the GGUF keeps them; ``layer_index`` has no effect.

The backend is ggml's CPU backend unless ``$HC_GGML_BACKEND`` names another device of the
build (``CUDA0``: tools/gpu_check.sh); the thread count applies to the CPU backend.

Capabilities: ``weights`` (the ``pre``/``post``/``comb`` ggml computes, row form), ``logits``,
``published_parameters``/``load_published``, ``threads`` (ggml's CPU thread count), and
``parameters``. Not offered: ``reduce`` (DeepSeek-V4's head has its own tensors).

``llama_cpp:qwen4-exp`` (``ggml_dsv4_hc_pre_gated`` + ``ggml_dsv4_hc_post`` with a NULL
``comb``; :func:`hcspec.conformance.native.ggml.pre_gated` is bound) is one more factory
here — a ``build`` with those two sublayer functions passed to
:func:`~hcspec.conformance.native.framework.native_target` — once the kit has the gated law.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import torch

from hcspec.conformance.adapters.declarations.llama_cpp import WRITTEN_FOR
from hcspec.conformance.bridge import Built, Sublayer
from hcspec.conformance.native import ggml
from hcspec.conformance.native.framework import (
    NativeConnection,
    ThreadedNativeConnection,
    native_target,
)
from hcspec.conformance.protocol import Conventions, Weights

__all__ = ["NO_BACKWARD", "SETTINGS", "WRITTEN_FOR", "LlamaCppV4Connection", "conventions",
           "make_deepseek_v4"]

SETTINGS: Final = ggml.Settings(hc_eps=1e-6, norm_eps=1e-6, sinkhorn_iters=20)
"""DeepSeek-V4's hyper-connection settings (its config: hc_eps, rms_norm_eps, hc_sinkhorn_iters)."""

NO_BACKWARD: Final = "ggml inference ops have no backward"
"""The declared reason the gradient properties are not applicable."""

FN_STD: Final = 0.02
"""Standard deviation of the drawn ``hc_fn``."""


def conventions() -> Conventions:
    """What the ``llama_cpp:deepseek-v4`` target declares (see the module docstring)."""
    s = SETTINGS
    return Conventions(
        sinkhorn_iterations=s.sinkhorn_iters, sinkhorn_variant="softmax",
        sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=s.hc_eps,
        sinkhorn_denominator_eps=s.hc_eps, sinkhorn_exact_axis="rows", h_pre_eps=s.hc_eps,
        compute_dtype=torch.float32, output_dtype=torch.float32,
        supported_expansion_rates=(4,), published="deepseek-v4",
        notes=(f"llama.cpp ggml (llama-cpp-python {WRITTEN_FOR}) CPU backend through ctypes "
               "in a worker process: the DeepSeek-V4 step as src/models/deepseek4.cpp composes "
               "it (fused ggml_dsv4_hc_comb/hc_pre/hc_post); H_res = combᵀ; float32 in and "
               "out; ggml_dsv4_hc_comb asserts hc == 4"))


BACKEND_ENV: Final = "HC_GGML_BACKEND"
"""Environment variable naming the ggml backend device the target computes on (``CUDA0`` with
a CUDA build, see tools/gpu_check.sh); unset: ``CPU``."""


def _settings(threads: int) -> ggml.Settings:
    backend = ggml.Backend(os.environ.get(BACKEND_ENV) or "CPU", threads)
    return ggml.Settings(SETTINGS.hc_eps, SETTINGS.norm_eps, SETTINGS.sinkhorn_iters, backend)


def _build(n: int, d: int, layer_index: int, seed: int, threads: int) -> Built:
    del layer_index  # no layer-dependent initialisation
    rng = np.random.default_rng(seed)
    params = {"hc_fn": (rng.standard_normal(((n + 2) * n, n * d)) * FN_STD).astype(np.float32),
              "hc_scale": np.ones(3, dtype=np.float32),
              "hc_base": np.zeros((n + 2) * n, dtype=np.float32)}
    s = _settings(threads)
    sublayer = Sublayer(read=functools.partial(ggml.sublayer_read, s),
                        write=functools.partial(ggml.sublayer_write, s),
                        weights=functools.partial(ggml.sublayer_weights, s))
    return Built(params, sublayer)


def _extras(threads: int) -> Mapping[str, Callable[..., Any]]:
    return {"logits": functools.partial(ggml.sublayer_logits, _settings(threads))}


class LlamaCppV4Connection(ThreadedNativeConnection):
    """The proxy of one ggml DeepSeek-V4 sublayer (:class:`ThreadedNativeConnection`) with
    ``logits(x)``, ``published_parameters()`` and ``load_published(params)``.

    Shapes: ``x [B,T,4,d]``; outputs float32 (declared), no autograd graph.
    """

    def logits(self, x: torch.Tensor) -> Weights:
        """``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])``: ``mixes · hc_scale +
        hc_base`` as ggml computes the mixes (row form of ``weights``)."""
        pre, post, res = self.call_extra("logits", x)
        return pre, post, res

    def published_parameters(self) -> dict[str, object]:
        """The published DeepSeek-V4 tensors ggml receives (the parameters themselves) and
        the settings."""
        return {**self.params, "hc_eps": SETTINGS.hc_eps, "norm_eps": SETTINGS.norm_eps,
                "sinkhorn_iters": SETTINGS.sinkhorn_iters}

    def load_published(self, params: Mapping[str, object]) -> None:
        """Set the parameters from published DeepSeek-V4 tensors (cast to float32).

        Raises:
            KeyError: a tensor is missing. ValueError: a tensor of another shape.
        """
        with torch.no_grad():
            for key, target in self.params.items():
                source = params[key]
                if not isinstance(source, torch.Tensor) or source.shape != target.shape:
                    raise ValueError(f"load_published: {key} must be a tensor of shape "
                                     f"{tuple(target.shape)}")
                target.copy_(source.to(dtype=target.dtype, device=target.device))


_MAKE = native_target("ggml", _build, conventions=conventions(), no_backward=NO_BACKWARD,
                      cls=LlamaCppV4Connection, extras=_extras)


def make_deepseek_v4(n: int, d: int, *, layer_index: int = 0,
                     dtype: torch.dtype = torch.float64, device: str = "cpu", seed: int = 0,
                     threads: int = 1) -> NativeConnection:
    """Factory (kit target form) for one DeepSeek-V4 sublayer computed by ggml (see the module
    docstring); ``threads`` is ggml's CPU thread count.

    Raises:
        ValueError: ``n != 4`` (declared), ``d`` not a positive int, ``layer_index < 0`` or
            ``seed < 0``.
    """
    return _MAKE(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                 threads=threads)
