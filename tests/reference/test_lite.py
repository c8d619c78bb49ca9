"""The reference mHC-lite (reference/lite.py, target reference:mhc-lite): H_res is the
softmax-weighted sum of its permutations, doubly stochastic to the rounding of that sum."""

from __future__ import annotations

import itertools

import pytest
import torch

from hcspec.conformance.protocol import conventions_of
from hcspec.formulas.mhc import birkhoff
from hcspec.reference.targets import mhc_lite
from hcspec.spec.record import Formula


@pytest.mark.parametrize(("n", "dtype", "tol"), [(3, torch.float64, 1e-15),
                                                  (5, torch.float32, 2e-6)])
def test_h_res_is_doubly_stochastic_and_the_declared_sum(n: int, dtype: torch.dtype,
                                                         tol: float) -> None:
    m = mhc_lite(n, 6, dtype=dtype, seed=1)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p))
    x = torch.randn(2, 3, n, 6, dtype=dtype)
    res = m.logits(x)[2]
    assert res.shape == (2, 3, len(list(itertools.permutations(range(n)))))
    with torch.no_grad():
        _, h_post, H = m.weights(x)
        _, post, res = m.logits(x)
    assert float((H.sum(-1) - 1).abs().max()) <= tol
    assert float((H.sum(-2) - 1).abs().max()) <= tol
    assert float(H.min()) >= 0.0
    want = birkhoff(Formula(construction="birkhoff"), res.double())
    assert torch.allclose(H.double(), want, atol=10 * tol)
    assert torch.equal(h_post, 2 * torch.sigmoid(post))


def test_declares_birkhoff_and_its_rates() -> None:
    c = conventions_of(mhc_lite(3, 4))
    assert c.formula.construction == "birkhoff" and c.formula.permutations is None
    assert c.supported_expansion_rates == (1, 2, 3, 4, 5, 6)
    assert "sinkhorn_iterations" not in c.describe()


def test_init_near_identity_and_sizes() -> None:
    H = mhc_lite(4, 5).weights(torch.randn(1, 1, 4, 5, dtype=torch.float64))[2]
    assert float(H.diagonal(dim1=-2, dim2=-1).min()) > 0.7
    with pytest.raises(ValueError, match="n <= 8"):
        mhc_lite(9, 2)
    with pytest.raises(ValueError, match="not a permutation"):
        mhc_lite(2, 2, permutations=((0, 0),))


def test_float32_at_n8_sums_to_one_within_the_summation_floor() -> None:
    """8! = 40320 weights gathered by index per entry: the float32 sums miss 1 by at most the
    random-walk floor √K·eps + (n + 1)·eps = 210 eps of ``rules.summation_allowance``
    (measured 7–35 eps; the kit allows (K + n)·eps)."""
    m = mhc_lite(8, 3, dtype=torch.float32, seed=3)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p))
        H = m.weights(torch.randn(2, 3, 8, 3))[2]
    e = torch.finfo(torch.float32).eps
    floor = (40320 ** 0.5 + 9) * e
    assert float((H.sum(-1) - 1).abs().max()) <= floor
    assert float((H.sum(-2) - 1).abs().max()) <= floor


def test_the_gathered_sum_is_the_dense_one() -> None:
    from hcspec.formulas.mhc import permutation_matrices
    perms = tuple(itertools.permutations(range(5)))
    logits = torch.randn(3, 4, len(perms), dtype=torch.float64)
    P = permutation_matrices(perms, torch.float64)
    dense = torch.einsum("...k,kij->...ij", torch.softmax(logits, -1), P)
    got = birkhoff(Formula(construction="birkhoff"), logits)
    assert float((got - dense).abs().max()) <= 1e-15
