"""Small stand-ins for the kit's precision handling (no third-party package): a correct mHC
that computes in float32 and rounds what it returns to a coarser dtype (as DeepSeek's
TileKernels references round to bfloat16), the same with ``weights()`` reporting ``H_resᵀ``,
and a static HC whose residual path carries no gradient.

TARGETs (``tests.conformance.properties.precision_standins:NAME``):

* ``make_bf16_output`` — correct mHC, float32 inside, ``X'``, the weights and the branch input
  rounded to bfloat16; declares ``compute_dtype=float32, output_dtype=bfloat16``;
* ``make_bf16_undeclared`` — the same without declaring ``output_dtype`` (must fail
  ``shape.output``);
* ``make_bf16_detached`` — ``make_bf16_output`` whose residual ``H_res X`` is detached (a
  gradient bug the finite differences must still see through the bfloat16 rounding);
* ``make_transposed_{float64,float32,bfloat16,float16}`` — correct forward in that precision
  (float32 inside for the three coarser ones), ``weights()`` reports ``H_resᵀ``;
* ``make_bf16_{shape_cached,contiguous_kernel,deep_unnormalised,batched_path}`` (and
  ``make_float16_shape_cached``) — ``make_bf16_output`` with the bug of the mutant of the same
  class (``tests.mutants``: cache_keyed_by_shape, assumes_contiguous_strides,
  depth_deep_layers_unnormalised, token_count_path): what ``inference.repeated_calls``,
  ``strides.non_contiguous``, ``depth.mhc_bounded`` and ``scale.batch_composition`` must still
  catch in low precision;
* ``make_bf16_unrounded_branch_input`` — ``make_bf16_output`` that hands the branch its
  float32 aggregate (correct: the exact family must accept either rounding);
* ``make_{bf16,float16}_compiled_unmixed`` — ``make_bf16_output`` (``make_float16_output``)
  whose forward skips the mixing ``H_res X`` only while ``torch.compile`` traces it: what
  ``compile.fullgraph`` must catch in low precision;
* ``make_{bf16,float16}_hc_{static,dynamic}`` — the reference static (dynamic) HC with the
  rounding of ``make_bf16_output``, and ``make_{bf16,float16}_hc_unmixed`` the static one
  returning the streams from before mixing (``tests.mutants.width_returns_unmixed``): what
  ``law.permutation_mixing`` must pass and catch in low precision;
* ``make_branch_only_gradient`` — a static HC whose residual ``H_res X`` is detached, so only
  the branch path carries gradient (``dtype.float32_gradients`` must not blame it for the
  kit's own branch's float32 error);
* ``make_bf16_state_v4`` — a correct DeepSeek-V4-formula mHC as serving engines run it
  (float32 parameters and weights, bfloat16 residual state and output, 20 Sinkhorn–Knopp
  rounds as declared, no ``logits``; :mod:`tests.mutants._v4_serving`): the correct twin of
  the mutant ``tests.mutants.sinkhorn_bf16_state_two_rounds``, which must pass everything.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from hcspec.conformance.protocol import Conventions
from hcspec.reference import (
    DynamicHyperConnection,
    ManifoldHyperConnection,
    StaticHyperConnection,
)
from hcspec.reference.lite import LiteHyperConnection
from tests.mutants._v4_serving import make as make_bf16_state_v4  # noqa: F401  (a TARGET)
from tests.mutants.assumes_contiguous_strides import contiguous_read
from tests.mutants.cache_keyed_by_shape import ShapeCache
from tests.mutants.depth_deep_layers_unnormalised import DeepLayersUnnormalised
from tests.mutants.token_count_path import BatchedPath

Branch = Callable[[torch.Tensor], torch.Tensor]


def _built(cls: type[torch.nn.Module], n: int, d: int, layer_index: int, seed: int,
           param_dtype: torch.dtype, device: str) -> Any:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = cls(n, d, layer_index, dtype=torch.float64)  # type: ignore[call-arg]
    return module.to(dtype=param_dtype, device=device)


class Rounded:
    """Mixin (listed before the reference class in the bases) for a reference module with
    float32 (or float64) parameters and arithmetic, returning ``X'`` and its weights in
    ``output`` (the branch input too, handed to the branch in the state's dtype, as
    TileKernels' ``mhc_pre_apply_mix_ref``);
    ``transposed`` reports ``H_resᵀ``; ``detached`` cuts the residual path from autograd;
    ``unmixed`` returns the streams from before mixing (``X`` for ``H_res X``)."""

    output: torch.dtype = torch.bfloat16
    transposed: bool = False
    detached: bool = False
    unmixed: bool = False

    def _inner(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        work = next(self.parameters()).dtype  # type: ignore[attr-defined]
        xw = x.to(work)
        return (xw, *super().weights(xw))  # type: ignore[misc]

    def _mixes(self) -> bool:
        """Whether this call applies ``H_res`` to the streams."""
        return not self.unmixed

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        _, h_pre, h_post, H_res = self._inner(x)
        if self.transposed:
            H_res = H_res.transpose(-1, -2)
        return h_pre.to(self.output), h_post.to(self.output), H_res.to(self.output)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        xw, h_pre, h_post, H_res = self._inner(x)
        x_in = (h_pre.unsqueeze(-2) @ xw).squeeze(-2)
        z = branch(x_in.to(self.output).to(x.dtype)).to(xw.dtype)
        residual = xw.detach() if self.detached else xw
        mixed = H_res @ residual if self._mixes() else residual
        out = mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)
        return out.to(self.output)


class RoundedMHC(Rounded, ManifoldHyperConnection):
    """The reference mHC with the rounding of :class:`Rounded`."""

    def logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reference's pre-activation logits, computed in the parameters' dtype."""
        return super().logits(x.to(next(self.parameters()).dtype))


class RoundedLite(Rounded, LiteHyperConnection):
    """The reference mHC-lite with the rounding of :class:`Rounded` (float32 inside and out:
    the float32 mHC-lite of issue #40, whose sum of 8! weighted permutations is checked
    against the summation floor that grows with K)."""

    def logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reference's logits ``(H̃_pre, H̃_post, H̃_res [B,T,K])`` in the parameters'
        dtype."""
        return super().logits(x.to(next(self.parameters()).dtype))


class RoundedStaticHC(Rounded, StaticHyperConnection):
    """The reference static HC with the rounding of :class:`Rounded`."""


class RoundedDynamicHC(Rounded, DynamicHyperConnection):
    """The reference dynamic HC with the rounding of :class:`Rounded`."""


def _rounded(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0, output: torch.dtype = torch.bfloat16,
             declare: bool = True, transposed: bool = False, detached: bool = False,
             unmixed: bool = False, cls: type[Rounded] = RoundedMHC) -> Any:
    work = torch.float64 if output == torch.float64 else torch.float32
    module = _built(cls, n, d, layer_index, seed, work, device)  # type: ignore[arg-type]
    module.output = output
    module.transposed = transposed
    module.detached = detached
    module.unmixed = unmixed
    rounds = {"sinkhorn_iterations": 20} if issubclass(cls, ManifoldHyperConnection) else {}
    if output == torch.float64:
        module.conventions = Conventions(**rounds)  # type: ignore[arg-type]
    else:
        module.conventions = Conventions(  # type: ignore[arg-type]
            **rounds, compute_dtype=torch.float32, output_dtype=output if declare else None)
    return module


make_bf16_output = partial(_rounded, output=torch.bfloat16)
make_bf16_undeclared = partial(_rounded, output=torch.bfloat16, declare=False)
make_transposed_float64 = partial(_rounded, output=torch.float64, transposed=True)
make_transposed_float32 = partial(_rounded, output=torch.float32, transposed=True)
make_transposed_bfloat16 = partial(_rounded, output=torch.bfloat16, transposed=True)
make_transposed_float16 = partial(_rounded, output=torch.float16, transposed=True)
make_bf16_detached = partial(_rounded, output=torch.bfloat16, detached=True)
make_float16_output = partial(_rounded, output=torch.float16)
make_float32_output = partial(_rounded, output=torch.float32)
make_float64_output = partial(_rounded, output=torch.float64)


LITE_MAX_PARAMETERS = 48_000_000
"""The parameter count :func:`make_float32_lite` declares (``Conventions.max_parameters``):
mHC-lite's ``φ_res`` has ``n·d·n!`` entries, so at n = 8 the bound admits d ≤ 148 (d = 129:
41.7 M parameters, 167 MB in float32) and leaves out d = 257 (83 M: one build 2–8 s, and
``dtype.low_precision_at_scale`` there ran over 25 min under ``thorough`` on a shared 2-core
machine), with that reason; n ≤ 7 keeps every hidden size the profiles draw (n = 7,
d = 257: 9.1 M). ``thorough`` with it: 3 min 22 s, 2.0 GB resident, on that machine."""


def make_float32_lite(n: int, d: int, *, layer_index: int = 0,
                      dtype: torch.dtype = torch.float64, device: str = "cpu",
                      seed: int = 0) -> Any:
    """mHC-lite in float32 (parameters, arithmetic and results), n ≤ 8: declares
    ``h_res_construction="birkhoff"``, ``compute_dtype = output_dtype = float32`` and
    ``max_parameters`` :data:`LITE_MAX_PARAMETERS`. Its parameters are drawn in float32
    directly (the reference's init, a quarter of the memory traffic of drawing the n·d·n!
    entries of ``φ_res`` in float64 and casting them)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = RoundedLite(n, d, layer_index, dtype=torch.float32, device=device)
    module.output = torch.float32
    module.conventions = Conventions(
        h_res_construction="birkhoff", supported_expansion_rates=(1, 2, 3, 4, 5, 6, 7, 8),
        max_parameters=LITE_MAX_PARAMETERS, compute_dtype=torch.float32,
        output_dtype=torch.float32)
    return module


