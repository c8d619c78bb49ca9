"""Mutant: pre = σ(·) where DeepSeek-V4 has pre = σ(·) + hc_eps (the additive gate eps dropped),
in a module that computes its weights in float32 (declared ``compute_dtype``) as serving
kernels do.

Bug class: published parameterization (an additive gate eps dropped). The module declares
DeepSeek-V4's published layout (``h_pre_eps = hc_eps = 1e-6``) and offers its tensors (hc_fn,
hc_scale, hc_base), but its pre gate has no eps — as a fused kernel that forgets the
``+ hc_pre_eps`` (tests/thirdparty/test_vllm_wheel_adapter.py's "eps-dropped" mutant of vLLM
0.33.0's ``_mhc_pre_mix_kernel``). At the kit's ordinary cases the gate moves by 1e-6 out of
~0.5, and the output by ~1e-6, under the float32 law's 256·eps = 3.1e-5: the output comparison
alone cannot see it (in float64 it could: 1e5·eps = 2.2e-11, so the module declares float32).
Caught by: published.step (its comparison of the gates at saturated logits, σ(−20) + 1e-6,
relative to the gate's own magnitude: the error is 0.998 against 3.1e-5; the message says
"the gate matches the published one without its additive eps").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

import torch

from hcspec.reference import published
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from hcspec.reference.published import Formula
from tests.mutants._published import make_divergent

BUG_CLASS = "published: an additive gate eps dropped: pre = σ(·) without hc_eps (float32 weights)"
CAUGHT_BY = ("published.step",)


class Float32Weights(DeepSeekV4HyperConnection):
    """The reference DeepSeek-V4 module with its weights computed in float32 from float32
    copies of its tensors and the state (declared ``compute_dtype=float32``), cast back to the
    state's dtype; the mixing stays in the state's dtype."""

    @property
    def conventions(self) -> Mapping[str, object]:  # type: ignore[override]
        return MappingProxyType({**super().conventions, "compute_dtype": torch.float32})

    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        params = {k: (v.float() if isinstance(v, torch.Tensor) else v)
                  for k, v in self.published_parameters().items()}
        h_pre, h_post, H_res = published.weights("deepseek-v4", params, x.float(), self.formula)
        return h_pre.to(x.dtype), h_post.to(x.dtype), H_res.to(x.dtype)


def departure(f: Formula) -> Formula:
    """The published record with this mutant's change."""
    return dataclasses.replace(f, h_pre=dataclasses.replace(f.h_pre, eps=0.0))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(departure, n, d, layer_index, dtype, device, seed, hc_eps=1e-6,
                          cls=Float32Weights)


def make_declared(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    """The same float32-weights module with the published eps (the control: passes)."""
    return make_divergent(None, n, d, layer_index, dtype, device, seed, hc_eps=1e-6,
                          cls=Float32Weights)
