"""Mutant: a decode path (one token, no gradients) that keeps its weights in a buffer it
allocates on the first decode call and fills only then: the refresh on reuse is missing, so
the second and later decode calls mix the new token with the first decode token's H_res,
h_pre and h_post. Prefill calls (more than one token) and the training path are correct, and
the first decode call is too.

Bug class: inference path ≠ training path on the second decode call (a stale cached buffer
in a serving engine's decode kernel). A single decode call after a prefill cannot show it.
Caught by: inference.repeated_calls (three successive decode calls, new tokens each).
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "inference path: a decode buffer filled on the first decode call only"
CAUGHT_BY = ("inference.repeated_calls",)


class StaleDecodeBuffer(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        if torch.is_grad_enabled() or x.shape[1] != 1:
            return super()._weights(x)
        buffer = self.__dict__.get("_decode_buffer")
        if buffer is None or buffer[0].shape[0] != x.shape[0]:
            buffer = tuple(w.detach().clone() for w in super()._weights(x))
            self.__dict__["_decode_buffer"] = buffer
        return buffer  # meant: copy this call's weights into the buffer every call


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(StaleDecodeBuffer, n, d, layer_index, dtype, device, seed, mhc_conventions())
