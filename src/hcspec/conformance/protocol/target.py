"""The target side of the adapter protocol: the factory, the required impl and the optional
capabilities, each a ``typing.Protocol`` (see :mod:`hcspec.conformance.protocol`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import torch

from hcspec.spec.kinds import KINDS as KINDS  # the one vocabulary of kinds, defined by the spec
from hcspec.spec.kinds import Kind as Kind

Branch = Callable[[torch.Tensor], torch.Tensor]
"""A sublayer ``F``: ``[B, T, d] -> [B, T, d]`` (the kit injects it)."""

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""Effective per-token weights ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``."""

"""Static HC (HC §2.2), dynamic HC (HC §2.3, Eq. 10–13) and mHC (mHC §4, Eq. 7–9)."""

WEIGHTS: Final = "weights"
EXPAND: Final = "expand"
REDUCE: Final = "reduce"
PARAMETERS: Final = "parameters"
TRAIN_EVAL: Final = "train_eval"
LOGITS: Final = "logits"
STACK: Final = "stack"
ELEMENTWISE_WEIGHTS: Final = "elementwise_weights"
READ_MAP: Final = "read_map"
PUBLISHED_PARAMETERS: Final = "published_parameters"
LOAD_PUBLISHED: Final = "load_published"
THREADS: Final = "threads"
CUSTOM_OPS: Final = "custom_ops"
CAPABILITIES: Final[tuple[str, ...]] = (WEIGHTS, EXPAND, REDUCE, PARAMETERS, TRAIN_EVAL, LOGITS,
                                        STACK, PUBLISHED_PARAMETERS, LOAD_PUBLISHED, THREADS,
                                        ELEMENTWISE_WEIGHTS, READ_MAP, CUSTOM_OPS)
"""Names of the optional capabilities, as reported by :func:`capabilities`."""


@runtime_checkable
class HyperConnectionImpl(Protocol):
    """One hyper-connected sublayer (the required part of the protocol).

    Attributes:
        n: expansion rate (number of residual streams), ≥ 1.
        d: hidden size, ≥ 1.
        kind: ``"hc-static"``, ``"hc-dynamic"`` or ``"mhc"``.
    """

    n: int
    d: int
    kind: str

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``X' = H_res X + h_post F(h_preᵀ X)ᵀ``: ``x [B,T,n,d] -> [B,T,n,d]``, same dtype and
        device as ``x``; ``branch`` (``[B,T,d] -> [B,T,d]``) is called exactly once."""
        ...


@runtime_checkable
class SupportsWeights(Protocol):
    """Optional: the effective per-token weights at ``x``."""

    def weights(self, x: torch.Tensor) -> Weights:
        """``x [B,T,n,d]`` -> ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``."""
        ...


@runtime_checkable
class SupportsExpand(Protocol):
    """Optional: stream expansion at the network input (HC: ``X₀ = 1_n h₀ᵀ``)."""

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """``h [B,T,d]`` -> ``[B,T,n,d]``."""
        ...


@runtime_checkable
class SupportsReduce(Protocol):
    """Optional: stream reduction at the network output (HC: ``h_L = 1ᵀ X_L``)."""

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B,T,n,d]`` -> ``[B,T,d]``."""
        ...


@runtime_checkable
class SupportsParameters(Protocol):
    """Optional: the learnable tensors (as ``torch.nn.Module.parameters``)."""

    def parameters(self) -> Iterable[torch.Tensor]:
        """Every learnable tensor; the kit may modify them in place under ``no_grad``."""
        ...


@runtime_checkable
class SupportsTrainEval(Protocol):
    """Optional: training/evaluation mode switch (as on ``torch.nn.Module``)."""

    def train(self, mode: bool = True) -> Any:
        """Set training mode."""
        ...

    def eval(self) -> Any:
        """Set evaluation mode."""
        ...


@runtime_checkable
class SupportsElementwiseWeights(Protocol):
    """Optional: the element-wise read and the write at ``x`` (``conventions.read =
    "elementwise"``)."""

    def elementwise_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [B,T,n,d]`` -> ``(h_pre [B,T,n,d], h_post [B,T,n])``: ``x_in = Σ_s h_pre_s ⊙
        X_s``; differentiable w.r.t. ``x``."""
        ...


@runtime_checkable
class SupportsReadMap(Protocol):
    """Optional: the branch input and the write at ``x`` (a read that is not per-stream)."""

    def read_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [B,T,n,d]`` -> ``(x_in [B,T,d], h_post [B,T,n])``."""
        ...


