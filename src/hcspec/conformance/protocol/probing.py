"""Probing an impl: which optional capabilities it offers (detected by presence, each a
``TypeGuard``), a stack's carry design, and the check of the protocol's required part."""

from __future__ import annotations

import difflib
from typing import Any, TypeGuard, cast

import torch

from hcspec.conformance.protocol.conventions import _STACK_PRE_MIXES, StackPreMix
from hcspec.conformance.protocol.target import (
    CUSTOM_OPS,
    ELEMENTWISE_WEIGHTS,
    EXPAND,
    LOAD_PUBLISHED,
    LOGITS,
    PARAMETERS,
    PUBLISHED_PARAMETERS,
    READ_MAP,
    REDUCE,
    STACK,
    THREADS,
    TRAIN_EVAL,
    WEIGHTS,
    SupportsElementwiseWeights,
    SupportsExpand,
    SupportsLogits,
    SupportsParameters,
    SupportsReadMap,
    SupportsReduce,
    SupportsStack,
    SupportsThreads,
    SupportsTrainEval,
    SupportsWeights,
)
from hcspec.spec.kinds import KINDS as KINDS  # the one vocabulary of kinds, defined by the spec
from hcspec.spec.kinds import Kind as Kind


def has_weights(impl: object) -> TypeGuard[SupportsWeights]:
    """``impl`` offers ``weights(x)`` (capability ``weights``)."""
    return callable(getattr(impl, WEIGHTS, None))


def has_expand(impl: object) -> TypeGuard[SupportsExpand]:
    """``impl`` offers ``expand(h)`` (capability ``expand``)."""
    return callable(getattr(impl, EXPAND, None))


def has_reduce(impl: object) -> TypeGuard[SupportsReduce]:
    """``impl`` offers ``reduce(x)`` (capability ``reduce``)."""
    return callable(getattr(impl, REDUCE, None))


def has_parameters(impl: object) -> TypeGuard[SupportsParameters]:
    """``impl`` offers ``parameters()`` (capability ``parameters``)."""
    return callable(getattr(impl, PARAMETERS, None))


def has_train_eval(impl: object) -> TypeGuard[SupportsTrainEval]:
    """``impl`` offers both ``train(mode)`` and ``eval()`` (capability ``train_eval``)."""
    return callable(getattr(impl, "train", None)) and callable(getattr(impl, "eval", None))


def has_elementwise_weights(impl: object) -> TypeGuard[SupportsElementwiseWeights]:
    """``impl`` offers ``elementwise_weights(x)`` (capability ``elementwise_weights``)."""
    return callable(getattr(impl, ELEMENTWISE_WEIGHTS, None))


def has_read_map(impl: object) -> TypeGuard[SupportsReadMap]:
    """``impl`` offers ``read_map(x)`` (capability ``read_map``)."""
    return callable(getattr(impl, READ_MAP, None))


def has_custom_ops(impl: object) -> bool:
    """``impl`` offers ``custom_ops(x)`` (capability ``custom_ops``): the ``torch.library``
    custom ops its forward calls on the state ``x [B,T,n,d]``, as a sequence of
    ``(op, args, kwargs)`` sample calls (``op`` a ``torch._ops.OpOverload`` or the object
    ``torch.library.custom_op`` returns)."""
    return callable(getattr(impl, CUSTOM_OPS, None))


def has_logits(impl: object) -> TypeGuard[SupportsLogits]:
    """``impl`` offers ``logits(x)`` (capability ``logits``)."""
    return callable(getattr(impl, LOGITS, None))


def has_stack(impl: object) -> TypeGuard[SupportsStack]:
    """``impl`` offers ``stack(layers)`` (capability ``stack``)."""
    return callable(getattr(impl, STACK, None))


def has_stack_weights(stack: object) -> bool:
    """A :class:`Stack` that offers ``weights(x, branches)``."""
    return callable(getattr(stack, WEIGHTS, None))


def has_stack_sublayer(stack: object) -> bool:
    """A :class:`Stack` that offers ``sublayer(k)``."""
    return callable(getattr(stack, "sublayer", None))


def has_published_parameters(impl: object) -> bool:
    """``impl`` offers ``published_parameters()`` (capability ``published_parameters``)."""
    return callable(getattr(impl, PUBLISHED_PARAMETERS, None))


