"""Declarations of the hyper-connections targets
(:mod:`hcspec.conformance.adapters.hyper_connections`)."""

from __future__ import annotations

from typing import Any, Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.4.11"
"""The hyper-connections version this adapter was written and checked against."""

_ADAPTER: Final = "hcspec.conformance.adapters.hyper_connections"


def _target(name: str, factory: str, what: str, detail: str | None = None,
            **options: Any) -> BuiltinTarget:
    return BuiltinTarget(
        f"hyper_connections:{name}", f"{_ADAPTER}:{factory}", f"hyper-connections: {what}",
        requires="hyper_connections", distribution="hyper-connections", options=options,
        written_for=WRITTEN_FOR, detail=detail)


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    _target("hc", "make_hc", "HyperConnections (dynamic HC), defaults (tanh)"),
    _target("hc-notanh", "make_hc", "HyperConnections, linear dynamic weights", tanh=False),
    _target("hc-dropout", "make_hc", "HyperConnections with dropout, in training mode",
            dropout=0.1),
    _target("mhc", "make_mhc",
            "ManifoldConstrainedHyperConnections (mHC, streams folded into the batch), defaults "
            "(plain-domain Sinkhorn, 20 rounds)"),
    _target("mhc-log", "make_mhc", "mHC (folded), log-domain Sinkhorn",
            log_domain_sinkhorn=True),
    _target("mhc-iters10", "make_mhc", "mHC (folded), 10 Sinkhorn rounds", sinkhorn_iters=10),
    _target("mhc-proposals2", "make_mhc", "mHC (folded), two dynamic proposals averaged",
            num_dynamic_alpha_proposals=2),
    _target("mhc-dropout", "make_mhc", "mHC (folded) with dropout, in training mode",
            dropout=0.1),
    _target("mhc-v2", "make_mhc_v2",
            "mHCv2.ManifoldConstrainedHyperConnections (mHC, [B,T,n,d]), defaults"),
    _target("mhc-v2-log", "make_mhc_v2", "mHC v2, log-domain Sinkhorn",
            log_domain_sinkhorn=True),
    _target("mhc-v2-mixnorm", "make_mhc_v2",
            "mHC v2, streams mixed by a 1×1 conv before the norm", mix_streams_before_norm=True),
    _target("mhc-triton", "make_mhc_v2",
            "mHC v2 with the package's Triton Sinkhorn kernel (log domain, forward and "
            "backward), called directly",
            detail="hcspec.conformance.adapters._triton:environment_note",
            use_triton_sinkhorn=True),
)
"""The built-in targets of hyper-connections (discovered by :mod:`hcspec.conformance.targets`);
the Triton target's ``detail`` says where the kernels will run in this process."""
