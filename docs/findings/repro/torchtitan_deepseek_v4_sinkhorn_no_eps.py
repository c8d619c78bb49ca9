"""Bug, torchtitan DeepSeek-V4 port (pytorch/torchtitan PR #3634 at 99222f64): HcSplitSinkhorn.

torchtitan computes comb = exp(L − rowmax L), then normalises rows and columns with eps only in
the denominators. DeepSeek-V4's reference (and NeMo Automodel, transformers 5.23.0, vLLM,
TileKernels) computes softmax(L, -1) + eps: the additive eps keeps every entry positive. With
two source streams whose comb rows both peak in the same column, by ~100 the gradient is no
longer finite (float32 denormals), and from ~104 (exp underflows to 0) torchtitan's comb has an
all-zero column: that output stream receives nothing from the residual streams
(X'_j = Σ_i comb[i, j] X_i). The reference form stays finite and doubly stochastic.
Output (torch 2.13.0, CPU):
    gap   50: torchtitan column sums [0.99999.., 0.99999..], finite grad True | reference: True
    gap  100: torchtitan column sums [0.99999.., 0.99999..], finite grad False | reference: True
    gap  110: torchtitan column sums [0.99999.., 0.0], finite grad False | reference: True
    gap 1000: torchtitan column sums [0.99999.., 0.0], finite grad False | reference: True

Run with a torchtitan checkout at the PR's head (the file is loaded by path, nothing imported
from torchtitan but what mhc.py imports itself; if torchtitan.protocols.module cannot be
imported here, a stand-in base class with the same Config.build() is put in its place, which
changes nothing in the HC math):
    HC_TORCHTITAN_CHECKOUT=/path/to/torchtitan \
        python docs/findings/repro/torchtitan_deepseek_v4_sinkhorn_no_eps.py
"""
import dataclasses
import importlib.util
import os
import sys
import types

import torch
from torch import nn

try:
    import torchtitan.protocols.module  # noqa: F401  (the real base class, when installed)
except ImportError:
    class Module(nn.Module):
        @dataclasses.dataclass(kw_only=True, slots=True)
        class Config:
            param_init: dict | None = None

            def build(self):
                return type(self)._owner(config=self)

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            if "Config" in cls.__dict__:
                cls.Config._owner = cls

    for name in ("torchtitan", "torchtitan.protocols", "torchtitan.protocols.module"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["torchtitan.protocols.module"].Module = Module

path = os.path.join(os.environ["HC_TORCHTITAN_CHECKOUT"], "torchtitan/models/deepseek_v4/mhc.py")
spec = importlib.util.spec_from_file_location("torchtitan_dsv4_mhc", path)
mhc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mhc)

n, iters, eps = 2, 20, 1e-6
split = mhc.HcSplitSinkhorn.Config(hc_mult=n, sinkhorn_iters=iters, eps=eps).build()


def reference(logits):
    """DeepSeek-V4's Sinkhorn (softmax + eps, column normalisation, iters − 1 rounds)."""
    comb = logits.softmax(-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    return comb


for gap in (50.0, 100.0, 110.0, 1000.0):
    # both source streams' logits peak in column 0, by `gap` and `gap + 5`
    logits = torch.tensor([[gap, 0.0], [gap + 5.0, 0.0]])
    mixes = torch.cat([torch.zeros(2 * n), logits.flatten()]).view(1, 1, -1).requires_grad_()
    _, _, comb = split(mixes, torch.ones(3), torch.zeros(n * (n + 2)))
    (comb * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    ref_in = logits.clone().requires_grad_()
    ref = reference(ref_in)
    (ref * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    print(f"gap {gap:6.0f}: torchtitan column sums {comb[0, 0].sum(-2).tolist()}, "
          f"finite grad {bool(torch.isfinite(mixes.grad).all())} | reference column sums "
          f"{[round(v, 6) for v in ref.sum(-2).tolist()]}, "
          f"finite grad {bool(torch.isfinite(ref_in.grad).all())}")
