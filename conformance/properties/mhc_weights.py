"""The mHC weight reader the families share: ``h_pre, h_post, H_res`` in float64 from the
target's ``weights(x)`` when it offers them, else probed (:meth:`Observer.probe
<hcspec.conformance.properties.observing.Observer.probe>`)."""

from __future__ import annotations

import torch

from hcspec.conformance.properties.base import Context, f64
from hcspec.conformance.protocol import HyperConnectionImpl, has_weights
from hcspec.conformance.strategies import Case


class MHCWeights:
    """h_pre, h_post, H_res (float64) from ``weights(x)`` when offered, else from probing.

    Attributes:
        probed: True when the impl has no ``weights(x)`` and the weights were probed.
        h_pre: ``[B, T, n]`` float64 on the run's device (None when probing could not read
            it); h_post ``[B, T, n]``, H_res ``[B, T, n, n]``, float64.
        source: ``"probed"`` or ``"reported"``, for the messages.

    Raises (from the constructor):
        PropertyFailure: the reported weights have the wrong form, or probing failed
            (:class:`~hcspec.conformance.properties.observing.Observer`).
    """

    def __init__(self, ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, case: Case):
        self.probed = not has_weights(impl)
        if self.probed:
            p = ctx.observe.probe(impl, x, case)
            self.h_pre: torch.Tensor | None = p.h_pre
            self.h_post, self.H_res = p.h_post, p.H_res
        else:
            h_pre, h_post, H_res = ctx.observe.weights(impl, x)
            self.h_pre, self.h_post, self.H_res = f64(h_pre), f64(h_post), f64(H_res)
        self.source = "probed" if self.probed else "reported"
