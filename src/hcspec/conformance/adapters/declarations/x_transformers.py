"""Declaration of the x-transformers target (:mod:`hcspec.conformance.adapters.x_transformers`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "2.31.10"
"""The x-transformers version this adapter was written and checked against."""

_REPRO: Final = "docs/findings/repro/x_transformers_hres_all_ones.py"

HRES_ALL_ONES: Final = Finding(
    "hres-all-ones", "bug",
    "HyperConnection hands Sinkhorn-Knopp one 1 x n row per source stream (a reshape), so H_res "
    "is the all-ones matrix",
    ("constraints.h_res_exact_axis", "constraints.h_res_other_axis",
     "constraints.stream_sum_preserved", "constraints.nonexpansive", "constraints.extreme_logits",
     "gradients.mixing_trainable", "depth.mhc_bounded", "scale.constraints"),
    "docs/findings/x_transformers.md", _REPRO,
    notes={"constraints.h_res_exact_axis": "every row sums to n",
           "constraints.h_res_other_axis": "every column sums to n",
           "constraints.stream_sum_preserved": "with F = 0 every output stream is the sum of all "
                                               "input streams, so 1'X grows n-fold",
           "constraints.nonexpansive": "the residual path multiplies the mean stream by n "
                                       "(1024x after 4 sublayers at n = 4)",
           "constraints.extreme_logits": "at any parameters the exact-axis sums are n",
           "gradients.mixing_trainable": "H_res does not depend on the parameters: the "
                                         "residual-mixing parameters get a zero gradient",
           "depth.mhc_bounded": "a stack of 16 sublayers multiplies the stream sum by n per layer "
                                "(state norm x6e4 after 16 sublayers at n = 2)",
           "scale.constraints": "at every size the exact-axis sums are n"})
"""The one root cause of every x_transformers:hc failure."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "x_transformers:hc", "hcspec.conformance.adapters.x_transformers:make",
        "x-transformers: HyperConnection as Decoder(num_residual_streams=n) uses it (mHC "
        "weights, streams folded into the batch, 5 Sinkhorn iterations)",
        requires="x_transformers", distribution="x-transformers", written_for=WRITTEN_FOR,
        lane=Lane(".ci/thirdparty", f"pip install x-transformers=={WRITTEN_FOR}"),
        findings=(HRES_ALL_ONES,),
    ),
)
"""The built-in target of x-transformers (discovered by
:mod:`hcspec.conformance.subjects.targets`)."""
