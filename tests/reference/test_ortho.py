"""The reference orthostochastic mHC (reference/ortho.py, target reference:mhc-ortho): H_res
is the entrywise square of its Newton–Schulz factor, doubly stochastic within the factor's
orthogonality defect."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.protocol import conventions_of
from hcspec.formulas.mhc import orthostochastic
from hcspec.reference.targets import mhc_ortho


def test_declares_orthostochastic_with_ten_steps() -> None:
    f = conventions_of(mhc_ortho(3, 4)).formula
    assert (f.construction, f.newton_schulz_iterations) == ("orthostochastic", 10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_h_res_is_the_declared_construction_at_its_logits(dtype: torch.dtype) -> None:
    m = mhc_ortho(4, 6, dtype=dtype, seed=1)
    x = torch.randn(2, 3, 4, 6, dtype=dtype)
    with torch.no_grad():
        _, h_post, H = m.weights(x)
        _, post, res = m.logits(x)
    assert H.dtype == dtype and H.shape == (2, 3, 4, 4)
    want = orthostochastic(res.double(), 10)
    tol = 1e-14 if dtype == torch.float64 else 1e-6 if dtype == torch.float32 else 8e-3
    assert float((H.double() - want).abs().max()) <= tol
    assert torch.equal(h_post, 2 * torch.sigmoid(post))


def test_h_res_starts_next_to_the_identity_and_sums_to_one() -> None:
    m = mhc_ortho(8, 5)
    with torch.no_grad():
        H = m.weights(torch.randn(1, 4, 8, 5, dtype=torch.float64))[2]
    assert float((H - torch.eye(8, dtype=torch.float64)).abs().max()) < 1e-3
    assert float((H.sum(-1) - 1).abs().max()) < 1e-13  # b_res = I: converged in 10 steps


def test_fewer_steps_run_but_ten_are_declared() -> None:
    m = mhc_ortho(3, 4, seed=2, iterations=1)
    assert m.iterations == 1
    assert conventions_of(m).formula.newton_schulz_iterations == 10
    with pytest.raises(ValueError, match="newton_schulz_iterations"):
        mhc_ortho(3, 4, iterations=0)
