"""The checks an implementation applies to what the kit hands it (the stream state) and to what
its branch returns, with messages that give the expected and the received shape: shared by the
adapters (:mod:`hcspec.conformance.adapters`), the framework bridge
(:mod:`hcspec.conformance.bridge`) and the native targets (:mod:`hcspec.conformance.native`)."""

from __future__ import annotations

import torch


def check_state(x: object, n: int, d: int) -> torch.Tensor:
    """``x`` as a ``[B, T, n, d]`` stream state.

    Raises:
        ValueError: ``x`` is not a 4-D tensor with ``n`` streams of size ``d``; the message
            gives the expected and received shape.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or tuple(x.shape[2:]) != (n, d):
        got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"expected a stream state of shape [B, T, {n}, {d}], got {got}")
    return x


def check_branch_output(z: object, like: torch.Tensor) -> torch.Tensor:
    """The branch's output, checked to be a tensor shaped like its input ``like``.

    Raises:
        ValueError: not a tensor of ``like``'s shape; the message gives both.
    """
    if not isinstance(z, torch.Tensor) or z.shape != like.shape:
        got = list(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise ValueError(f"the branch must return a tensor of shape {list(like.shape)}, got {got}")
    return z
