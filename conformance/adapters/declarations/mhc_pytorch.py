"""Declaration of the mhc-pytorch target (:mod:`hcspec.conformance.adapters.mhc_pytorch`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.2.3"
"""The mhc-pytorch version this adapter was written and checked against."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "mhc_pytorch:mhc", "hcspec.conformance.adapters.mhc_pytorch:make",
        "mhc-pytorch: ManifoldHyperConnections (replicates h into n streams and collapses them "
        "inside every call; checked on replicated states)",
        requires="mhc", distribution="mhc-pytorch", written_for=WRITTEN_FOR,
    ),
)
"""The built-in target of mhc-pytorch (discovered by :mod:`hcspec.conformance.targets`); its
prefix predates the ``<import name>:`` rule (the import name ``mhc`` is shared by several
distributions)."""
