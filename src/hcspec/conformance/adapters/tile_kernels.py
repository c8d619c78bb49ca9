"""Adapter for the PyTorch references of DeepSeek's TileKernels (PyPI ``tile-kernels``, file
``tile_kernels/torch/mhc.py``), written against version :data:`WRITTEN_FOR`. TARGETS
``tile_kernels:mhc`` and ``tile_kernels:mhc-post2``.

**Loading without the GPU toolchain.** ``import tile_kernels`` imports ``tilelang`` (a GPU
kernel compiler) and every kernel module. The references in ``tile_kernels/torch/mhc.py``
import only ``torch``, so the adapter loads that one file by path
(:func:`load_reference`, ``importlib.util.spec_from_file_location`` under a private module
name) and never imports the package. The file is found in, in order: the checkout named by the
environment variable :data:`CHECKOUT_ENV` (``HC_TILE_KERNELS_CHECKOUT=/path/to/TileKernels``),
or the installed distribution ``tile-kernels`` (``pip install --no-deps tile-kernels==1.0.0``
installs the files without ``tilelang``).

**Composition** (as ``tile_kernels.modeling.mhc.functional.mhc_pre`` does with grad enabled,
then the caller's ``mhc_post``), built with
:func:`hcspec.conformance.adapters.deepseek_v4_style.v4_style_target`:
``mixes = mhc_pre_norm_fn_ref(X, fn, None, norm_eps)``; ``pre, post, comb =
mhc_pre_split_mixes_ref(mixes, scale, base, n, post_mult_value, pre_eps)``; ``comb =
sinkhorn_normalize_ref(comb, repeat, sinkhorn_eps)``; ``collapsed = mhc_pre_apply_mix_ref(X,
pre)``; then ``mhc_post_ref(F(collapsed), X, post, comb)`` = ``post ⊗ z + Σ_m comb[m, n]
X_m``, so ``H_res = combᵀ``. The helper composes exactly that product in float32 (the
reference's ``einsum``; a test checks it against ``mhc_post_ref``).

**What the references do, declared:**

* every step computes in **float32** (``mhc_pre_norm_fn_ref`` asserts float32 weights and
  upcasts the state) and ``mhc_pre_apply_mix_ref`` / ``mhc_post_ref`` **round their outputs to
  bfloat16**: ``X'`` is bfloat16 whatever the input dtype (declared ``compute_dtype=float32``,
  ``output_dtype=bfloat16``); the branch input keeps its bfloat16-rounded values but is handed
  to the branch in the state's dtype (the kit's branch computes in the state's dtype, as the
  model's sublayer computes in its own);
* ``pre = σ(·) + pre_eps``; ``post = post_mult_value · σ(·)``; **``post_mult_value`` has no
  single default**: ``mhc_pre`` (the modeling entry point) defaults to **1.0**,
  ``mhc_pre_split_mixes_ref`` has no default, and the package's own tests use 2.0
  (``test_pre_split_mixes``) and 1.0 (``test_pre_big_fuse``). ``tile_kernels:mhc`` uses
  ``mhc_pre``'s defaults (1.0, declared ``h_post_multiplier=1``); ``tile_kernels:mhc-post2``
  uses 2.0 (the mHC paper's ``2σ``);
* Sinkhorn–Knopp: ``softmax(comb, -1) + eps``, then a normalisation over axis −2, then
  ``repeat − 1`` rounds of axis −1 then axis −2, each ``M / (M.sum + eps)`` (``repeat = 10``,
  ``eps = 1e-6``, ``mhc_pre``'s defaults). Axis −2 of ``comb`` is the rows of ``H_res = combᵀ``:
  the rows are normalised last;
* the weights come from an RMS norm of ``vec(X)`` over n·d (``norm_weight=None``,
  ``norm_eps=1e-6``).

Parameters ``fn [n(n+2), n·d]``, ``scale [3]``, ``base [n(n+2)]`` (and the head's ``[n, n·d]``,
``[1]``, ``[n]``) are float32 and initialised as DeepSeek-V4 does in Hugging Face transformers'
``_init_weights`` (``fn ~ N(0, 0.02)``, ``base = 0``, ``scale = 1``; TileKernels ships no
module). ``reduce`` is ``mhc_head`` composed from the references
(``mhc_head_compute_mix_ref`` then ``mhc_pre_apply_mix_ref``), declared ``reduce="learned"``.
``layer_index`` has no effect (no layer-dependent init).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Final

import torch
from torch import nn
from torch.nn import functional as F

from hcspec.conformance.adapters import _by_path
from hcspec.conformance.adapters.declarations.tile_kernels import CHECKOUT_ENV as CHECKOUT_ENV
from hcspec.conformance.adapters.declarations.tile_kernels import REFERENCE_FILE as REFERENCE_FILE
from hcspec.conformance.adapters.declarations.tile_kernels import WRITTEN_FOR as WRITTEN_FOR
from hcspec.conformance.adapters.declarations.tile_kernels import reference_path
from hcspec.conformance.adapters.declarations.tile_kernels import unavailable as unavailable
from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    PublishedTensors,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions

NORM_EPS: Final = 1e-6
PRE_EPS: Final = 1e-6
SINKHORN_EPS: Final = 1e-6
SINKHORN_REPEAT: Final = 10
MHC_PRE_POST_MULT: Final = 1.0
"""``mhc_pre``'s defaults (``norm_eps``, ``pre_eps``, ``sinkhorn_eps``, ``sinkhorn_repeat``,
``post_mult_value``)."""

INIT_STD: Final = 0.02
"""DeepSeek-V4's ``initializer_range`` (the std of ``fn`` at init)."""


