"""Adapter for ``nano-deepseek-v4`` (PyPI, import name ``nano_deepseek_v4``), written against
version :data:`WRITTEN_FOR`. TARGET ``nano_deepseek_v4:mhc``.

``nano_deepseek_v4.modeling.HyperConnection(config)`` is a DeepSeek-V4-style module (built
with :func:`hcspec.conformance.adapters.deepseek_v4_style.v4_style_target`): ``forward(streams
[B, T, n, d])`` returns ``(post, comb, collapsed)`` and the decoder layer composes
``streams = post.unsqueeze(-1) * F(norm(collapsed)).unsqueeze(-2) + torch.matmul(comb,
streams)``, so ``H_res = comb`` (``comb[j, i]`` weighs input stream i in output stream j).
What the module computes (read from the package source), all in float32 from an unweighted
RMS norm of ``vec(X)`` over n·d, cast back to the streams' dtype:

* ``pre = σ(·) + eps`` and ``post = σ(·) + eps`` with ``eps = hc_eps = 1e-6``: the H_post
  multiplier is **1** (the mHC paper and DeepSeek's own references use 2);
* ``comb = σ(·) + eps`` (a **sigmoid**, not ``exp``/softmax) followed by
  ``hc_sinkhorn_iters`` rounds (config default 8) of row then column normalisation, each
  ``M / (M.sum + eps)``: the columns are normalised last;
* ``collapsed = Σ_i pre_i X_i`` (the branch input; the decoder's RMSNorm lives inside ``F``).

The final reduction is ``HyperHead`` (a learned, input-dependent weighted sum, then the
model's RMSNorm): the adapter offers it as ``reduce`` (declared ``reduce="learned"``). The
module is initialised as the package does (``fn ~ N(0, initializer_range)``, ``base = 0``,
``scale = 1``) under the factory's seed; ``layer_index`` has no effect (no layer-dependent
init). ``forward`` is the module's plain call; ``weights`` reads ``pre`` from the module's own
computation (the tensor its ``pre.unsqueeze`` call receives, recorded with
:class:`~hcspec.conformance.adapters._capture.CallRecorder`), not recomputed.
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import CallRecorder, PackageChanged
from hcspec.conformance.adapters.declarations.nano_deepseek_v4 import WRITTEN_FOR
from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    PublishedTensors,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions

SINKHORN_ITERS: Final = 8
"""``DeepSeekV4Config.hc_sinkhorn_iters``'s default (the package's V4-Flash/Pro presets use
20)."""

HC_EPS: Final = 1e-6
"""``DeepSeekV4Config.hc_eps``'s default."""


class NanoLayerConnection(nn.Module):
    """One of nano's ``HyperConnection`` modules with the model's ``HyperHead`` beside it (the
    reduction the model applies after its last layer).

    Attributes:
        hc: ``nano_deepseek_v4.modeling.HyperConnection``.
        head: ``nano_deepseek_v4.modeling.HyperHead``.
    """

    def __init__(self, n: int, d: int, sinkhorn_iters: int) -> None:
        from nano_deepseek_v4.config import DeepSeekV4Config
        from nano_deepseek_v4.modeling import HyperConnection, HyperHead

        super().__init__()
        config = DeepSeekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=sinkhorn_iters)
        self.hc = HyperConnection(config)
        self.head = HyperHead(config)


def _build(sinkhorn_iters: int) -> Any:
    def build(n: int, d: int, layer_index: int) -> NanoLayerConnection:
        del layer_index  # nano's HyperConnection has no layer-dependent init
        return NanoLayerConnection(n, d, sinkhorn_iters)
    return build


def decompose(module: NanoLayerConnection, x: torch.Tensor) -> Decomposition:
    """Call nano's ``HyperConnection`` on ``x [B, T, n, d]``: its ``(post, comb, collapsed)``
    (the plain call, so ``torch.compile`` traces the package's code alone)."""
    post, comb, collapsed = module.hc(x)
    return Decomposition(pre=None, post=post, comb=comb, collapsed=collapsed)


