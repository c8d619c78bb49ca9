"""A stack of consecutive hyper-connected sublayers, optionally with a carried pre-mix in the
style of DeepSeek-V4.1's "single-pass" mHC.

A network runs its sublayers one after the other, each reading the previous one's full
multi-stream output (HC arXiv:2409.19606 §2.1, Eq. 1–5; mHC arXiv:2512.24880 Eq. 3–4):

    X_{k+1} = H_res,k X_k + h_post,k F_k(h_pre,kᵀ X_k)ᵀ,   k = 0 … L − 1.

Every sublayer's coefficients depend on the state entering it (dynamic HC, mHC). An
implementation can compute them *at the end of the previous sublayer*, from the new state it
has just written, and carry them (with the pre-mix ``x_in = h_preᵀ X``) into the next
sublayer — DeepSeek-V4.1 fuses the next sublayer's pre into the current one this way, so the
state is read once per sublayer. That is a reordering, not a different function: the stack
must equal running the sublayers one by one. :class:`HyperConnectionStack` does it both ways
(``carry=True``: carried; ``carry=False``: each sublayer computes its own) and reports the
coefficients each sublayer used, so the conformance kit's ``stack.*`` family can compare them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from hcspec.reference import _checks
from hcspec.reference.step import Branch, Weights, read, write
from hcspec.spec.published import DEEPSEEK_V4, deepseek_v4_checkpoint_key


@runtime_checkable
class Sublayer(Protocol):
    """What a stack needs of a sublayer (a :class:`hcspec.reference.connection.HyperConnection`
    is one): ``n``, ``d``, ``kind``, its ``weights(x) -> (h_pre, h_post, H_res)`` at its input
    ``x [B, T, n, d]`` and its ``forward(x, branch) -> x_next``."""

    n: int
    d: int

    @property
    def kind(self) -> str:
        """The kind (``hc-static``, ``hc-dynamic``, ``mhc``, ...)."""
        ...

    def weights(self, x: torch.Tensor) -> Weights:
        """The coefficients the sublayer computes from ``x``."""
        ...

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """The sublayer's own forward (the stack calls the module, so hooks run)."""
        ...