_MODULE_PREFIX: Final = "_hcspec_tile_kernels_torch_mhc_"


def module_name(path: str) -> str:
    """The private ``sys.modules`` name the reference file at ``path`` is loaded under:
    :data:`_MODULE_PREFIX` and the first 16 hex digits of the SHA-256 of ``path``, so that two
    checkouts loaded in one process are two modules
    (:func:`hcspec.conformance.adapters._by_path.module_name`)."""
    return _by_path.module_name(_MODULE_PREFIX, path)


def _load(path: str) -> ModuleType:
    """The reference file at ``path``, executed once per path and registered in
    ``sys.modules`` under :func:`module_name` (TorchDynamo looks a traced function's module
    up by name there; a private name cannot clash with the user's imports);
    :func:`hcspec.conformance.adapters._by_path.load_file`.

    Raises:
        ImportError: ``path`` cannot be loaded as a Python module.
        Exception: whatever executing the file raises.
    """
    return _by_path.load_file(_MODULE_PREFIX, path)


def load_reference() -> ModuleType:
    """The module ``tile_kernels/torch/mhc.py`` loaded by path (see :func:`reference_path`),
    without importing ``tile_kernels`` (and so without ``tilelang``); cached per path.

    Raises:
        ImportError: see :func:`reference_path`.
    """
    return _load(str(reference_path()))


class TileKernelsMhcParameters(nn.Module):
    """The parameters ``mhc_pre`` and ``mhc_head`` take, as DeepSeek-V4 initialises them.

    Attributes:
        fn: ``[n(n+2), n·d]`` projection (``N(0, 0.02)``); ``scale [3]`` (ones); ``base
            [n(n+2)]`` (zeros); ``head_fn [n, n·d]``, ``head_scale [1]``, ``head_base [n]``:
            the reduction head's.
    """

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        mix = n * (n + 2)
        self.fn = nn.Parameter(torch.empty(mix, n * d).normal_(0.0, INIT_STD))
        self.scale = nn.Parameter(torch.ones(3))
        self.base = nn.Parameter(torch.zeros(mix))
        self.head_fn = nn.Parameter(torch.empty(n, n * d).normal_(0.0, INIT_STD))
        self.head_scale = nn.Parameter(torch.ones(1))
        self.head_base = nn.Parameter(torch.zeros(n))
        self.n = n


def _build(n: int, d: int, layer_index: int) -> TileKernelsMhcParameters:
    del layer_index  # no layer-dependent init
    return TileKernelsMhcParameters(n, d)


def _decomposer(ref: ModuleType, post_mult_value: float) -> Any:
    # ``ref`` is resolved once, by the factory: loading the file inside forward is Python
    # TorchDynamo does not trace (compile.fullgraph would fail on the adapter, not the kernels).
    def decompose(module: TileKernelsMhcParameters, x: torch.Tensor) -> Decomposition:
        n = module.n
        mixes = ref.mhc_pre_norm_fn_ref(x, module.fn, None, NORM_EPS)
        pre, post, comb = ref.mhc_pre_split_mixes_ref(
            mixes, module.scale, module.base, n, post_mult_value, PRE_EPS)
        comb = ref.sinkhorn_normalize_ref(comb, repeat=SINKHORN_REPEAT, eps=SINKHORN_EPS)
        collapsed = ref.mhc_pre_apply_mix_ref(x, pre)  # rounded to bfloat16 by the reference
        return Decomposition(pre=pre.squeeze(-1), post=post.squeeze(-1), comb=comb,
                             collapsed=collapsed.to(x.dtype))
    return decompose