def read_pre(module: NanoLayerConnection, x: torch.Tensor) -> torch.Tensor:
    """The ``pre [B, T, n]`` nano's ``HyperConnection`` collapses ``x`` with, recorded from its
    ``pre.unsqueeze(-1)`` call (for ``weights``; not recomputed).

    Raises:
        PackageChanged: the module's forward no longer makes exactly one ``unsqueeze`` call on a
            ``[B, T, n]`` tensor.
    """
    with CallRecorder((torch.Tensor.unsqueeze,)) as recorder:
        module.hc(x)
    pres = [c.args[0] for c in recorder.of(torch.Tensor.unsqueeze)
            if isinstance(c.args[0], torch.Tensor) and c.args[0].shape == x.shape[:3]]
    if len(pres) != 1:
        raise PackageChanged(
            f"nano-deepseek-v4: HyperConnection.forward no longer collapses with one "
            f"pre.unsqueeze(-1) (adapter written for {WRITTEN_FOR}); saw {len(pres)}")
    pre: torch.Tensor = pres[0]
    return pre


def reduce_with_head(module: NanoLayerConnection, x: torch.Tensor) -> torch.Tensor:
    """The model's final reduction, ``HyperHead(x) [B, T, d]`` (before its RMSNorm)."""
    out: torch.Tensor = module.head(x)
    return out


def conventions(sinkhorn_iters: int) -> Conventions:
    """What nano's ``HyperConnection`` declares (see the module docstring)."""
    return Conventions(
        branch_input="x_in", reduce="learned", compute_dtype=torch.float32,
        sinkhorn_iterations=sinkhorn_iters, sinkhorn_variant="sigmoid",
        sinkhorn_additive_eps=HC_EPS, sinkhorn_denominator_eps=HC_EPS,
        sinkhorn_iterations_count="rounds", sinkhorn_exact_axis="columns",
        h_pre_eps=HC_EPS, h_post_eps=HC_EPS, h_post_multiplier=1.0,
        notes=("nano-deepseek-v4 HyperConnection composed as its DeepSeekV4DecoderLayer does: "
               "post ⊗ F(collapsed) + comb @ streams (H_res = comb); weights in float32 from "
               "an unweighted RMS norm of vec(X), cast to the streams' dtype; pre = σ + eps, "
               "post = σ + eps (multiplier 1), comb = σ + eps then rows-then-columns "
               "Sinkhorn–Knopp with eps in the denominators; reduce = HyperHead (learned)"),
    )


def _settings(module: Any) -> dict[str, float]:
    return {"hc_eps": float(module.hc.eps), "norm_eps": float(module.hc.input_norm.eps),
            "sinkhorn_iters": int(module.hc.sinkhorn_iters)}


PUBLISHED: Final = PublishedTensors(
    "deepseek-v4", {"hc_fn": "hc.fn", "hc_scale": "hc.scale", "hc_base": "hc.base"}, _settings)
"""DeepSeek-V4's published layout in nano's ``HyperConnection``: a checkpoint's ``hc_fn`` /
``hc_scale`` / ``hc_base`` are its ``fn`` / ``scale`` / ``base`` (nano's loader maps the
names so); settings from its config (``hc_eps``, ``rms_norm_eps``, ``hc_sinkhorn_iters``)."""


def make_factory(sinkhorn_iters: int = SINKHORN_ITERS, build: Any = None) -> Any:
    """The kit factory for nano's ``HyperConnection`` with ``hc_sinkhorn_iters``; ``build``
    (``build(n, d, layer_index) -> module`` with ``.hc`` and ``.head``) replaces the package's
    module (for tests with a stand-in)."""
    return v4_style_target(
        build or _build(sinkhorn_iters), decompose, comb="target_source",
        conventions=conventions(sinkhorn_iters), reduce=reduce_with_head, read_pre=read_pre,
        published=PUBLISHED)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0, sinkhorn_iters: int = SINKHORN_ITERS) -> Any:
    """Factory (kit target form) for ``nano_deepseek_v4.modeling.HyperConnection`` built from a
    ``DeepSeekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=sinkhorn_iters)``.

    Raises:
        ImportError: nano-deepseek-v4 is not installed.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    factory = make_factory(sinkhorn_iters)
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
