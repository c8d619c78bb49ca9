"""Which mutant shows each property can fail, beyond the mutants' own ``CAUGHT_BY``.

The registry meta-test (tests/conformance/test_catalogue.py) requires every property to be in
some mutant's ``CAUGHT_BY``, in :data:`ALSO_FAILED_BY`, or in :data:`UNCOVERED` with a reason —
exactly one of the three. ``CAUGHT_BY`` names the properties a mutant is written for (the
mutation table confirms them); :data:`ALSO_FAILED_BY` records properties a mutant fails as
well when run alone under ``ci`` (tests/conformance/test_mutant_coverage.py confirms them).
"""

from __future__ import annotations

from typing import Final

ALSO_FAILED_BY: Final[dict[str, str]] = {
    "conventions.branch_input": "folded_wrong_order",
    "gradients.closed_form_probed": "backward_transposed",
    "gradients.finite_extreme": "sinkhorn_plain_domain",
    "reduction.mhc_n1_residual": "mixing_bfloat16",
    "reduction.n1_prenorm_forward": "tanh_erases_residual",
    "reduction.n1_prenorm_backward": "residual_detached",
    "dtype.low_precision": "sinkhorn_plain_domain",
    "variant.gates": "h_post_sigma",
}
"""Property id -> a mutant (module of this package) that fails it, run alone under ``ci``."""

_NOT_YET = ("; no mutant is written for it yet: adding one adds a row to the mutation table, "
            "which is kept fixed while the catalogue's declarations change")

UNCOVERED: Final[dict[str, str]] = {
    "customop.opcheck": "every mutant is a plain torch module without custom ops (the property "
                        "is not applicable to it); tests/conformance/test_customop.py runs a "
                        "custom op whose fake kernel has the wrong shape" + _NOT_YET,
    "customop.double_backward": "every mutant declares no double backward (the property is "
                                "not applicable to it); tests/conformance/test_customop.py runs "
                                "a declared one whose custom op's backward detaches" + _NOT_YET,
    "customop.vmap": "every mutant declares no vmap (the property is not applicable to it); "
                     "tests/conformance/test_customop.py runs a declared one whose forward "
                     "calls .item() on a parameter-dependent value" + _NOT_YET,
    "customop.export": "every mutant is a plain torch module without custom ops (the property "
                       "is not applicable to it); tests/conformance/test_customop.py runs a "
                       "target that names a custom op its forward bypasses" + _NOT_YET,
    "shape.expand": "a mutant would return expand(h) with the streams on another axis "
                    "([B, T, d, n])" + _NOT_YET,
    "shape.reduce": "a mutant would keep the stream axis in reduce(x) ([B, T, 1, d])" + _NOT_YET,
    "conventions.expand_replicates": "a mutant would put h on stream 0 only (zeros elsewhere)"
                                     + _NOT_YET,
    "conventions.declaration": "a mutant would declare reduce='mean' for n = 4 only"
                               + _NOT_YET,
    "law.token_mixing_branch": "every mutant that misroutes the tokens to the branch "
                               "(branch_tokens_folded) fails its prerequisites shape.output and "
                               "shape.branch_once first, so it is blocked; a mutant that passes "
                               "them and still mixes the branch's tokens wrongly" + _NOT_YET,
    "constraints.h_res_nonnegative": "a mutant would return (1 + a)·H − a·11ᵀ/n (unit sums, "
                                     "negative entries)" + _NOT_YET,
    "state.deterministic_eval": "a mutant would keep dropout active in eval mode" + _NOT_YET,
    "depth.hc_growth": "it reports HC's growth and fails only on a non-finite state; a mutant "
                       "would overflow at layer 12" + _NOT_YET,
    "parallel.input_gradients": "a distributed mutant would get the backward of a collective "
                                "wrong (an all-gather whose backward does not reduce-scatter) "
                                "while its forward stays right" + _NOT_YET,
    "parallel.world_size": "a distributed mutant would scale its output by the world size "
                           "(right on one group size only)" + _NOT_YET,
}
"""Property id -> why no mutant shows it failing."""
