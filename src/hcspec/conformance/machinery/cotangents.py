"""Chaining a float64 cotangent through weights computed in a coarser dtype, without letting
autograd round the kit's own reference: the cotangent split into pieces representable in the
weight's dtype (:func:`representable_parts`) and one backward per weight and piece, summed in
float64 (:func:`chained`). Used by the closed-form gradient checks (``gradients.closed_form``,
``gradients.closed_form_probed``)."""

from __future__ import annotations

import math

import torch

COTANGENT_PARTS = 4
"""At most this many pieces of a float64 cotangent, each representable in the weight's dtype
(:func:`representable_parts`): 4 × 11 bits of float16 or 4 × 8 of bfloat16 reach float32."""


def representable_parts(c: torch.Tensor,
                         dtype: torch.dtype) -> list[tuple[float, torch.Tensor]]:
    """Float64 ``c`` as ``Σ scale · part``: at most :data:`COTANGENT_PARTS` tensors of
    ``dtype``, each the rounding of what the previous ones leave, divided by a power of two
    that brings its largest entry into ``[½, 1]`` (float16's narrow range holds each part's
    large entries at full precision; an entry below 2⁻¹⁴ of its part's largest is subnormal
    there and recovered by the later parts). Autograd casts a cotangent to its output's
    dtype: handed the float64 cotangent of a weight reported in float16, it would round the
    kit's reference itself (a correct float16 mHC's ∂L/∂α_res came out 1.3% off that way).
    Shape: any, kept; a float64 ``dtype`` or an all-zero or non-finite ``c`` gives
    ``[(1.0, c in dtype)]``."""
    if dtype == torch.float64 or not bool(c.any()) or not bool(c.isfinite().all()):
        return [(1.0, c.to(dtype))]
    parts: list[tuple[float, torch.Tensor]] = []
    rest = c
    for _ in range(COTANGENT_PARTS):
        scale = 2.0 ** math.ceil(math.log2(float(rest.abs().max())))
        part = (rest / scale).to(dtype)
        parts.append((scale, part))
        rest = rest - scale * part.to(torch.float64)
        if not bool(rest.any()):
            break
    return parts


def chained(x: torch.Tensor, params: list[torch.Tensor], live: list[torch.Tensor],
             cotangents: list[torch.Tensor]) -> list[torch.Tensor]:
    """``[∂/∂x, ∂/∂θ…]`` (float64) of the weights ``live`` (those that require grad) chained
    with the float64 ``cotangents`` (one per live weight, same shapes); zeros where nothing is
    live. A weight of a coarser dtype gets its cotangent in representable parts
    (:func:`representable_parts`), one backward per weight and part, summed in float64. The
    graph is kept: the check chains several cotangents through the same weights."""
    total = [torch.zeros_like(v, dtype=torch.float64) for v in (x, *params)]
    if not live:
        return total
    if all(w.dtype == torch.float64 for w in live):
        pieces = [(1.0, live, [c.to(live[0].device) for c in cotangents])]
    else:  # linear in the cotangents: one weight and part at a time
        pieces = [(scale, [w], [part]) for w, c in zip(live, cotangents, strict=True)
                  for scale, part in representable_parts(c.to(w.device), w.dtype)]
    for scale, outputs, grad_outputs in pieces:
        got = torch.autograd.grad(outputs, [x, *params], grad_outputs=grad_outputs,
                                  allow_unused=True, retain_graph=True)
        for t, g in zip(total, got, strict=True):
            if g is not None:
                t += scale * g.to(torch.float64)
    return total