def has_load_published(impl: object) -> bool:
    """``impl`` offers ``load_published(params)`` (capability ``load_published``)."""
    return callable(getattr(impl, LOAD_PUBLISHED, None))


def has_threads(impl: object) -> TypeGuard[SupportsThreads]:
    """``impl`` offers ``threads(count)`` (capability ``threads``)."""
    return callable(getattr(impl, THREADS, None))


def stack_pre_mix(stack: object) -> tuple[StackPreMix, torch.Tensor | None]:
    """The carry design a :class:`Stack` declares: ``(pre_mix_from, initial_pre_mix)``, with
    ``("own_input", None)`` when it declares none; ``initial_pre_mix`` is the ``[n]`` pre-mix
    sublayer 0 reads with under ``"previous_input"`` (detached, as declared).

    Raises:
        ValueError: ``pre_mix_from`` is not one of :data:`StackPreMix`'s values, or
            ``"previous_input"`` comes without an ``initial_pre_mix`` tensor of shape ``[n]``.
    """
    design = getattr(stack, "pre_mix_from", "own_input")
    if design not in _STACK_PRE_MIXES:
        raise ValueError(f"stack.pre_mix_from: expected one of {_STACK_PRE_MIXES}, got "
                         f"{design!r}")
    if design == "own_input":
        return "own_input", None
    initial = getattr(stack, "initial_pre_mix", None)
    n = getattr(stack, "n", None)
    if not isinstance(initial, torch.Tensor) or tuple(initial.shape) != (n,):
        got = list(initial.shape) if isinstance(initial, torch.Tensor) else type(initial).__name__
        raise ValueError(f"stack.pre_mix_from = 'previous_input' needs initial_pre_mix, the [n] "
                         f"pre-mix sublayer 0 reads with (n = {n}); got {got}")
    return "previous_input", initial.detach()


def capabilities(impl: object) -> frozenset[str]:
    """The optional capabilities ``impl`` offers, detected by presence (names in
    :data:`CAPABILITIES`). ``train_eval`` needs both ``train`` and ``eval``.

    >>> import torch
    >>> sorted(capabilities(torch.nn.Linear(2, 2)))
    ['parameters', 'train_eval']
    >>> class Mixer:
    ...     def weights(self, x): ...
    >>> sorted(capabilities(Mixer()))
    ['weights']
    """
    checks = ((WEIGHTS, has_weights), (EXPAND, has_expand), (REDUCE, has_reduce),
              (PARAMETERS, has_parameters), (TRAIN_EVAL, has_train_eval), (LOGITS, has_logits),
              (STACK, has_stack),
              (PUBLISHED_PARAMETERS, has_published_parameters),
              (LOAD_PUBLISHED, has_load_published), (THREADS, has_threads),
              (ELEMENTWISE_WEIGHTS, has_elementwise_weights),
              (READ_MAP, has_read_map), (CUSTOM_OPS, has_custom_ops))
    return frozenset(name for name, offered in checks if offered(impl))


def check_required(impl: object) -> None:
    """Check the required part of the protocol.

    Raises:
        TypeError: ``impl`` lacks ``n``, ``d``, ``kind`` or a callable ``forward``, or ``n``/``d``
            are not positive ints; the message names what is missing.
        UnknownKind: (a ``ValueError``) ``kind`` is not one of :data:`KINDS`; the message
            names the closest kind (``'mHC'`` → ``'mhc'``).
    """
    missing = [name for name in ("n", "d", "kind") if not hasattr(impl, name)]
    if not callable(getattr(impl, "forward", None)):
        missing.append("forward(x, branch)")
    if missing:
        raise TypeError(
            f"the factory returned a {type(impl).__name__} without the required "
            f"{', '.join(missing)} (see hcspec.conformance.protocol.HyperConnectionImpl)"
        )
    for name in ("n", "d"):
        value = getattr(impl, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TypeError(f"impl.{name}: expected a positive int, got {value!r}")
    kind = cast(Any, impl).kind
    if kind not in KINDS:
        text = str(kind).lower()
        close = [k for k in KINDS if k == text] or difflib.get_close_matches(
            text, list(KINDS), n=1, cutoff=0.5)
        meant = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownKind(f"impl.kind: expected one of {KINDS}, got {kind!r}{meant}")


class UnknownKind(ValueError):
    """``impl.kind`` is not one of :data:`KINDS` (a declaration the kit cannot read: the run
    stops with a usage error, as for :class:`ConventionsError`)."""
