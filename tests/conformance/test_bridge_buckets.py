"""The bridge bounds a framework's compilations: token counts padded to powers of two (the
branch sees the real tokens, the per-token step is unchanged: the kit's properties pass as
without buckets), and the framework's caches cleared after so many distinct shapes. Run on
the NumPy stand-in framework (tests/thirdparty/numpy_framework.py)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from hcspec.conformance import bridge
from hcspec.conformance.bridge import Built, Sublayer, bridged_target, token_bucket
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.run.session import check_implementation
from tests.thirdparty import numpy_framework as npf


class Recording(npf.NumpyFramework):
    """The stand-in, recording the token counts it sees and its cache clearings."""

    name = "numpy-recording"
    tokens: ClassVar[list[int]] = []
    cleared = 0

    def call(self, fn: Any, primals: Any) -> Any:
        Recording.tokens.append(int(np.shape(primals[-1])[1]) if np.ndim(primals[-1]) >= 2
                                else -1)
        return super().call(fn, primals)

    def clear_caches(self) -> None:
        Recording.cleared += 1


def _factory(bucket: bool, max_shapes: int | None = None) -> Any:
    def build(n: int, d: int, layer_index: int, seed: int) -> Built:
        sublayer = Sublayer(read=npf.make_read(), write=npf.WRITE, weights=npf.WEIGHTS)
        return Built(npf.init(n, d, seed), sublayer)
    return bridged_target(Recording, build, compute_dtype=None, bucket_tokens=bucket,
                          max_cached_shapes=max_shapes,
                          conventions=Conventions(sinkhorn_iterations=npf.ITERATIONS))


def test_token_buckets_are_powers_of_two() -> None:
    assert [token_bucket(t) for t in (0, 1, 2, 3, 4, 5, 7, 8, 9, 33)] == [
        1, 1, 2, 4, 4, 8, 8, 8, 16, 64]


def test_a_bucketed_target_equals_the_unbucketed_one_and_passes_the_kit() -> None:
    plain, bucketed = _factory(False)(4, 5, seed=3), _factory(True)(4, 5, seed=3)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    seen: list[torch.Size] = []
    weight = torch.randn(5, 5, dtype=torch.float64)

    def branch(z: torch.Tensor) -> torch.Tensor:
        seen.append(z.shape)
        return torch.tanh(z @ weight)

    Recording.tokens = []
    out = bucketed.forward(x, branch)
    assert set(Recording.tokens) == {4}  # the framework saw 3 tokens padded to 4
    assert seen == [torch.Size([2, 3, 5])]  # the branch, the real tokens only
    expected = plain.forward(x, branch)
    assert out.shape == (2, 3, 4, 5)  # equal up to the summation order of another shape
    assert torch.allclose(out, expected, rtol=0, atol=1e-14)
    (g_bucketed,) = torch.autograd.grad(out.sum(), x)
    (g_plain,) = torch.autograd.grad(expected.sum(), x)
    assert torch.allclose(g_bucketed, g_plain, rtol=0, atol=1e-14)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-14)
               for a, b in zip(bucketed.weights(x), plain.weights(x), strict=True))
    report = check_implementation(_factory(True), profile="quick", device="cpu",
                                  only=["law", "independence.token", "gradients.fd_input"])
    statuses = {r.id: r.status for r in report.results}
    assert statuses["independence.token"] == "passed"
    assert "failed" not in statuses.values() and "error" not in statuses.values(), statuses
    assert "token counts padded" in report.conventions["notes"]


def test_the_framework_caches_are_cleared_after_so_many_shapes() -> None:
    bridge.connection._SHAPES_SEEN.pop(Recording.name, None)
    Recording.cleared = 0
    impl = _factory(True, max_shapes=2)(2, 3, seed=0)
    for tokens in (1, 2, 3, 4, 5, 9):  # buckets 1, 2, 4, 4, 8, 16
        impl.forward(torch.randn(1, tokens, 2, 3, dtype=torch.float64), lambda z: z)
    assert Recording.cleared == 2  # at the third distinct shape (4), then at the fifth (16)
