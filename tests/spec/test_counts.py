"""Parameter/FLOP callables agree with their sympy formulas and the paper's printed figures."""

from __future__ import annotations

import pytest

from hcspec.spec import counts
from hcspec.spec.formulas import d, n


def test_paper_figures_for_olmo_1b() -> None:
    # HC arXiv:2409.19606 App. B: OLMo-1B (L = 16, d = 2048).
    assert counts.extra_params("shc", 4, 2048, 16) == 768
    assert counts.extra_params("dhc", 4, 2048, 16) == 394_048


@pytest.mark.parametrize("rate", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("width", [1, 7, 2048])
def test_callables_match_the_sympy_expressions(rate: int, width: int) -> None:
    at = {n: rate, d: width, counts.theta_norm: 0}
    assert counts.params_per_module("shc", rate, width) == counts.SHC_PARAMS.subs(at)
    assert counts.params_per_module("dhc", rate, width) == counts.DHC_PARAMS.subs(at)
    assert counts.params_per_module("mhc", rate, width) == counts.MHC_PARAMS.subs(at)
    assert counts.flops_per_module("shc", rate, width) == counts.SHC_FLOPS.subs(at)
    assert counts.flops_per_module("dhc", rate, width) == counts.DHC_FLOPS.subs(at)


def test_shc_total_is_2L_times_n_squared_plus_2n() -> None:
    for rate in range(1, 6):
        for layers in (1, 16, 32):
            assert counts.extra_params("shc", rate, 64, layers) == 2 * layers * (rate**2 + 2 * rate)


def test_norm_parameters_add_per_module() -> None:
    assert (counts.params_per_module("dhc", 4, 2048, norm_params=2048)
            - counts.params_per_module("dhc", 4, 2048)) == 2048