@runtime_checkable
class SupportsLogits(Protocol):
    """Optional (mHC): the pre-activation logits at ``x`` (mHC Eq. 7)."""

    def logits(self, x: torch.Tensor) -> Weights:
        """``x [B,T,n,d]`` -> ``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])``, the
        arguments of σ, c·σ and Sinkhorn–Knopp; ``H̃_res[i, j]`` belongs to ``H_res[i, j]``
        of ``weights`` (row convention)."""
        ...


@runtime_checkable
class Stack(Protocol):
    """What :meth:`SupportsStack.stack` returns: ``layers`` consecutive sublayers run with the
    implementation's own carried state.

    Required: ``n``, ``d``, ``layers`` and :meth:`forward`. Optional, detected by presence
    (:func:`has_stack_weights`, :func:`has_stack_sublayer`, :func:`has_parameters`):

    * ``weights(x, branches) -> list[Weights]`` — one ``(h_pre [B,T,n], h_post [B,T,n],
      H_res [B,T,n,n])`` per sublayer: the coefficients each sublayer actually used in that run
      (carried ones included), in the row form ``X' = H_res X + h_post F(h_preᵀ X)ᵀ``; calls
      each branch once, as :meth:`forward` does.
    * ``sublayer(k) -> HyperConnectionImpl`` — sublayer ``k`` (0 ≤ k < layers) alone, with the
      same parameters and no carried state (it computes its own coefficients from its own
      input), offering ``weights(x)`` when it can.
    * ``parameters() -> Iterable[Tensor]`` — every trainable tensor of the ``layers``
      sublayers (the kit perturbs them in place, under ``no_grad``, on a fresh stack).
    * ``load_published(checkpoint)`` — for a target declaring ``published="deepseek-v4"``:
      load a DeepSeek-V4 checkpoint's hyper-connection tensors by their key names,
      ``layers.{i}.hc_{attn|ffn}_{fn,scale,base}`` into sublayers ``2i`` (attention) and
      ``2i + 1`` (FFN) (:func:`hcspec.spec.published.deepseek_v4_checkpoint_key`), with the
      target's own loader (``published.stack_checkpoint``).

    The carry design is declared, never assumed (read by :func:`stack_pre_mix`): the optional
    attribute ``pre_mix_from`` (:data:`StackPreMix`) says which state the pre-mix ``h_pre`` of
    sublayer k is computed from.

    * ``"own_input"`` (the default when absent): every coefficient of sublayer k — carried or
      not — is what sublayer k computes from its own input ``X_k``, so the stack equals running
      the sublayers one by one (the reference stack; a fused pre of the next sublayer computed
      from the state just written).
    * ``"previous_input"``: DeepSeek-V4.1's single pass — sublayer k ≥ 1 collapses ``X_k`` with
      the ``h_pre`` that sublayer k − 1 computed from *its* input ``X_{k−1}``, sublayer 0 with
      the fixed pre-mix ``initial_pre_mix`` (a ``[n]`` tensor, e.g. the one-hot ``e_0`` that
      reads stream 0); ``h_post`` and ``H_res`` of sublayer k come from ``X_k``. The attribute
      ``initial_pre_mix`` is then required.

    Attributes:
        n: expansion rate. d: hidden size. layers: number of sublayers, ≥ 1.
    """

    n: int
    d: int
    layers: int

    def forward(self, x: torch.Tensor, branches: Sequence[Branch]) -> torch.Tensor:
        """``x [B,T,n,d] -> X_L [B,T,n,d]`` through the ``layers`` sublayers in order, calling
        ``branches[k]`` (``[B,T,d] -> [B,T,d]``) exactly once, for sublayer k."""
        ...


@runtime_checkable
class SupportsStack(Protocol):
    """Optional: ``layers`` consecutive sublayers starting at this impl's ``layer_index``,
    run with the implementation's own carried state (capability ``stack``)."""

    def stack(self, layers: int) -> Stack:
        """A fresh :class:`Stack` of ``layers`` (≥ 1) sublayers; sublayer 0 has the
        factory's ``layer_index``, sublayer k the index ``layer_index + k``, each its own
        parameters."""
        ...


@runtime_checkable
class SupportsThreads(Protocol):
    """Optional: native code with its own thread pool (capability ``threads``)."""

    def threads(self, count: int) -> HyperConnectionImpl:
        """An impl with the same parameters computing with ``count`` (>= 1) threads."""
        ...


class Factory(Protocol):
    """A target: builds one fresh impl per call (see the module docstring)."""

    def __call__(
        self,
        n: int,
        d: int,
        *,
        layer_index: int = 0,
        dtype: torch.dtype = torch.float64,
        device: str = "cpu",
        seed: int = 0,
    ) -> HyperConnectionImpl:
        """Build the sublayer ``layer_index`` with expansion rate ``n`` and hidden size ``d``."""
        ...
