"""Adapter for vLLM's torch mHC path, ``vllm/model_executor/kernels/mhc/torch.py`` (the code
``torch.ops.vllm.mhc_pre`` / ``mhc_post`` run where no fused kernel is used), loaded by path from
the user's checkout (``$HC_VLLM_CHECKOUT``), written against commit :data:`WRITTEN_FOR`.
TARGET ``vllm:mhc-torch``.

The file imports only torch, so it is executed alone (:mod:`~hcspec.conformance.adapters._by_path`)
without importing vLLM. It has two functions:

* ``mhc_pre_torch(residual, fn, hc_scale, hc_base, rms_eps, hc_pre_eps, hc_sinkhorn_eps,
  hc_post_mult_value, sinkhorn_repeat)`` **asserts a bfloat16 residual** ``[..., n, d]`` and
  float32 parameters; it flattens the tokens with ``residual.view(-1, n, d)`` (a contiguous
  state is required), computes in float32 ``mixes = (vec(X) fnᵀ)·rsqrt(mean(vec(X)²) +
  rms_eps)``, ``pre = σ(·) + hc_pre_eps``, ``post = hc_post_mult_value·σ(·)``, ``comb =
  softmax(L, -1) + eps``, a column normalisation, then ``repeat − 1`` (row, column) rounds with
  ``eps`` in the denominators, and returns ``post [..., n, 1]``, ``comb [..., n, n]`` (float32)
  and the branch input ``Σ_i pre_i X_i`` rounded to bfloat16;
* ``mhc_post_torch(x, residual, post, comb)`` = ``einsum('...ij,...ih->...jh', comb, X) + post ⊗
  x`` in float32, cast to the residual's dtype: ``X'_j = post_j x + Σ_i comb[i, j] X_i``, so
  ``H_res = combᵀ``.

The adapter composes exactly that: the state is cast to bfloat16 (vLLM's residual stream dtype;
the function refuses any other), ``mhc_pre_torch``, the branch on the branch input (handed over
in the state's dtype), ``mhc_post_torch`` with the bfloat16 residual; ``X'`` is bfloat16
(declared ``output_dtype``). The arguments are those vLLM's DeepSeek-V4-family models pass
(``rms_eps = hc_pre_eps = hc_sinkhorn_eps = 1e-6``, ``hc_post_mult_value = 2.0``,
``sinkhorn_repeat = 20``). ``weights`` reads ``pre`` from ``mhc_pre_torch``'s own
``pre_mix.unsqueeze(-1)`` call (:class:`~hcspec.conformance.adapters._capture.CallRecorder`).
Parameters ``fn [n(n+2), n·d]``, ``hc_scale [3]``, ``hc_base [n(n+2)]`` are float32, initialised
as DeepSeek-V4 (``fn ~ N(0, 0.02)``, ``scale = 1``, ``base = 0``; vLLM loads checkpoints and
ships no init). No ``reduce``: the file has no head. ``layer_index`` has no effect.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters import vllm_wheel
from hcspec.conformance.adapters._by_path import checkout_file, load_file
from hcspec.conformance.adapters._capture import (
    CallRecorder,
    PackageChanged,
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters.declarations.vllm_mhc import (
    CHECKOUT_ENV,
    REFERENCE_FILE,
    WRITTEN_FOR,
)
from hcspec.conformance.protocol import Branch, Conventions, Weights

EPS: Final = 1e-6
"""``rms_eps``, ``hc_pre_eps`` and ``hc_sinkhorn_eps`` (vLLM passes the config's ``hc_eps`` and
``rms_norm_eps``, both 1e-6)."""

POST_MULT: Final = 2.0
"""``hc_post_mult_value`` (DeepSeek-V4's ``2σ``)."""

SINKHORN_REPEAT: Final = 20
"""``sinkhorn_repeat`` (``hc_sinkhorn_iters``)."""

INIT_STD: Final = 0.02
"""DeepSeek-V4's ``initializer_range``."""

_PREFIX: Final = "_hcspec_vllm_mhc_torch_"


def load_reference() -> ModuleType:
    """``torch.py`` of the checkout named by ``$HC_VLLM_CHECKOUT``, loaded by path (cached).

    Raises:
        ImportError: the variable is unset or the file is not there.
    """
    return load_file(_PREFIX, str(checkout_file(CHECKOUT_ENV, REFERENCE_FILE, "vLLM")))


class VllmMhcParameters(nn.Module):
    """The parameters ``mhc_pre_torch`` takes: ``fn [n(n+2), n·d]``, ``hc_scale [3]``,
    ``hc_base [n(n+2)]`` (float32)."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        mix = n * (n + 2)
        self.fn = nn.Parameter(torch.empty(mix, n * d).normal_(0.0, INIT_STD))
        self.hc_scale = nn.Parameter(torch.ones(3))
        self.hc_base = nn.Parameter(torch.zeros(mix))


def conventions() -> Conventions:
    """What the composed torch path declares (see the module docstring)."""
    return Conventions(
        compute_dtype=torch.float32, output_dtype=torch.bfloat16,
        sinkhorn_iterations=SINKHORN_REPEAT, sinkhorn_variant="softmax",
        sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=EPS,
        sinkhorn_denominator_eps=EPS, sinkhorn_exact_axis="rows", h_pre_eps=EPS,
        contiguous_input=True,
        notes=(f"vLLM {REFERENCE_FILE} (commit {WRITTEN_FOR[:12]}, loaded by path): the state "
               "is cast to bfloat16 (mhc_pre_torch asserts it) and flattened with view "
               "(contiguous state); coefficients in float32; branch input and X' rounded to "
               "bfloat16; H_res = combᵀ; pre = σ + 1e-6, post = 2σ; softmax(-1) + eps then "
               "column/row normalisations with eps, 20 rounds; no reduce"),
    )


class VllmMhcTorch(WrapsModule):
    """``mhc_pre_torch`` + branch + ``mhc_post_torch`` as a kit impl.

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]`` bfloat16; ``weights(x)`` bfloat16;
    ``expand(h [B,T,d])`` replicates. ``self.module`` is :class:`VllmMhcParameters`.

    Raises:
        ValueError: (from the methods) ``x`` not ``[B, T, n, d]``; a branch output of another
            shape.
        AssertionError, RuntimeError: whatever the file raises (a non-contiguous state).
    """

    kind: str = "mhc"

    def __init__(self, ref: ModuleType, module: VllmMhcParameters, n: int, d: int) -> None:
        self.ref, self.module = ref, module
        self.n, self.d = n, d
        self.conventions = conventions()

    def _pre(self, x: torch.Tensor) -> Any:
        m = self.module
        return self.ref.mhc_pre_torch(
            x.to(torch.bfloat16), m.fn, m.hc_scale, m.hc_base, rms_eps=EPS, hc_pre_eps=EPS,
            hc_sinkhorn_eps=EPS, hc_post_mult_value=POST_MULT, sinkhorn_repeat=SINKHORN_REPEAT)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``mhc_post_torch(F(layer_input), X_bf16, post, comb)``; ``branch`` is called once."""
        check_state(x, self.n, self.d)
        residual = x.to(torch.bfloat16)
        post, comb, layer_input = self._pre(x)
        collapsed = layer_input.to(x.dtype)
        z = check_branch_output(branch(collapsed), collapsed)
        out: torch.Tensor = self.ref.mhc_post_torch(z, residual, post, comb)
        return out

    def weights(self, x: torch.Tensor) -> Weights:
        """``(pre, post, combᵀ)`` as ``mhc_pre_torch`` computes them at ``x``, bfloat16.

        Raises:
            PackageChanged: ``mhc_pre_torch`` no longer collapses with one
                ``pre_mix.unsqueeze(-1)`` of a ``[N, n]`` tensor.
        """
        check_state(x, self.n, self.d)
        with CallRecorder((torch.Tensor.unsqueeze,)) as recorder:
            post, comb, _ = self._pre(x)
        tokens = x.shape[0] * x.shape[1]
        pres = [c.args[0] for c in recorder.of(torch.Tensor.unsqueeze)
                if isinstance(c.args[0], torch.Tensor)
                and tuple(c.args[0].shape) == (tokens, self.n)]
        if len(pres) != 1:
            raise PackageChanged(f"vLLM mhc_pre_torch: expected one pre_mix.unsqueeze(-1) "
                                 f"(adapter written for {WRITTEN_FOR[:12]}); saw {len(pres)}")
        dtype = torch.bfloat16
        pre = pres[0].reshape(x.shape[:3])
        return (pre.to(dtype), post.squeeze(-1).to(dtype),
                comb.transpose(-1, -2).to(dtype))

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into the n streams.

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).contiguous()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> VllmMhcTorch:
    """Factory (kit target form): vLLM's torch mHC path from ``$HC_VLLM_CHECKOUT``; parameters
    float32 whatever ``dtype``; outputs bfloat16.

    Raises:
        ImportError: the file cannot be found (see :func:`load_reference`).
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    del dtype  # float32 parameters (mhc_pre_torch asserts them)
    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if layer_index < 0:
        raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
    ref = load_reference()
    with seeded(seed, device):
        module = VllmMhcParameters(n, d)
    return VllmMhcTorch(ref, module.to(device), n, d)


def make_wheel_first(n: int, d: int, *, layer_index: int = 0,
                     dtype: torch.dtype = torch.float64, device: str = "cpu",
                     seed: int = 0) -> Any:
    """Factory of ``vllm:mhc-torch``: the installed vLLM wheel's ``torch.py``
    (:func:`hcspec.conformance.adapters.vllm_wheel.make_torch`) when vLLM is installed, else
    this module's checkout route (:func:`make`).

    Raises:
        ImportError: neither the wheel nor ``$HC_VLLM_CHECKOUT`` provides the file.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    try:
        vllm_wheel.kernels("torch")
    except ImportError:
        return make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    return vllm_wheel.make_torch(n, d, layer_index=layer_index, dtype=dtype, device=device,
                                 seed=seed)
