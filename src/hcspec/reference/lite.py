"""mHC-lite (arXiv 2601.05732): mHC with ``H_res`` a convex combination of permutation
matrices instead of a Sinkhorn–Knopp projection.

Per token with state ``x_l ∈ R^{n×d}`` (as :mod:`hcspec.reference.manifold`, mHC Eq. 7–8)::

    x'      = RMSNorm(vec(x_l))
    H̃_pre  = α_pre · (x' φ_pre) + b_pre,    h_pre  = σ(H̃_pre)
    H̃_post = α_post · (x' φ_post) + b_post, h_post = 2σ(H̃_post)
    H̃_res  = α_res · (x' φ_res) + b_res     (K logits, one per permutation)
    H_res   = Σ_k softmax(H̃_res)_k P_k      (P_k[i, σ_k(i)] = 1)

``H_res`` is doubly stochastic exactly for any permutation set (spec
``constructions.birkhoff_exact``): no iteration count, only the rounding of the K-term sum.
The torch statement of ``H_res`` is :func:`hcspec.formulas.mhc.birkhoff` (the kit's oracle uses
the same one). The module declares ``h_res_construction="birkhoff"`` to the conformance kit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import torch
from torch import nn

from hcspec.formulas.mhc import birkhoff
from hcspec.reference import _checks
from hcspec.reference.connection import HyperConnection, Weights
from hcspec.reference.sinkhorn import working_precision
from hcspec.spec.record import Formula, birkhoff_permutations

ALPHA_INIT = 0.01
"""Initial gating scalars (mHC App. A.1, as the reference mHC)."""
SUPPORTED = (1, 2, 3, 4, 5, 6)
"""The expansion rates the built-in target declares. The module itself runs n ≤ 8 (``H_res``
gathers the 8! = 40320 weights by index, :func:`hcspec.formulas.mhc.birkhoff`, never a
``[K, n, n]`` stack); the built-in target stops at 6 for the kit's time: at n = 8, ``φ_res``
has ``n·d·n!`` entries (83 M at d = 257, 0.66 GB in float64, the construction's own size), one
build draws them in 2–8 s on a CPU, and ``dtype.low_precision_at_scale`` at n = 8, d = 257 ran
over 25 min under ``thorough`` on a shared 2-core machine. A target declaring n = 8 bounds its
sizes by ``Conventions.max_parameters`` (the float32 stand-in
``tests.conformance.properties.precision_standins:make_float32_lite``: 48 M, n = 8 up to
d = 148), and the kit leaves the larger ones out with that reason."""
IDENTITY_WEIGHT = 0.7
"""The softmax weight of the identity permutation at init (see :class:`LiteHyperConnection`)."""


class LiteHyperConnection(HyperConnection):
    """mHC-lite around one sublayer: σ / 2σ gates as mHC, ``H_res = Σ_k a_k P_k``.

    Parameters: ``phi_pre [n·d, n]``, ``phi_post [n·d, n]``, ``phi_res [n·d, K]``, ``b_pre
    [n]``, ``b_post [n]``, ``b_res [K]``, scalars ``alpha_pre``, ``alpha_post``, ``alpha_res``;
    K the number of permutations (all ``n!`` by default, in lexicographic order, the identity
    first). Init: φ ~ N(0, 1/(n·d)), α = 0.01, ``b_pre = b_post = 0``, ``b_res`` puts weight
    :data:`IDENTITY_WEIGHT` on the identity and spreads the rest evenly (``H_res`` near the
    identity, as the reference mHC's diagonal 0.7).

    Args:
        n: expansion rate, 1 ≤ n ≤ 8 (K = n! ≤ 40320). d: hidden size, ≥ 1.
        layer_index: stored, ≥ 0.
        permutations: the permutation set (each a tuple ``p`` with ``P[i, p[i]] = 1``); None:
            all ``n!``. A set that is not the declared one is a bug the kit catches (its
            mutants pass a duplicated one while declaring all n!).
        norm_eps: ε of the RMSNorm of the flattened state.
        dtype, device: of the parameters.

    Shapes of calls: :class:`hcspec.reference.connection.HyperConnection`; :meth:`logits`
    returns ``H̃_res [B, T, K]``. float16/bfloat16 compute the mean square in float32.

    Raises:
        ValueError: a size not a positive integer, n > 8, a set that is not of permutations
            of ``range(n)``.
    """

    kind: ClassVar[str] = "mhc"
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        **HyperConnection.conventions, "h_res_construction": "birkhoff",
        "supported_expansion_rates": SUPPORTED,
        "notes": "hcspec reference mHC-lite: H_res = Σ_k softmax(a)_k P_k over all n! "
                 "permutations (arXiv 2601.05732)"})
    """The declaration: mHC's gates, ``H_res`` by the ``birkhoff`` construction."""

    def __init__(self, n: int, d: int, layer_index: int = 0, *,
                 permutations: tuple[tuple[int, ...], ...] | None = None,
                 norm_eps: float = 1e-6, dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None) -> None:
        super().__init__(n, d)
        if self.n > 8:
            raise ValueError(f"mHC-lite enumerates n! permutations: n <= 8, got {self.n}")
        self.layer_index = _checks.non_negative_int("layer_index", layer_index)
        self.formula = Formula(construction="birkhoff", permutations=permutations)
        self.permutations = birkhoff_permutations(self.formula, self.n)
        if not norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {norm_eps!r}")
        self.norm_eps = float(norm_eps)
        n, nd, K = self.n, self.n * self.d, len(self.permutations)

        def param(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape, dtype=dtype, device=device))

        self.phi_pre = param(nd, n)
        self.phi_post = param(nd, n)
        self.phi_res = param(nd, K)
        self.b_pre = param(n)
        self.b_post = param(n)
        self.b_res = param(K)
        self.alpha_pre = param()
        self.alpha_post = param()
        self.alpha_res = param()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Apply the init documented on the class (φ from torch's global generator)."""
        K = len(self.permutations)
        identity = tuple(range(self.n))
        bias = (math.log(IDENTITY_WEIGHT * (K - 1) / (1.0 - IDENTITY_WEIGHT)) if K > 1
                else 0.0)
        std = 1.0 / math.sqrt(self.n * self.d)
        with torch.no_grad():
            for phi in (self.phi_pre, self.phi_post, self.phi_res):
                phi.normal_(0.0, std)
            self.b_pre.zero_()
            self.b_post.zero_()
            self.b_res.copy_(torch.tensor([bias if p == identity else 0.0
                                           for p in self.permutations]))
            for alpha in (self.alpha_pre, self.alpha_post, self.alpha_res):
                alpha.fill_(ALPHA_INIT)

    def logits(self, x: torch.Tensor) -> Weights:
        """``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,K])`` at ``x [B,T,n,d]``, in its
        dtype and device, differentiable.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]`` with this module's sizes.
        """
        x = self._check_state(x)
        batch, tokens, n, d = x.shape
        flat = x.reshape(batch, tokens, n * d)
        norm = torch.linalg.vector_norm(working_precision(flat), dim=-1, keepdim=True)
        inv_rms = torch.rsqrt(norm.square() / (n * d) + self.norm_eps).to(flat.dtype)
        return (self.alpha_pre * (inv_rms * (flat @ self.phi_pre)) + self.b_pre,
                self.alpha_post * (inv_rms * (flat @ self.phi_post)) + self.b_post,
                self.alpha_res * (inv_rms * (flat @ self.phi_res)) + self.b_res)

    def _weights(self, x: torch.Tensor) -> Weights:
        pre, post, res = self.logits(x)
        return torch.sigmoid(pre), 2.0 * torch.sigmoid(post), birkhoff(self.formula, res)
