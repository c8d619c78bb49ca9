"""TileKernels' torch references compile with ``torch.compile(fullgraph=True)``: the
``compile.fullgraph`` failure the kit reports for ``tile_kernels:*`` ("Attempted to call function
marked as skipped") comes from the kit's adapter, which resolves and loads the reference file
(``importlib.metadata``, ``pathlib``) inside every forward, not from the references.

Without the kit: loads ``tile_kernels/torch/mhc.py`` by path (from the installed
``tile-kernels`` files, or ``$HC_TILE_KERNELS_CHECKOUT``), composes ``mhc_pre_norm_fn_ref`` →
``mhc_pre_split_mixes_ref`` → ``sinkhorn_normalize_ref`` → ``mhc_pre_apply_mix_ref`` →
``mhc_post_ref`` as ``tile_kernels.modeling.mhc`` does, and compiles the composition with
``fullgraph=True`` (backend ``aot_eager``, CPU), then does the same with a call of
``importlib.metadata.distribution`` inside the compiled function.

Run: python docs/findings/repro/tile_kernels_compile.py
Prints: "references: fullgraph compile OK, equal to eager: True" and
"with importlib.metadata inside: Unsupported ..." (torch 2.13.0, tile-kernels 1.0.0).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

import torch

FILE = "tile_kernels/torch/mhc.py"
checkout = os.environ.get("HC_TILE_KERNELS_CHECKOUT")
path = (Path(checkout) / FILE if checkout
        else Path(str(importlib.metadata.distribution("tile-kernels").locate_file(FILE))))
spec = importlib.util.spec_from_file_location("tile_kernels_torch_mhc", path)
assert spec is not None and spec.loader is not None
ref = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = ref  # TorchDynamo looks functions' modules up by name
spec.loader.exec_module(ref)

n, d = 4, 8
gen = torch.Generator().manual_seed(0)
fn = torch.randn(n * (n + 2), n * d, generator=gen) * 0.02
scale, base = torch.ones(3), torch.zeros(n * (n + 2))


def layer(x: torch.Tensor) -> torch.Tensor:
    mixes = ref.mhc_pre_norm_fn_ref(x, fn, None, 1e-6)
    pre, post, comb = ref.mhc_pre_split_mixes_ref(mixes, scale, base, n, 2.0, 1e-6)
    comb = ref.sinkhorn_normalize_ref(comb, repeat=10, eps=1e-6)
    collapsed = ref.mhc_pre_apply_mix_ref(x, pre)
    out: torch.Tensor = ref.mhc_post_ref(collapsed, x, post, comb)  # branch = identity
    return out


def layer_resolving_the_file(x: torch.Tensor) -> torch.Tensor:
    importlib.metadata.distribution("tile-kernels")  # what the adapter does on every call
    return layer(x)


x = torch.randn(2, 3, n, d, generator=gen, dtype=torch.bfloat16)
compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")(x)
print("references: fullgraph compile OK, equal to eager:", torch.equal(compiled, layer(x)))
try:
    torch.compile(layer_resolving_the_file, fullgraph=True, backend="aot_eager")(x)
    print("with importlib.metadata inside: compiles")
except Exception as exc:  # TorchDynamo's Unsupported
    print("with importlib.metadata inside:", type(exc).__name__, str(exc).splitlines()[0])
