"""Declaration of the mhc-pytorch target (:mod:`hcspec.conformance.adapters.mhc_pytorch`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.2.3"
"""The mhc-pytorch version this adapter was written and checked against."""

_REPRO: Final = "docs/findings/repro"

UNSHIFTED_EXP: Final = Finding(
    "sinkhorn-unshifted-exp", "bug",
    "Sinkhorn–Knopp exponentiates the logits without a shift, so the exp overflows",
    ("constraints.extreme_logits", "gradients.finite_extreme", "dtype.low_precision",
     "dtype.low_precision_at_scale"),
    "docs/findings/mhc_pytorch.md", f"{_REPRO}/mhc_pytorch_sinkhorn_nonfinite.py",
    notes={"constraints.extreme_logits": "inf/inf and 0/0 give NaN outputs",
           "gradients.finite_extreme": "the gradients are NaN",
           "dtype.low_precision": "in float16 a row sum overflows once a logit passes ~9.6 (unit "
                                  "parameter noise reaches 11): the forward is NaN where float32 "
                                  "is finite",
           "dtype.low_precision_at_scale": "in float16 at n = 8, d = 257 the forward is not "
                                           "finite where float32 is"})
"""One root cause, four properties (float16 brings it to ordinary parameters)."""

ADAPTER_COMPILE: Final = Finding(
    "adapter-breaks-trace", "limitation",
    "the adapter's forward breaks the trace (its torch.equal check that the state is "
    "replicated, then its call recorder); the package's own ManifoldHyperConnections compiles "
    "with fullgraph=True and equals eager",
    ("compile.fullgraph",), "docs/findings/mhc_pytorch.md",
    f"{_REPRO}/mhc_pytorch_compile_fullgraph.py")

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "mhc_pytorch:mhc", "hcspec.conformance.adapters.mhc_pytorch:make",
        "mhc-pytorch: ManifoldHyperConnections (replicates h into n streams and collapses them "
        "inside every call; checked on replicated states)",
        requires="mhc", distribution="mhc-pytorch", written_for=WRITTEN_FOR,
        lane=Lane(".ci/thirdparty", "pip install --target .ci-mhc --no-deps "
                  f"--ignore-requires-python mhc-pytorch=={WRITTEN_FOR}",
                  note="Installed into .ci-mhc/ (on PYTHONPATH for its tests and this target "
                       "only), so .venv never holds the import name mhc."),
        findings=(UNSHIFTED_EXP, ADAPTER_COMPILE),
    ),
)
"""The built-in target of mhc-pytorch (discovered by :mod:`hcspec.conformance.subjects.targets`);
its prefix predates the ``<import name>:`` rule (the import name ``mhc`` is shared by several
distributions)."""
