"""Declaration of the x-transformers target (:mod:`hcspec.conformance.adapters.x_transformers`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "2.31.10"
"""The x-transformers version this adapter was written and checked against."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "x_transformers:hc", "hcspec.conformance.adapters.x_transformers:make",
        "x-transformers: HyperConnection as Decoder(num_residual_streams=n) uses it (mHC "
        "weights, streams folded into the batch, 5 Sinkhorn iterations)",
        requires="x_transformers", distribution="x-transformers", written_for=WRITTEN_FOR,
    ),
)
"""The built-in target of x-transformers (discovered by :mod:`hcspec.conformance.targets`)."""