def reduce_with_head(module: TileKernelsMhcParameters, x: torch.Tensor,
                     ref: ModuleType | None = None) -> torch.Tensor:
    """``mhc_head`` composed from the references: ``[B, T, n, d] -> [B, T, d]`` (bfloat16).

    ``ref`` is the loaded reference module (default: :func:`load_reference`).
    """
    ref = load_reference() if ref is None else ref
    n = module.n
    fn = F.pad(module.head_fn, (0, 0, 0, n * (n + 2) - n))
    mixes = ref.mhc_pre_norm_fn_ref(x, fn, None, NORM_EPS)[..., :n]
    mix = ref.mhc_head_compute_mix_ref(mixes, module.head_scale, module.head_base, PRE_EPS)
    out: torch.Tensor = ref.mhc_pre_apply_mix_ref(x, mix.unsqueeze(-1))
    return out


def conventions(post_mult_value: float) -> Conventions:
    """What the composed references declare (see the module docstring)."""
    return Conventions(
        branch_input="x_in", reduce="learned", compute_dtype=torch.float32,
        output_dtype=torch.bfloat16, sinkhorn_iterations=SINKHORN_REPEAT,
        sinkhorn_variant="softmax", sinkhorn_additive_eps=SINKHORN_EPS,
        sinkhorn_denominator_eps=SINKHORN_EPS, sinkhorn_iterations_count="rounds_from_softmax",
        sinkhorn_exact_axis="rows", h_pre_eps=PRE_EPS, h_post_multiplier=post_mult_value,
        notes=("TileKernels torch references (tile_kernels/torch/mhc.py, loaded by path) "
               "composed as mhc_pre + mhc_post: float32 inside, branch input and X' rounded to "
               "bfloat16; H_res = combᵀ; softmax(-1) + eps then column/row normalisations "
               f"with eps (repeat {SINKHORN_REPEAT}); post_mult_value {post_mult_value} "
               "(mhc_pre's default is 1.0, DeepSeek-V4 uses 2); reduce = mhc_head (learned)"),
    )


PUBLISHED: Final = PublishedTensors(
    "deepseek-v4", {"hc_fn": "fn", "hc_scale": "scale", "hc_base": "base"},
    lambda module: {"hc_eps": PRE_EPS, "norm_eps": NORM_EPS, "sinkhorn_iters": SINKHORN_REPEAT})
"""DeepSeek-V4's published layout: ``mhc_pre``'s ``fn``, ``scale``, ``base`` are a checkpoint's
``hc_fn``, ``hc_scale``, ``hc_base``; ``pre_eps = sinkhorn_eps = hc_eps``, ``norm_eps``,
``sinkhorn_repeat = sinkhorn_iters``. Declared by the target with ``post_mult_value = 2``
only: ``mhc_pre``'s default 1.0 is not DeepSeek-V4's ``2σ``."""


def make_factory(post_mult_value: float) -> Any:
    """The kit factory for the composed references with ``post_mult_value``; the reference
    file is loaded here, once, not inside forward.

    Raises:
        ImportError: the reference file cannot be found (see :func:`reference_path`).
    """
    ref = load_reference()

    def reduce(module: TileKernelsMhcParameters, x: torch.Tensor) -> torch.Tensor:
        return reduce_with_head(module, x, ref)

    return v4_style_target(
        _build, _decomposer(ref, post_mult_value), comb="source_target",
        conventions=conventions(post_mult_value), compose_dtype="float32", keep_float32=True,
        reduce=reduce, published=PUBLISHED if post_mult_value == 2.0 else None)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0,
         post_mult_value: float = MHC_PRE_POST_MULT) -> Any:
    """Factory (kit target form): TileKernels' references composed as ``mhc_pre`` /
    ``mhc_post`` with ``post_mult_value`` (``mhc_pre``'s default 1.0); parameters float32
    whatever ``dtype``; outputs bfloat16.

    Raises:
        ImportError: the reference file cannot be found (see :func:`reference_path`).
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    factory = make_factory(post_mult_value)
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
