"""Generating a case's inputs: the stream state (in the declared state domain), tangent
directions in that domain, and the branch the impl is handed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from hcspec.conformance import salts, strategies
from hcspec.conformance.machinery.errors import BranchMisuse
from hcspec.conformance.outputs import capture
from hcspec.conformance.salts import Salt
from hcspec.conformance.strategies import Case, CountingBranch


class CheckedBranch(CountingBranch):
    """A :class:`CountingBranch` that refuses an input other than a 3-D ``[B, T, d]`` tensor:
    a branch fed the n·d concatenation of the streams, or tokens folded into the batch
    (``[B·T, d]``), fails with a message naming the shape instead of an error deep inside
    the sublayer (the sublayer runs once per token on a d-vector).

    Raises (when called):
        BranchMisuse: the input is not a tensor, not 3-D, or its last axis is not ``d``.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], d: int,
                 record: bool = True) -> None:
        super().__init__(fn, record=record)
        self.d = d

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d:
            got = (f"tensor {list(x.shape)}" if isinstance(x, torch.Tensor)
                   else type(x).__name__)
            raise BranchMisuse(
                f"the branch received {got}, expected a [B, T, d] tensor with d={self.d} "
                "(the aggregate h_preᵀX: not the n·d concatenation of the streams, not the "
                "tokens folded into the batch)")
        return super().__call__(x)


@dataclass(frozen=True)
class Inputs:
    """The inputs of a case, in the run's dtype and device unless told otherwise.

    Attributes:
        dtype, device: the run's working dtype and device.
        replicated: the impl declares ``state_domain="replicated"`` (it accepts only
            stream-replicated states ``1_n hᵀ``).
    """

    dtype: torch.dtype
    device: str
    replicated: bool = False

    def state(self, case: Case, *, dtype: torch.dtype | None = None, device: str | None = None,
              salt: Salt = salts.STATE) -> torch.Tensor:
        """The case's stream state ``[B, T, n, d]`` drawn with ``salt`` (replicated across
        the streams when the impl declares ``state_domain="replicated"``)."""
        x = strategies.stream_state(case, dtype or self.dtype, device or self.device, salt)
        x = x[..., :1, :].expand_as(x).contiguous() if self.replicated else x
        capture.note_input("state", x)  # kept only while a failure is replayed
        return x

    def tangent(self, t: torch.Tensor) -> torch.Tensor:
        """``t [..., n, d]`` projected orthogonally on the declared state domain: unchanged
        for ``"any"``; the stream mean on every stream for ``"replicated"`` (so finite
        differences stay in the domain and gradients are compared on it)."""
        if not self.replicated:
            return t
        return t.mean(dim=-2, keepdim=True).expand_as(t).contiguous()

    def branch(self, case: Case, name: str | None = None, *, dtype: torch.dtype | None = None,
               device: str | None = None, record: bool = True) -> CheckedBranch:
        """A counting (and recording) branch of the case's (or the given) kind that refuses
        an input other than ``[B, T, d]`` (:class:`CheckedBranch`)."""
        fn = strategies.make_branch(name or case.branch, case.d, dtype or self.dtype,
                                    device or self.device, seed=case.seed)
        return CheckedBranch(fn, case.d, record=record)
