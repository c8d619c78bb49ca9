"""Mutant: pre = σ(·) where DeepSeek-V4 has pre = σ(·) + hc_eps (the additive gate eps dropped).

Bug class: published parameterization (an additive gate eps dropped). The module declares
DeepSeek-V4's published layout (``h_pre_eps = hc_eps = 1e-6``) and offers its tensors (hc_fn,
hc_scale, hc_base), but its pre gate has no eps — as a fused kernel that forgets the
``+ hc_pre_eps`` (tests/thirdparty/test_vllm_wheel_adapter.py's "eps-dropped" mutant of vLLM
0.33.0's ``_mhc_pre_mix_kernel``). At ordinary logits the gate moves by 1e-6 out of ~0.5, under
the law's budget, so the output comparison alone cannot see it.
Caught by: published.step (its comparison of the gates at saturated logits, σ(−20) + 1e-6,
relative to the gate's own magnitude: the error is 0.998).
"""

from __future__ import annotations

import dataclasses

import torch

from hcspec.reference.published import Formula
from tests.mutants._published import make_divergent

BUG_CLASS = "published: an additive gate eps dropped: pre = σ(·) without hc_eps"
CAUGHT_BY = ("published.step",)


def departure(f: Formula) -> Formula:
    """The published record with this mutant's change."""
    return dataclasses.replace(f, h_pre=dataclasses.replace(f.h_pre, eps=0.0))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(departure, n, d, layer_index, dtype, device, seed, hc_eps=1e-6)
