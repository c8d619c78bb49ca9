"""The author facade: what a property family imports to write its checks.

A family module (``hcspec.conformance.families.<family>``) imports its machinery from here, one
import instead of one per kit module:

* declaring a property (``declare``), its cases (``Cases``, ``shift``, ``Case``), what it
  requires of a target (``capability``, ``kinds``, ``Requirement`` and the named requirements);
* the context a check runs in (``Context``; ``ctx.observe``, ``ctx.record``, ``ctx.inputs``),
  how it ends other than passing (``PropertyFailure``, ``NotApplicable``, ``Inconclusive``,
  ``FactoryRejected``), float64 views (``f64``, ``np64``);
* the kit modules a check reaches by name (``metrics``, ``rules``, ``salts``, ``strategies``,
  ``probes``, ``precision``), the target side (``HyperConnectionImpl``, the capability names
  and their probes), and the computations several families share (``common``'s, the mHC
  weights, the injected branches, an impl's parameters).

What only one family needs (the Sinkhorn variant fit, the stack driving, the published step,
the parallel harness, the finite differences) it imports from that machinery module itself.
This module defines nothing: it re-exports, as ``hypothesis.strategies`` re-exports from its
``_internal`` package, so the machinery can move without touching the families.

A new property touches two files: its family module (``@declare`` and the check, written with
the names below) and its mutant (``tests/mutants``); docs/architecture.md has the recipe.
"""

from __future__ import annotations

from hcspec.conformance import (
    metrics,
    probes,
    rules,
    salts,
    strategies,
)
from hcspec.conformance.machinery import precision
from hcspec.conformance.machinery.base import Context, f64, np64, seeded_global_rng
from hcspec.conformance.machinery.building import all_parameters, floating_parameters
from hcspec.conformance.machinery.cases import SCALE_HEADROOM, Cases, resized, shift, size_rows
from hcspec.conformance.machinery.common import (
    axis_sums,
    branch64,
    by_exact_axis,
    expected_output,
    flat_jacobian,
    forward_backward,
    subtract_flat_step,
)
from hcspec.conformance.machinery.declaration import declare
from hcspec.conformance.machinery.errors import (
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
)
from hcspec.conformance.machinery.inputs import CheckedBranch
from hcspec.conformance.machinery.mhc_weights import (
    MHCWeights,
    eps_exact_axis,
    orthostochastic_defect,
    worst_eps_token,
)
from hcspec.conformance.machinery.requirements import (
    CHEAP_BACKEND,
    COMPILE,
    CUDA,
    DIFFERENTIABLE,
    DISTRIBUTED,
    ELEMENTWISE_READ,
    FULL_BACKEND,
    NAMED_PARAMETERS,
    PER_STREAM_READ,
    PROBED_H_PRE,
    PROBING,
    RANKS_START,
    READ_REPORTED,
    SHARDING,
    TRACE_BACKEND,
    TRACEABLE,
    TWO_RANKS,
    WEIGHTS_OR_PROBING,
    Requirement,
    Subject,
    any_state_domain,
    capability,
    compile_backend,
    float64,
    kinds,
    not_bridged,
)
from hcspec.conformance.protocol import (
    CUSTOM_OPS,
    ELEMENTWISE_WEIGHTS,
    EXPAND,
    LOAD_PUBLISHED,
    LOGITS,
    PARAMETERS,
    PUBLISHED_PARAMETERS,
    READ_MAP,
    REDUCE,
    STACK,
    THREADS,
    WEIGHTS,
    Branch,
    HyperConnectionImpl,
    Stack,
    Weights,
    conventions_of,
    has_stack,
    has_stack_sublayer,
    has_stack_weights,
    has_threads,
    has_train_eval,
    has_weights,
    stack_pre_mix,
)
from hcspec.conformance.strategies import (
    SMOOTH_BRANCHES,
    Case,
    CountingBranch,
    gaussian,
)

__all__ = [
    "CHEAP_BACKEND",
    "COMPILE",
    "CUDA",
    "CUSTOM_OPS",
    "DIFFERENTIABLE",
    "DISTRIBUTED",
    "ELEMENTWISE_READ",
    "ELEMENTWISE_WEIGHTS",
    "EXPAND",
    "FULL_BACKEND",
    "LOAD_PUBLISHED",
    "LOGITS",
    "NAMED_PARAMETERS",
    "PARAMETERS",
    "PER_STREAM_READ",
    "PROBED_H_PRE",
    "PROBING",
    "PUBLISHED_PARAMETERS",
    "RANKS_START",
    "READ_MAP",
    "READ_REPORTED",
    "REDUCE",
    "SCALE_HEADROOM",
    "SHARDING",
    "SMOOTH_BRANCHES",
    "STACK",
    "THREADS",
    "TRACEABLE",
    "TRACE_BACKEND",
    "TWO_RANKS",
    "WEIGHTS",
    "WEIGHTS_OR_PROBING",
    "Branch",
    "Case",
    "Cases",
    "CheckedBranch",
    "Context",
    "CountingBranch",
    "FactoryRejected",
    "HyperConnectionImpl",
    "Inconclusive",
    "MHCWeights",
    "NotApplicable",
    "PropertyFailure",
    "Requirement",
    "Stack",
    "Subject",
    "Weights",
    "all_parameters",
    "any_state_domain",
    "axis_sums",
    "branch64",
    "by_exact_axis",
    "capability",
    "compile_backend",
    "conventions_of",
    "declare",
    "eps_exact_axis",
    "expected_output",
    "f64",
    "flat_jacobian",
    "float64",
    "floating_parameters",
    "forward_backward",
    "gaussian",
    "has_stack",
    "has_stack_sublayer",
    "has_stack_weights",
    "has_threads",
    "has_train_eval",
    "has_weights",
    "kinds",
    "metrics",
    "not_bridged",
    "np64",
    "orthostochastic_defect",
    "precision",
    "probes",
    "resized",
    "rules",
    "salts",
    "seeded_global_rng",
    "shift",
    "size_rows",
    "stack_pre_mix",
    "strategies",
    "subtract_flat_step",
    "worst_eps_token",
]
