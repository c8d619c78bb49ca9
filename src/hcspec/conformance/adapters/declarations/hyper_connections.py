"""Declarations of the hyper-connections targets
(:mod:`hcspec.conformance.adapters.hyper_connections`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.4.11"
"""The hyper-connections version this adapter was written and checked against."""

_ADAPTER: Final = "hcspec.conformance.adapters.hyper_connections"
_PAGE: Final = "docs/findings/hyper_connections.md"
_REPRO: Final = "docs/findings/repro"

LANE: Final = Lane(".ci/thirdparty", f"pip install hyper-connections=={WRITTEN_FOR}")
"""CI installs the package into the README's .venv (after the main test run)."""

KERNEL_LANE: Final = Lane(
    ".ci/thirdparty",
    f"pip install triton==3.9.0 liger-kernel==0.8.5 packaging hyper-connections=={WRITTEN_FOR}",
    profile="kernel",
    note="Run on the CPU through Triton's interpreter (TRITON_INTERPRET=1) in .ci-venv-kernels, "
         "on a subset of the properties (.ci/thirdparty's KERNEL_ONLY); the findings are those "
         "of the whole kernel profile.")
"""The Triton target runs in the kernels' venv, under Triton's CPU interpreter."""

_DROPOUT_HC: Final = Finding(
    "dropout-on-residual", "bug",
    "(training mode only) dropout is applied to the whole new state, residual path included, "
    "so forwards are random",
    ("law.reported", "law.probed", "law.reported_matches_probed", "independence.batch",
     "independence.token", "gradients.fd_input", "gradients.fd_parameters",
     "reduction.n1_prenorm_forward", "reduction.n1_prenorm_backward",
     "reduction.dynamic_init_static", "reduction.init_prenorm_stack", "law.permutation_mixing",
     "compile.fullgraph", "scale.law", "scale.batch_composition", "strides.non_contiguous",
     "inference.modes", "inference.repeated_calls", "exact.permutation_mixing"),
    _PAGE, f"{_REPRO}/hc_dropout_on_residual.py")
"""Dropout on the residual path, as the HC module shows it (the properties of dynamic HC)."""

_DROPOUT_MHC: Final = replace(_DROPOUT_HC, properties=(
    "law.reported", "law.probed", "law.reported_matches_probed", "independence.batch",
    "independence.token", "constraints.stream_sum_preserved", "constraints.nonexpansive",
    "constraints.extreme_logits", "gradients.fd_input", "gradients.fd_parameters",
    "gradients.finite_extreme", "reduction.mhc_n1_residual", "compile.fullgraph",
    "depth.mhc_bounded", "scale.law", "scale.batch_composition", "strides.non_contiguous",
    "inference.modes", "inference.repeated_calls", "exact.permutation_mixing"))
"""The same root cause as the mHC module shows it (the properties of mHC)."""

_PLAIN_SINKHORN: Final = Finding(
    "plain-sinkhorn-large-logits", "bug",
    "the default plain-domain Sinkhorn–Knopp fails at large logit gaps "
    "(log_domain_sinkhorn=True does not)",
    ("constraints.extreme_logits", "gradients.finite_extreme"), _PAGE,
    f"{_REPRO}/hc_plain_sinkhorn_large_logits.py", dtypes=("float32",),
    notes={"constraints.extreme_logits": "it underflows: an H_res column becomes exactly 0 "
                                         "(a stream dropped)",
           "gradients.finite_extreme": "NaN gradients"})

_PROPOSALS_AVERAGE: Final = Finding(
    "proposals-average-bound", "limitation",
    "H_res is the average of 2 Sinkhorn outputs; the kit's Birkhoff-Hopf bound at the "
    "average's projective diameter does not apply to an average",
    ("constraints.h_res_other_axis", "scale.constraints"), _PAGE,
    f"{_REPRO}/hc_proposals_average_bound.py",
    notes={"constraints.h_res_other_axis": "ci reaches it since the property compares only "
                                           "tokens whose bound can fail"})

_TRITON_COMPILE: Final = Finding(
    "triton-interpreter-compile", "limitation",
    "under Triton's interpreter TorchDynamo cannot trace any Triton kernel launch "
    "(Unsupported method call)", ("compile.fullgraph",), "docs/findings/liger_kernel.md",
    f"{_REPRO}/triton_interpreter_compile.py")
