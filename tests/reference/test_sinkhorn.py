"""sinkhorn_knopp: the definition (mHC Eq. 9), doubly stochastic bounds, robustness, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from hcspec.reference import sinkhorn
from hcspec.reference.sinkhorn import sinkhorn_knopp

N = 4


def _logits(scale: float, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(shape, generator=generator, dtype=torch.float64)


def _plain_sinkhorn(logits: torch.Tensor, iterations: int) -> torch.Tensor:
    """mHC Eq. 9 read literally: M⁰ = exp(L), then T_r(T_c(M)) repeated (plain domain)."""
    m = logits.exp()
    for _ in range(iterations):
        m = m / m.sum(dim=-2, keepdim=True)
        m = m / m.sum(dim=-1, keepdim=True)
    return m


def _column_error(h: torch.Tensor) -> torch.Tensor:
    return (h.sum(dim=-2) - 1).abs().amax(dim=-1)


def _row_error(h: torch.Tensor) -> torch.Tensor:
    return (h.sum(dim=-1) - 1).abs().amax(dim=-1)


@pytest.mark.parametrize("iterations", [1, 2, 20])
def test_equals_the_plain_domain_definition(iterations: int) -> None:
    logits = _logits(2.0, (64, N, N))
    got = sinkhorn_knopp(logits, iterations)
    torch.testing.assert_close(got, _plain_sinkhorn(logits, iterations), rtol=0, atol=1e-13)


def test_one_round_is_column_then_row_normalisation() -> None:
    # Order matters: row-then-column would leave the rows, not the columns, inexact.
    logits = _logits(3.0, (256, N, N), seed=1)
    h = sinkhorn_knopp(logits, 1)
    assert _row_error(h).max() < 1e-15
    assert _column_error(h).max() > 1e-3


def test_default_is_twenty_rounds() -> None:
    logits = _logits(3.0, (16, N, N))
    assert torch.equal(sinkhorn_knopp(logits), sinkhorn_knopp(logits, 20))
    assert not torch.equal(sinkhorn_knopp(logits), sinkhorn_knopp(logits, 19))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_doubly_stochastic_float64_with_enough_iterations(n: int) -> None:
    h = sinkhorn_knopp(_logits(1.0, (512, n, n)), iterations=200)
    assert (h >= 0).all()
    assert _row_error(h).max() <= 4 * torch.finfo(torch.float64).eps
    assert _column_error(h).max() < 1e-12


def test_float32_init_scale_logits_at_default_iterations() -> None:
    # mHC's logits at init are a bias plus α·(unit-variance term) with α = 0.01.
    logits = (0.01 * _logits(1.0, (4096, N, N))).float()
    h = sinkhorn_knopp(logits)
    assert h.dtype == torch.float32
    assert (h >= 0).all()
    assert _row_error(h).max() <= 3 * torch.finfo(torch.float32).eps
    assert _column_error(h).max() < 1e-6


def test_one_by_one_is_exactly_one() -> None:
    h = sinkhorn_knopp(torch.tensor([[[-3.0]], [[0.0]], [[1e4]]]), 3)
    assert torch.equal(h, torch.ones(3, 1, 1))


def test_dominant_permutation_gives_that_permutation() -> None:
    perm = torch.tensor([2, 0, 3, 1])
    logits = 50.0 * torch.eye(N, dtype=torch.float64)[perm]
    h = sinkhorn_knopp(logits)
    torch.testing.assert_close(h, torch.eye(N, dtype=torch.float64)[perm], rtol=0, atol=1e-15)


def test_batched_over_leading_axes() -> None:
    logits = _logits(1.5, (2, 3, 5, N, N))
    h = sinkhorn_knopp(logits)
    assert h.shape == logits.shape
    torch.testing.assert_close(h[1, 2, 4], sinkhorn_knopp(logits[1, 2, 4]), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_finite_for_huge_logits(dtype: torch.dtype) -> None:
    logits = _logits(1e4, (1024, N, N)).clamp(-1e4, 1e4).to(dtype)
    logits.requires_grad_(True)
    h = sinkhorn_knopp(logits)
    assert h.dtype == dtype
    assert torch.isfinite(h).all()
    assert (h >= 0).all()
    assert (h.amax(dim=-1) > 0).all(), "a row became all zero"
    assert (h.amax(dim=-2) > 0).all(), "a column became all zero (a stream dropped)"
    assert _row_error(h.float()).max() <= 3 * torch.finfo(dtype).eps  # rows: exact to rounding
    weights = torch.randn(h.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    (h * weights).sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_plain_domain_overflows_where_the_log_domain_does_not() -> None:
    # The reason for the log domain: exp(100) overflows float32.
    logits = torch.full((N, N), 100.0)
    logits[0, 0] = 0.0
    assert not torch.isfinite(_plain_sinkhorn(logits, 20)).all()
    assert torch.isfinite(sinkhorn_knopp(logits)).all()


def test_low_precision_is_computed_in_float32_and_cast_back() -> None:
    logits = _logits(2.0, (256, N, N)).to(torch.bfloat16)
    h = sinkhorn_knopp(logits)
    assert h.dtype == torch.bfloat16
    expected = sinkhorn_knopp(logits.float()).to(torch.bfloat16)
    assert torch.equal(h, expected)


def test_gradcheck_float64() -> None:
    logits = _logits(1.0, (2, 3, 3)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: sinkhorn_knopp(t, 5), (logits,))
    assert torch.autograd.gradcheck(lambda t: sinkhorn_knopp(t), (logits,))


def test_nan_propagates_to_its_own_matrix_only() -> None:
    logits = _logits(1.0, (3, N, N))
    logits[1, 2, 0] = math.nan
    h = sinkhorn_knopp(logits)
    assert torch.isnan(h[1]).all()
    assert torch.isfinite(h[[0, 2]]).all()


@pytest.mark.parametrize("iterations", [0, -1, 1.5, True, "20"])
def test_rejects_bad_iteration_counts(iterations: object) -> None:
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        sinkhorn_knopp(torch.zeros(N, N), iterations)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 4, 3)])
def test_rejects_non_square_logits(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"expected logits of shape \[\.\.\., n, n\]"):
        sinkhorn_knopp(torch.zeros(shape))


def test_rejects_integer_logits() -> None:
    with pytest.raises(TypeError, match="floating-point"):
        sinkhorn_knopp(torch.zeros(N, N, dtype=torch.int64))


GROWTH_SCALES = (0.1, 0.3, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0)
ROUNDING_FLOOR = 1e-14


def test_column_error_growth_with_logit_scale(record_property: pytest.RecordProperty) -> None:
    """Measure the column error of 20 rounds against the logit std (n = 4, float64).

    The conformance kit builds its column tolerance on this table. Logits are ``s · N(0, 1)``,
    4096 matrices per scale. Printed with ``pytest -s``; also recorded as JUnit properties.
    """
    samples = _logits(1.0, (4096, N, N), seed=2024)
    rows = []
    for scale in GROWTH_SCALES:
        err = _column_error(sinkhorn_knopp(scale * samples))
        rows.append((scale, err.median().item(), err.quantile(0.99).item(), err.max().item()))
    print("\nSinkhorn-Knopp column error |1ᵀH - 1ᵀ|_max, 20 rounds, n=4, float64, 4096 samples")
    print(f"{'logit std':>9} {'median':>10} {'p99':>10} {'max':>10}")
    for scale, median, p99, worst in rows:
        print(f"{scale:9.1f} {median:10.2e} {p99:10.2e} {worst:10.2e}")
        record_property(f"column_error_std_{scale:g}", f"{median:.2e}/{p99:.2e}/{worst:.2e}")

    for column in (1, 2, 3):  # median, p99, max each grow with the scale (above rounding)
        series = [max(row[column], ROUNDING_FLOOR) for row in rows]
        assert series == sorted(series), f"not monotone in column {column}: {series}"
    by_scale = {row[0]: row for row in rows}
    assert by_scale[0.3][3] < ROUNDING_FLOOR  # small logits: converged to rounding
    assert by_scale[1.0][1] < 1e-9 and by_scale[1.0][2] < 1e-5
    assert 1e-5 < by_scale[3.0][1] < 1e-3 and by_scale[3.0][3] < 0.1
    assert 1e-2 < by_scale[10.0][1] < 1e-1
    # A column sum of a row-stochastic n×n matrix lies in [0, n]: the error is at most n - 1.
    assert all(row[3] <= N - 1 for row in rows)


# --- the declared variants against the spec's formulas ------------------------------------------

def _spec_iterate(logits: torch.Tensor, rounds: int, deepseek: bool) -> torch.Tensor:
    """The spec's iterate (``hcspec.spec.theorems.mhc``): the paper's ``T_r(T_c(·))`` from
    ``exp``, or DeepSeek-V4's ``softmax_rows + ε`` then ``T_c^ε`` and ``t − 1`` rounds of
    ``T_c^ε(T_r^ε(·))``, evaluated exactly by sympy and rounded to float64."""
    import sympy

    from hcspec.spec import doubly_stochastic as ds
    from hcspec.spec.theorems import mhc

    L = sympy.Matrix(logits.tolist()).applyfunc(lambda v: sympy.Float(v, 50))
    eps = sympy.Float(1e-3, 50)
    if deepseek:
        M = mhc.softmax_rows(L) + eps * sympy.ones(*L.shape)
        M = mhc.normalise_columns_eps(M, eps)
        for _ in range(rounds - 1):
            M = mhc.normalise_columns_eps(mhc.normalise_rows_eps(M, eps), eps)
    else:
        M = L.applyfunc(sympy.exp)
        for _ in range(rounds):
            M = ds.normalise_rows(ds.normalise_columns(M))
    return torch.tensor([[float(v) for v in row] for row in M.tolist()], dtype=torch.float64)


@pytest.mark.parametrize("deepseek", [False, True])
def test_variants_are_the_spec_formulas(deepseek: bool) -> None:
    logits = torch.tensor([[0.0, 2.0, -1.0], [1.0, 0.0, 3.0], [-2.0, 1.0, 0.5]],
                          dtype=torch.float64)
    for rounds in (1, 3):
        spec = (sinkhorn.SinkhornSpec("softmax", "rounds_from_softmax", "columns", 1e-3, 1e-3,
                                      rounds) if deepseek else
                sinkhorn.SinkhornSpec(iterations=rounds))
        got = sinkhorn.sinkhorn_variant(logits, spec)
        want = _spec_iterate(logits, rounds, deepseek)
        assert torch.allclose(got, want, rtol=0, atol=1e-14), (rounds, got, want)
    assert sinkhorn.normalisation_order(2, "rounds_from_softmax", "columns", "softmax") == (
        "columns", "rows", "columns")
    assert sinkhorn.softmax_axis("rounds_from_softmax", "columns", 2) == "rows"


def test_default_variant_is_the_log_domain_projection() -> None:
    logits = torch.randn(4, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(sinkhorn.sinkhorn_variant(logits, sinkhorn.SinkhornSpec(iterations=7)),
                          sinkhorn.sinkhorn_knopp(logits, 7), rtol=0, atol=1e-14)


def test_fixed_point_vjp_is_the_gradient_of_the_limit() -> None:
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 4, 4, dtype=torch.float64, generator=gen)
    G = torch.randn(3, 4, 4, dtype=torch.float64, generator=gen)
    L = logits.clone().requires_grad_(True)
    H = sinkhorn.sinkhorn_knopp(L, 3000)  # converged to rounding: the limit
    (limit,) = torch.autograd.grad((H * G).sum(), L)
    got = sinkhorn.fixed_point_vjp(H.detach(), G)
    assert torch.allclose(got, limit, rtol=0, atol=1e-12)
    truncated = sinkhorn.sinkhorn_knopp(L, 3)
    (short,) = torch.autograd.grad((truncated * G).sum(), L)
    assert (short - sinkhorn.fixed_point_vjp(truncated.detach(), G)).abs().max() > 1e-4