# --- the new families' bugs with a bfloat16 output (the mutants' bugs, rounded as TileKernels) ---
class ShapeCachedBF16(RoundedMHC, ShapeCache):
    """:class:`RoundedMHC` whose weights under ``inference_mode`` are cached by input shape
    (``tests.mutants.cache_keyed_by_shape``)."""


class ContiguousKernelBF16(RoundedMHC):
    """:class:`RoundedMHC` that reads a strided state's storage with contiguous strides
    (``tests.mutants.assumes_contiguous_strides``)."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:  # type: ignore[override]
        return super().forward(contiguous_read(x), branch)


class DeepUnnormalisedBF16(RoundedMHC, DeepLayersUnnormalised):
    """:class:`RoundedMHC` whose layers from index 8 on skip Sinkhorn–Knopp
    (``tests.mutants.depth_deep_layers_unnormalised``)."""


class BatchedPathBF16(RoundedMHC, BatchedPath):
    """:class:`RoundedMHC` whose weights above 64 tokens take a batch-wide RMS statistic
    (``tests.mutants.token_count_path``)."""


class UnroundedBranchInputBF16(RoundedMHC):
    """:class:`RoundedMHC` that hands the branch its float32 aggregate ``h_preᵀ X`` (not rounded
    to its bfloat16 output): a correct impl, as the exact family must accept."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:  # type: ignore[override]
        xw, h_pre, h_post, H_res = self._inner(x)
        z = branch((h_pre.unsqueeze(-2) @ xw).squeeze(-2).to(x.dtype)).to(xw.dtype)
        return (H_res @ xw + h_post.unsqueeze(-1) * z.unsqueeze(-2)).to(self.output)