"""Triton's CPU interpreter, not the kernel (shared with liger_kernel:mhc)."""

_TRITON_BACKWARD: Final = Finding(
    "triton-sinkhorn-backward", "bug",
    "the Triton Sinkhorn backward uses the final matrix for every round, exact only once "
    "Sinkhorn-Knopp has converged",
    ("gradients.fd_input", "gradients.fd_parameters"), "docs/findings/liger_kernel.md",
    f"{_REPRO}/hc_triton_sinkhorn_backward.py",
    notes={"gradients.fd_input": "perturbed parameters: 2.8e-2 > 1e-2; the PyTorch log-domain "
                                 "mhc-v2-log passes the same case at 1.2e-4"})

_TRITON_PADDING: Final = Finding(
    "triton-sinkhorn-padding", "bug",
    "the Triton Sinkhorn kernel pads with -1e10 and returns NaN once a row or column of logits "
    "is below it (parameters x1e4: logit -1.65e10)",
    ("constraints.extreme_logits", "gradients.finite_extreme"), "docs/findings/liger_kernel.md",
    f"{_REPRO}/hc_triton_sinkhorn_padding.py",
    notes={"gradients.finite_extreme": "NaN forward and gradients"})


def _target(name: str, factory: str, what: str, detail: str | None = None,
            findings: tuple[Finding, ...] = (), lane: Lane = LANE,
            **options: Any) -> BuiltinTarget:
    return BuiltinTarget(
        f"hyper_connections:{name}", f"{_ADAPTER}:{factory}", f"hyper-connections: {what}",
        requires="hyper_connections", distribution="hyper-connections", options=options,
        written_for=WRITTEN_FOR, detail=detail, lane=lane, findings=findings)


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    _target("hc", "make_hc", "HyperConnections (dynamic HC), defaults (tanh)"),
    _target("hc-notanh", "make_hc", "HyperConnections, linear dynamic weights", tanh=False),
    _target("hc-dropout", "make_hc", "HyperConnections with dropout, in training mode",
            findings=(_DROPOUT_HC,), dropout=0.1),
    _target("mhc", "make_mhc",
            "ManifoldConstrainedHyperConnections (mHC, streams folded into the batch), defaults "
            "(plain-domain Sinkhorn, 20 rounds)", findings=(_PLAIN_SINKHORN,)),
    _target("mhc-log", "make_mhc", "mHC (folded), log-domain Sinkhorn",
            log_domain_sinkhorn=True),
    _target("mhc-iters10", "make_mhc", "mHC (folded), 10 Sinkhorn rounds",
            findings=(_PLAIN_SINKHORN,), sinkhorn_iters=10),
    _target("mhc-proposals2", "make_mhc", "mHC (folded), two dynamic proposals averaged",
            findings=(_PLAIN_SINKHORN, _PROPOSALS_AVERAGE), num_dynamic_alpha_proposals=2),
    _target("mhc-dropout", "make_mhc", "mHC (folded) with dropout, in training mode",
            findings=(_DROPOUT_MHC,), dropout=0.1),
    _target("mhc-v2", "make_mhc_v2",
            "mHCv2.ManifoldConstrainedHyperConnections (mHC, [B,T,n,d]), defaults",
            findings=(_PLAIN_SINKHORN,)),
    _target("mhc-v2-log", "make_mhc_v2", "mHC v2, log-domain Sinkhorn",
            log_domain_sinkhorn=True),
    _target("mhc-v2-mixnorm", "make_mhc_v2",
            "mHC v2, streams mixed by a 1×1 conv before the norm", findings=(_PLAIN_SINKHORN,),
            mix_streams_before_norm=True),
    _target("mhc-triton", "make_mhc_v2",
            "mHC v2 with the package's Triton Sinkhorn kernel (log domain, forward and "
            "backward), called directly",
            detail="hcspec.conformance.adapters._triton:environment_note",
            findings=(_TRITON_COMPILE, _TRITON_BACKWARD, _TRITON_PADDING), lane=KERNEL_LANE,
            use_triton_sinkhorn=True),
)
"""The built-in targets of hyper-connections (discovered by
:mod:`hcspec.conformance.subjects.targets`); the Triton target's ``detail`` says where the
kernels will run in this process."""
