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
``parameters``. Not offered: ``reduce`` (DeepSeek-V4's head has its own tensors) and
``custom_ops`` (its forward crosses through the bridge, not through registered ops).

TARGET ``llama_cpp:qwen4-exp`` (:func:`make_qwen4_exp`): one Qwen4-exp hyper-connection as
``src/models/qwen4exp.cpp`` composes it for a layer (fused, the default): ``build_hc_mix``
(lines 270–324: ``ggml_rms_norm`` over each stream times the folded gamma, ``ggml_mul_mat``
down, ``ggml_scale`` 1/hc, ``ggml_silu``, ``ggml_mul_mat`` up, the fused
``ggml_dsv4_hc_pre_gated(xn, gate, 1/hc)`` at line 296, ``ggml_mul_mat`` inject) and
``build_hc_combine`` (lines 326–349: ``2σ(inject/hc)``, the fused ``ggml_dsv4_hc_post`` with
a NULL ``comb``, line 341: the identity). Declared: ``read="elementwise"`` with ``read_map``
(the branch input and ``h_post`` ggml computes; ggml has no per-element ``h_pre`` to report),
``residual_mixing="identity"``, kind ``hc-dynamic``, the published ``qwen4-exp`` layout
(``published_parameters``/``load_published``: transformers' tensor names; the adapter folds
the norm's gamma to ``1 + w`` as llama.cpp's converter does, conversion/qwen.py lines
401–402), float32, forward only, any ``n >= 2`` (neither ``ggml_dsv4_hc_pre_gated`` nor
``ggml_dsv4_hc_post`` asserts a count, ggml.c lines 6519–6618; qwen4exp.cpp line 52 refuses a
count <= 1 as transformers' config does), ``norm_eps = 1e-6``. Parameters drawn from ``seed``
(NumPy): ``hc_norm.weight ~ N(0, 0.1²)`` (non-zero, so the gamma is exercised), the three
projections ``~ N(0, 0.02²)``, low rank :data:`GATED_RANK`. Capabilities: ``read_map``,
``custom_ops`` (its forward is two ``torch.library`` custom ops, :func:`qwen4exp_read` and
:func:`qwen4exp_write`, with fake kernels, the branch between them: ``customop.opcheck`` and
``customop.export`` run; ``vmap`` and ``double_backward`` are not declared),
``published_parameters``/``load_published``, ``threads``, ``parameters``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import torch

from hcspec.conformance.adapters._capture import check_branch_output, check_state
from hcspec.conformance.adapters.declarations.llama_cpp import WRITTEN_FOR
from hcspec.conformance.bridge import Built, FlatFunction, Sublayer, cross
from hcspec.conformance.native import ggml, ggml_steps
from hcspec.conformance.native.framework import (
    NativeConnection,
    NativeFramework,
    ThreadedNativeConnection,
    native_target,
)
from hcspec.conformance.native.worker import shared_worker
from hcspec.conformance.protocol import Conventions, Weights

__all__ = ["GATED_RANK", "NO_BACKWARD", "SETTINGS", "WRITTEN_FOR", "LlamaCppQwen4ExpConnection",
           "LlamaCppV4Connection", "conventions", "gated_conventions", "make_deepseek_v4",
           "make_qwen4_exp"]

SETTINGS: Final = ggml_steps.Settings(hc_eps=1e-6, norm_eps=1e-6, sinkhorn_iters=20)
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


def _settings(threads: int) -> ggml_steps.Settings:
    backend = ggml.Backend(os.environ.get(BACKEND_ENV) or "CPU", threads)
    return ggml_steps.Settings(SETTINGS.hc_eps, SETTINGS.norm_eps, SETTINGS.sinkhorn_iters, backend)


def _build(n: int, d: int, layer_index: int, seed: int, threads: int) -> Built:
    del layer_index  # no layer-dependent initialisation
    rng = np.random.default_rng(seed)
    params = {"hc_fn": (rng.standard_normal(((n + 2) * n, n * d)) * FN_STD).astype(np.float32),
              "hc_scale": np.ones(3, dtype=np.float32),
              "hc_base": np.zeros((n + 2) * n, dtype=np.float32)}
    s = _settings(threads)
    sublayer = Sublayer(read=functools.partial(ggml_steps.sublayer_read, s),
                        write=functools.partial(ggml_steps.sublayer_write, s),
                        weights=functools.partial(ggml_steps.sublayer_weights, s))
    return Built(params, sublayer)


def _extras(threads: int) -> Mapping[str, Callable[..., Any]]:
    return {"logits": functools.partial(ggml_steps.sublayer_logits, _settings(threads))}


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


# --- llama_cpp:qwen4-exp -----------------------------------------------------------------------
GATED_RANK: Final = 4
"""The low rank r of the drawn Qwen4-exp projections (any r is the same step)."""

GATED_NORM_EPS: Final = 1e-6
"""Qwen4-exp's ``rms_norm_eps`` (the group RMSNorm of the hyper-connection)."""

NORM_STD: Final = 0.1
"""Standard deviation of the drawn ``hc_norm.weight`` (the gamma is ``1 + w``)."""


def gated_conventions() -> Conventions:
    """What the ``llama_cpp:qwen4-exp`` target declares (see the module docstring)."""
    return Conventions(
        compute_dtype=torch.float32, output_dtype=torch.float32, read="elementwise",
        residual_mixing="identity", published="qwen4-exp",
        notes=(f"llama.cpp ggml (llama-cpp-python {WRITTEN_FOR}) CPU backend through ctypes "
               "in a worker process: Qwen4-exp's hyper-connection as src/models/qwen4exp.cpp "
               "composes it (build_hc_mix with the fused ggml_dsv4_hc_pre_gated, "
               "build_hc_combine with ggml_dsv4_hc_post and a NULL comb: H_res = I); the norm "
               "gamma folded to 1 + w as the converter does; float32 in and out; no size "
               "asserted by the ops (n >= 2 as the model's loader)"))


def _gated_build(n: int, d: int, layer_index: int, seed: int, threads: int) -> Built:
    del layer_index  # no layer-dependent initialisation
    if n < 2:
        raise ValueError(f"llama_cpp:qwen4-exp: n = {n}, but qwen4exp.cpp refuses a "
                         "hyper-connection count <= 1")
    rng = np.random.default_rng(seed)
    nd, r = n * d, GATED_RANK

    def normal(std: float, *shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    drawn = (normal(NORM_STD, nd), normal(FN_STD, r, nd), normal(FN_STD, nd, r),
             normal(FN_STD, n, nd))
    params = dict(zip(ggml_steps.GATED_NAMES, drawn, strict=True))
    s = _gated_settings(threads)
    sublayer = Sublayer(read=functools.partial(ggml_steps.gated_read, s),
                        write=functools.partial(ggml_steps.gated_write, s))
    return Built(params, sublayer)


def _gated_settings(threads: int) -> ggml_steps.Settings:
    backend = ggml.Backend(os.environ.get(BACKEND_ENV) or "CPU", threads)
    return ggml_steps.Settings(hc_eps=0.0, norm_eps=GATED_NORM_EPS, sinkhorn_iters=0,
                         backend=backend)


def _gated_extras(threads: int) -> Mapping[str, Callable[..., Any]]:
    return {"read_map": functools.partial(ggml_steps.gated_read, _gated_settings(threads))}


def _gated_call(fn: Callable[..., Any], threads: int, *inputs: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
    """``fn(settings, ...)`` (a gated sublayer function) in the shared worker on ``inputs``
    (the parameters first, in :data:`ggml_steps.GATED_NAMES` order, then the arrays)."""
    framework = NativeFramework("ggml", shared_worker(), NO_BACKWARD)
    flat = FlatFunction(functools.partial(fn, _gated_settings(threads)), ggml_steps.GATED_NAMES,
                        fn is ggml_steps.gated_write)
    with torch.no_grad():
        return cross(framework, flat, *inputs)


@torch.library.custom_op("hcspec_ggml::qwen4exp_read", mutates_args=())
def qwen4exp_read(x: torch.Tensor, norm: torch.Tensor, down: torch.Tensor, up: torch.Tensor,
                  inject: torch.Tensor, threads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Custom op: ggml's Qwen4-exp read (:func:`ggml_steps.gated_read`, ``build_hc_mix`` and the
    write weights) on ``x [B,T,n,d]`` with the published tensors (``hc_norm.weight``,
    ``input_mix_weight_down``, ``input_mix_weight_up``, ``block_inject_weight``): ``(x_in
    [B,T,d], h_post [B,T,n])``, float32, on ``x``'s device; ``threads`` CPU threads. No
    autograd formula (ggml has no backward).

    Raises:
        NativeFault: the worker died.
    """
    x_in, h_post = _gated_call(ggml_steps.gated_read, threads, norm, down, up, inject, x)
    return x_in, h_post


@qwen4exp_read.register_fake
def _qwen4exp_read_fake(x: torch.Tensor, norm: torch.Tensor, down: torch.Tensor,
                        up: torch.Tensor, inject: torch.Tensor, threads: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    b, t, n, d = x.shape
    return (x.new_empty((b, t, d), dtype=torch.float32),
            x.new_empty((b, t, n), dtype=torch.float32))


@torch.library.custom_op("hcspec_ggml::qwen4exp_write", mutates_args=())
def qwen4exp_write(x: torch.Tensor, z: torch.Tensor, post: torch.Tensor,
                   threads: int) -> torch.Tensor:
    """Custom op: ggml's Qwen4-exp write (:func:`ggml_steps.gated_write`:
    ``ggml_dsv4_hc_post`` with a NULL comb): ``X' = X + post zᵀ`` for ``x [B,T,n,d]``,
    ``z [B,T,d]``, ``post [B,T,n]``; ``[B,T,n,d]`` float32 on ``x``'s device. No autograd formula.

    Raises:
        NativeFault: the worker died.
    """
    (out,) = _gated_call(ggml_steps.gated_write, threads, *_no_params(x), x, z, post)
    return out


@qwen4exp_write.register_fake
def _qwen4exp_write_fake(x: torch.Tensor, z: torch.Tensor, post: torch.Tensor,
                         threads: int) -> torch.Tensor:
    return x.new_empty(x.shape, dtype=torch.float32)


def _no_params(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Placeholders for the parameters :func:`ggml_steps.gated_write` ignores (one element each)."""
    return tuple(x.new_zeros(1, dtype=torch.float32) for _ in ggml_steps.GATED_NAMES)


class LlamaCppQwen4ExpConnection(ThreadedNativeConnection):
    """The proxy of one ggml Qwen4-exp hyper-connection (:class:`ThreadedNativeConnection`)
    with ``read_map(x)``, ``custom_ops(x)``, ``published_parameters()`` and
    ``load_published(params)``. Its forward calls two ``torch.library`` custom ops,
    :func:`qwen4exp_read` and :func:`qwen4exp_write` (each with a fake kernel giving its
    shapes), with the kit's branch between them, so ``torch.export`` captures the step.

    Shapes: ``x [B,T,n,d]``; outputs float32 (declared), no autograd graph.
    """

    def forward(self, x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]
                ) -> torch.Tensor:
        """The read op, the kit's ``branch`` once on ``x_in`` cast to ``x``'s dtype, the write
        op; float32 ``[B,T,n,d]``, no autograd graph.

        Raises:
            ValueError: ``x`` not ``[B,T,n,d]``; a branch output of another shape.
            NativeFault: the worker died.
        """
        check_state(x, self.n, self.d)
        with torch.no_grad():
            params = (p.detach() for p in self.params.values())
            x_in, h_post = qwen4exp_read(x, *params, self.thread_count)
            x_in = x_in.to(x.dtype)
            z = check_branch_output(branch(x_in), x_in)
            out: torch.Tensor = qwen4exp_write(x, z, h_post, self.thread_count)
        return out

    def custom_ops(self, x: torch.Tensor) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
        """The custom-op calls forward makes at ``x`` (capability ``custom_ops``), the branch
        being the identity: ``[(read op, (x, *params, threads), {}), (write op, (x, x_in,
        h_post, threads), {})]``. The tensors are detached: the ops have no autograd formula
        (ggml inference ops have no backward), so opcheck checks their schema, fake kernels and
        AOT dispatch of the forward."""
        x = x.detach()
        params = tuple(p.detach() for p in self.params.values())
        with torch.no_grad():
            x_in, h_post = qwen4exp_read(x, *params, self.thread_count)
        return [(torch.ops.hcspec_ggml.qwen4exp_read.default, (x, *params, self.thread_count),
                 {}),
                (torch.ops.hcspec_ggml.qwen4exp_write.default,
                 (x, x_in.to(x.dtype), h_post, self.thread_count), {})]

    def read_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_in [B,T,d], h_post [B,T,n])`` as ggml computes them at ``x`` (the graph of
        the forward's read).

        Raises:
            NativeFault: the worker died.
        """
        x_in, h_post = self.call_extra("read_map", x)
        return x_in, h_post

    def published_parameters(self) -> dict[str, object]:
        """The ``qwen4-exp`` tensors (the parameters themselves, transformers' names, the
        norm's ``w`` unfolded) and ``norm_eps``."""
        return {**self.params, "norm_eps": GATED_NORM_EPS}

    def load_published(self, params: Mapping[str, object]) -> None:
        """Set the parameters from ``qwen4-exp`` tensors of this target's shapes (cast to
        float32).

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


_MAKE_GATED = native_target("ggml", _gated_build, conventions=gated_conventions(),
                            no_backward=NO_BACKWARD, kind="hc-dynamic",
                            cls=LlamaCppQwen4ExpConnection, extras=_gated_extras)


def make_qwen4_exp(n: int, d: int, *, layer_index: int = 0,
                   dtype: torch.dtype = torch.float64, device: str = "cpu", seed: int = 0,
                   threads: int = 1) -> NativeConnection:
    """Factory (kit target form) for one Qwen4-exp hyper-connection computed by ggml (see the
    module docstring); ``threads`` is ggml's CPU thread count.

    Raises:
        ValueError: ``n < 2`` (as llama.cpp's loader), ``d`` not a positive int,
            ``layer_index < 0`` or ``seed < 0``.
    """
    return _MAKE_GATED(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                       threads=threads)