class CompiledPathUnmixed(RoundedMHC):
    """:class:`RoundedMHC` whose forward skips the mixing while ``torch.compile`` traces it
    (a compile-only path that differs from eager by O(1), less than 256·eps of bfloat16)."""

    def _mixes(self) -> bool:
        return not torch.compiler.is_compiling()


make_bf16_compiled_unmixed = partial(_rounded, output=torch.bfloat16, cls=CompiledPathUnmixed)
make_float16_compiled_unmixed = partial(_rounded, output=torch.float16, cls=CompiledPathUnmixed)
make_bf16_hc_static = partial(_rounded, output=torch.bfloat16, cls=RoundedStaticHC)
make_float16_hc_static = partial(_rounded, output=torch.float16, cls=RoundedStaticHC)
make_bf16_hc_dynamic = partial(_rounded, output=torch.bfloat16, cls=RoundedDynamicHC)
make_float16_hc_dynamic = partial(_rounded, output=torch.float16, cls=RoundedDynamicHC)
make_bf16_hc_unmixed = partial(_rounded, output=torch.bfloat16, cls=RoundedStaticHC,
                               unmixed=True)
make_float16_hc_unmixed = partial(_rounded, output=torch.float16, cls=RoundedStaticHC,
                                  unmixed=True)
make_bf16_unrounded_branch_input = partial(_rounded, output=torch.bfloat16,
                                           cls=UnroundedBranchInputBF16)
make_bf16_shape_cached = partial(_rounded, output=torch.bfloat16, cls=ShapeCachedBF16)
make_bf16_contiguous_kernel = partial(_rounded, output=torch.bfloat16, cls=ContiguousKernelBF16)
make_bf16_deep_unnormalised = partial(_rounded, output=torch.bfloat16,
                                      cls=DeepUnnormalisedBF16)
make_bf16_batched_path = partial(_rounded, output=torch.bfloat16, cls=BatchedPathBF16)
make_float16_shape_cached = partial(_rounded, output=torch.float16, cls=ShapeCachedBF16)


class BranchOnlyGradient(StaticHyperConnection):
    """Static HC with ``X' = H_res X.detach() + h_post F(h_preᵀ X)ᵀ``: the forward is exact,
    only the branch path carries gradient."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:  # type: ignore[override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return H_res @ x.detach() + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make_branch_only_gradient(n: int, d: int, *, layer_index: int = 0,
                              dtype: torch.dtype = torch.float64, device: str = "cpu",
                              seed: int = 0) -> BranchOnlyGradient:
    """:class:`BranchOnlyGradient` built as the reference static HC, its parameters frozen
    (``requires_grad=False``): the only gradient is ``∂L/∂x = h_pre g_inᵀ``, through the
    branch."""
    module: BranchOnlyGradient = _built(BranchOnlyGradient, n, d, layer_index, seed, dtype,
                                        device)
    module.requires_grad_(False)
    return module
