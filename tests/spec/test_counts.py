"""Parameter/FLOP callables agree with their sympy formulas, an operation-by-operation count and
the paper's printed figures; the kinds vocabulary is the one the counts take."""

from __future__ import annotations

import pytest

from hcspec.spec import counts, kinds, opcount
from hcspec.spec.formulas import d, n


def test_paper_figures_for_olmo_1b() -> None:
    # HC arXiv:2409.19606 App. B: OLMo-1B (L = 16, d = 2048).
    assert counts.extra_params("hc-static", 4, 2048, 16) == 768
    assert counts.extra_params("hc-dynamic", 4, 2048, 16) == 394_048


def test_table_8_shc_flops_for_olmo_1b() -> None:
    # HC Table 8 prints 0.0010 G (SHC×2) and 0.0031 G (SHC×4) per token for OLMo-1B.
    assert counts.extra_flops("hc-static", 2, 2048, 16) == 1_048_576
    assert counts.extra_flops("hc-static", 4, 2048, 16) == 3_145_728


@pytest.mark.parametrize("rate", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("width", [1, 7, 2048])
def test_callables_match_the_sympy_expressions(rate: int, width: int) -> None:
    at = {n: rate, d: width, counts.theta_norm: 0, counts.t: 20}
    assert counts.params_per_module("hc-static", rate, width) == counts.SHC_PARAMS.subs(at)
    assert counts.params_per_module("hc-dynamic", rate, width) == counts.DHC_PARAMS.subs(at)
    assert counts.params_per_module("mhc", rate, width) == counts.MHC_PARAMS.subs(at)
    assert counts.flops_per_module("hc-static", rate, width) == counts.SHC_FLOPS.subs(at)
    assert counts.flops_per_module("hc-dynamic", rate, width) == counts.DHC_FLOPS.subs(at)
    assert counts.flops_per_module("mhc", rate, width) == counts.MHC_FLOPS.subs(at)


@pytest.mark.parametrize("kind", kinds.KINDS)
@pytest.mark.parametrize(("rate", "width", "rounds"), [(1, 1, 1), (2, 5, 3), (5, 3, 7), (6, 4, 20)])
def test_closed_forms_equal_the_operation_count(kind: str, rate: int, width: int,
                                                rounds: int) -> None:
    # (5, 3, 7) and (6, 4, 20) lie outside the grid counts.flops proves on.
    assert counts.flops_per_module(kind, rate, width, rounds) == opcount.forward_flops(
        kind, rate, width, rounds)


def test_shc_total_is_2L_times_n_squared_plus_2n() -> None:
    for rate in range(1, 6):
        for layers in (1, 16, 32):
            assert counts.extra_params("hc-static", rate, 64, layers) == \
                2 * layers * (rate**2 + 2 * rate)


def test_norm_parameters_add_per_module() -> None:
    assert (counts.params_per_module("hc-dynamic", 4, 2048, norm_params=2048)
            - counts.params_per_module("hc-dynamic", 4, 2048)) == 2048


def test_kinds_are_the_kits_vocabulary() -> None:
    assert kinds.KINDS == ("hc-static", "hc-dynamic", "mhc")
    assert set(counts.PARAMS) == set(counts.FLOPS) == set(kinds.KINDS)
    assert kinds.require_kind("mhc") == "mhc"
    with pytest.raises(ValueError, match=r"kind must be one of \('hc-static', 'hc-dynamic', "
                                         r"'mhc'\), got 'shc'"):
        kinds.require_kind("shc")
