"""The one vocabulary for the kinds of connection the project talks about.

The spec's counts, the reference, the conformance kit and the benchmarks name a connection by one
of these strings:

- ``hc-static`` — static Hyper-Connections (SHC): constant h_pre, h_post, H_res
  (HC arXiv:2409.19606 §2.1 Eq. 1–5);
- ``hc-dynamic`` — dynamic Hyper-Connections (DHC): the weights depend on the state through
  tanh projections of a per-stream LayerNorm (HC §2.2 Eq. 10–13);
- ``mhc`` — manifold-constrained Hyper-Connections: H_res projected onto the doubly stochastic
  matrices by Sinkhorn–Knopp, H_pre = σ(·), H_post = 2σ(·) (mHC arXiv:2512.24880 Eq. 7–9).

The pre-norm residual ``x + F(x)`` is the baseline the benchmarks compare with; it is not a kind
of connection (it is static HC at n = 1, theorem ``reduction.prenorm_forward``) and has no entry
here.
"""

from __future__ import annotations

from typing import Final, Literal

Kind = Literal["hc-static", "hc-dynamic", "mhc"]
"""A connection kind, as the kit's ``impl.kind`` and the counts take it."""

HC_STATIC: Final = "hc-static"
HC_DYNAMIC: Final = "hc-dynamic"
MHC: Final = "mhc"

KINDS: Final[tuple[Kind, ...]] = (HC_STATIC, HC_DYNAMIC, MHC)
"""Every kind, in the order the papers introduce them."""

DESCRIPTIONS: Final[dict[Kind, str]] = {
    HC_STATIC: "static Hyper-Connections (SHC), HC arXiv:2409.19606 §2.1",
    HC_DYNAMIC: "dynamic Hyper-Connections (DHC), HC arXiv:2409.19606 §2.2",
    MHC: "manifold-constrained Hyper-Connections, mHC arXiv:2512.24880 §4",
}


def require_kind(kind: object) -> Kind:
    """Return ``kind`` if it is one of :data:`KINDS`.

    Raises:
        ValueError: naming the accepted kinds and the value received.
    """
    for known in KINDS:
        if kind == known:
            return known
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
