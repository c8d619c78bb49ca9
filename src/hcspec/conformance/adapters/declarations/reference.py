"""Declarations of hcspec's reference targets (``reference:hc-static``, ``reference:hc-dynamic``,
``reference:mhc``, ``reference:mhc-fast``, ``reference:mhc-lite``, ``reference:mhc-ortho``);
the factories are those of
:mod:`hcspec.reference.targets` (see :mod:`hcspec.conformance.adapters.reference`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

SINKHORN_ROUNDS: Final = 20
"""The reference mHC's Sinkhorn–Knopp rounds, as the description says (a test checks it equals
:data:`hcspec.reference.sinkhorn.DEFAULT_ITERATIONS`, which needs torch to import)."""

_FACTORIES: Final = "hcspec.reference.targets"


_SHARDING: Final = "hcspec.conformance.parallel.reference_targets"
"""The module of the reference factories with the sharding capability."""


def _target(kind: str, factory: str, what: str) -> BuiltinTarget:
    return BuiltinTarget(f"reference:{kind}", f"{_FACTORIES}:{factory}",
                         f"hcspec reference implementation: {what}",
                         sharding=f"{_SHARDING}:make_{kind.replace('-', '_')}")


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    _target("hc-static", "hc_static", "static HC (HC §2.2)"),
    _target("hc-dynamic", "hc_dynamic", "dynamic HC (HC §2.3)"),
    _target("mhc", "mhc", f"mHC (mHC §4, Sinkhorn–Knopp, {SINKHORN_ROUNDS} rounds)"),
    _target("mhc-fast", "mhc_fast", "mHC, fast path (same math as reference:mhc)"),
    BuiltinTarget("reference:mhc-lite", f"{_FACTORIES}:mhc_lite",
                  "hcspec reference implementation: mHC-lite (H_res = Σ softmax(a)_k P_k over "
                  "all n! permutations, arXiv 2601.05732)"),
    BuiltinTarget("reference:mhc-ortho", f"{_FACTORIES}:mhc_ortho",
                  "hcspec reference implementation: mHC with an orthostochastic H_res (Q∘Q, Q "
                  "by 10 Newton–Schulz iterations)"),
    BuiltinTarget("reference:qwen4-exp", f"{_FACTORIES}:qwen4_exp",
                  "hcspec reference implementation: Qwen4-exp's gated read (H_res = I)"),
)
"""The reference's built-in targets (discovered by :mod:`hcspec.conformance.subjects.targets`)."""
