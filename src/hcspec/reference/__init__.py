"""hcspec reference implementation: static HC, dynamic HC and mHC in PyTorch (see
docs/reference.md).

Layout everywhere: multi-stream state ``x: [B, T, n, d]`` (streams on axis -2), row convention
``x_in = h_preᵀ X``, ``X' = H_res X + h_post zᵀ``. docs/reference.md describes the API and the
choices the papers leave open.
"""

from hcspec.reference.connection import Branch, HyperConnection, Weights, apply_connection
from hcspec.reference.dynamic import DynamicHyperConnection
from hcspec.reference.manifold import ManifoldHyperConnection
from hcspec.reference.sinkhorn import sinkhorn_knopp
from hcspec.reference.static import StaticHyperConnection
from hcspec.reference.streams import expand_streams, reduce_streams
from hcspec.reference.transformer import HCTransformer

__all__ = [
    "Branch",
    "DynamicHyperConnection",
    "HCTransformer",
    "HyperConnection",
    "ManifoldHyperConnection",
    "StaticHyperConnection",
    "Weights",
    "apply_connection",
    "expand_streams",
    "reduce_streams",
    "sinkhorn_knopp",
]