class HyperConnectionStack(nn.Module):
    """``L`` consecutive hyper-connected sublayers: ``stack(x, branches) -> X_L``.

    Attributes ``n``, ``d``, ``layers`` and ``kind`` and the methods follow the ``Stack`` of
    the conformance kit's protocol (its ``protocol.Stack``).

    Args:
        sublayers: the sublayers in order (each with its own parameters; the stack registers
            them as submodules, so :meth:`parameters` yields every one of theirs). They must
            share ``n``, ``d`` and ``kind``.
        carry: True (default): the single pass — sublayer 0 computes its coefficients from
            its input; every later sublayer k uses the coefficients ``(h_pre, h_post, H_res)``
            and pre-mix ``h_preᵀ X_k`` computed at the end of sublayer k − 1, from the state
            it has just written, with sublayer k's parameters. False: each sublayer's own
            ``forward`` on its input (the coefficients reported are its ``weights`` there; a
            module returning a coarser dtype hands the next one its output cast back to the
            input's dtype).

    Shapes: ``x [B, T, n, d] -> [B, T, n, d]``; ``branches[k]``: ``[B, T, d] -> [B, T, d]``,
    called exactly once, for sublayer k. Dtype/device: those of ``x`` (which must match the
    parameters).

    Raises:
        ValueError: no sublayer, or sublayers that differ in ``n``, ``d`` or ``kind``.
        TypeError: a sublayer that is not a hyper-connection module (:class:`Sublayer`).
    """

    def __init__(self, sublayers: Sequence[Sublayer], *, carry: bool = True) -> None:
        super().__init__()
        if not sublayers:
            raise ValueError("a stack needs at least one sublayer, got none")
        for k, module in enumerate(sublayers):
            if not isinstance(module, nn.Module) or not isinstance(module, Sublayer):
                raise TypeError(f"sublayer {k}: expected a hyper-connection module (n, d, kind, "
                                f"weights), got "
                                f"{type(module).__name__}")
        first = sublayers[0]
        for k, module in enumerate(sublayers):
            if (module.n, module.d, module.kind) != (first.n, first.d, first.kind):
                raise ValueError(
                    f"sublayer {k} has n={module.n}, d={module.d}, kind={module.kind!r}; "
                    f"sublayer 0 has n={first.n}, d={first.d}, kind={first.kind!r}")
        self.sublayers = nn.ModuleList(m for m in sublayers if isinstance(m, nn.Module))
        self.n, self.d, self.kind = first.n, first.d, first.kind
        self.layers = len(sublayers)
        self.carry = bool(carry)

    pre_mix_from = "own_input"
    """The carry design the conformance kit reads (``Stack.pre_mix_from``): carried or not,
    every coefficient of sublayer k is what sublayer k computes from its own input ``X_k``."""

    def forward(self, x: torch.Tensor, branches: Sequence[Branch]) -> torch.Tensor:
        """``X_L`` from ``X_0 = x`` through the sublayers in order.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``, ``branches`` does not hold one branch
                per sublayer, or a branch returns another shape than ``[B, T, d]``.
            TypeError: ``x`` is not a tensor, or has another dtype/device than the parameters.
        """
        return self._run(x, branches)[0]

    def weights(self, x: torch.Tensor, branches: Sequence[Branch]) -> list[Weights]:
        """The coefficients ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` each sublayer
        used in the run from ``x`` (carried ones included), in order; runs the stack (each
        branch called once). Differentiable w.r.t. ``x`` and the parameters.

        Raises:
            ValueError, TypeError: as :meth:`forward`.
        """
        return self._run(x, branches)[1]

    def sublayer(self, k: int) -> Sublayer:
        """Sublayer ``k`` alone (the very module, same parameters): it computes its own
        coefficients from its own input, with no carried state.

        Raises:
            IndexError: ``k`` is not in ``0 … layers − 1``.
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.layers:
            raise IndexError(f"sublayer {k!r}: expected an int in 0 … {self.layers - 1}")
        module = self.sublayers[k]
        assert isinstance(module, Sublayer)
        return module

    def load_published(self, checkpoint: Mapping[str, object]) -> None:
        """Load a DeepSeek-V4 checkpoint's hyper-connection tensors into the sublayers, by
        the checkpoint's own key names (the conformance kit's stack-level ``load_published``):
        sublayer ``k`` takes ``layers.{k // 2}.hc_{attn|ffn}_{fn,scale,base}`` (attention
        site for even ``k``, FFN site for odd;
        :func:`hcspec.spec.published.deepseek_v4_checkpoint_key`) through its own
        ``load_published``. Other keys are ignored.

        Raises:
            TypeError: a sublayer without the DeepSeek-V4 layout (``load_published``).
            KeyError: a key the sublayers need is missing (named).
            ValueError: a tensor of the wrong shape (as the sublayer's loader).
        """
        for k in range(self.layers):
            module = self.sublayer(k)
            names = getattr(module, "NAMES", None)
            loader = getattr(module, "load_published", None)
            if (names is None or getattr(names, "layout", None) != DEEPSEEK_V4
                    or not callable(loader)):
                raise TypeError(f"sublayer {k} ({type(module).__name__}) has no DeepSeek-V4 "
                                "layout to load a checkpoint into")
            params: dict[str, object] = {}
            for name in names.attributes:
                key = deepseek_v4_checkpoint_key(k, name)
                if key not in checkpoint:
                    raise KeyError(f"checkpoint has no {key!r} (sublayer {k}'s {name})")
                params[name] = checkpoint[key]
            loader(params)

    def _run(self, x: torch.Tensor,
             branches: Sequence[Branch]) -> tuple[torch.Tensor, list[Weights]]:
        x = _checks.stream_state(x, self.n, self.d)
        if len(branches) != self.layers:
            raise ValueError(f"expected one branch per sublayer ({self.layers}), got "
                             f"{len(branches)}")
        used: list[Weights] = []
        if not self.carry:  # each sublayer's own forward, its weights read at its input
            dtype = x.dtype
            for k, branch in enumerate(branches):
                module = self.sublayer(k)
                used.append(module.weights(x))
                out = self.sublayers[k](x, branch)  # the module's call: its hooks run
                # the next sublayer reads the state in the input's dtype (a module may return a
                # coarser one); the last one's output is returned as it is
                x = out.to(dtype) if k + 1 < self.layers else out
            return x, used
        # The single pass: the coefficients and pre-mix of sublayer k + 1 are computed at the
        # end of sublayer k, from the state it has just written, and carried.
        carried, x_in = self._pre_mix(0, x)
        for k, branch in enumerate(branches):
            _, h_post, H_res = carried
            x = write(x, self._branch(branch, x_in), h_post, H_res)
            used.append(carried)
            if k + 1 < self.layers:
                carried, x_in = self._pre_mix(k + 1, x)
        return x, used

    def _pre_mix(self, k: int, x: torch.Tensor) -> tuple[Weights, torch.Tensor]:
        """Sublayer k's coefficients at ``x`` and its pre-mix ``h_preᵀ x``."""
        weights = self.sublayer(k).weights(x)
        return weights, read(x, weights[0])

    @staticmethod
    def _branch(branch: Branch, x_in: torch.Tensor) -> torch.Tensor:
        return _checks.branch_output(branch(x_in), x_in.shape)

    def extra_repr(self) -> str:
        return f"layers={self.layers}, carry={self.carry}"
