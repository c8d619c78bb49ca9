"""The fast path of mHC (reference/fast.py) computes what the readable version computes.

Everything is compared in float64 against the readable implementation with the same
parameters: outputs, reported weights, and the gradients of the input, every parameter and the
branch's own parameter. The options that trade time for memory (``recompute``) must not change
any value and must save less for backward.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from benchmarks.measure import Step, saved_bytes
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from hcspec.reference.fast import sinkhorn_knopp_fast
from hcspec.reference.manifold import IMPLEMENTATIONS
from tests.conformance.helpers import is_expected_not_applicable

F64 = torch.float64
TOL = 1e-12  # relative to the largest entry compared; measured differences are ~1e-15


def _pair(n: int, d: int, perturb: Callable[..., torch.nn.Module], *,
          recompute: bool = False, dtype: torch.dtype = F64,
          ) -> tuple[ManifoldHyperConnection, ManifoldHyperConnection]:
    readable = ManifoldHyperConnection(n, d, dtype=dtype)
    perturb(readable, scale=0.5, seed=n)
    fast = ManifoldHyperConnection(n, d, dtype=dtype, implementation="fast", recompute=recompute)
    fast.load_state_dict(readable.state_dict())
    return readable, fast


def _run(module: ManifoldHyperConnection, x: torch.Tensor, weight: torch.Tensor,
         upstream: torch.Tensor) -> list[torch.Tensor]:
    """Output, weights, and the gradients of x, the branch weight and every parameter."""
    out = module(x, lambda h: torch.tanh(h @ weight))
    grads = torch.autograd.grad(out, [x, weight, *module.parameters()], upstream)
    return [out, *module.weights(x), *grads]


def _assert_close(expected: list[torch.Tensor], got: list[torch.Tensor], tol: float) -> None:
    assert len(expected) == len(got)
    for index, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert e.shape == g.shape and e.dtype == g.dtype, index
        scale = max(1.0, e.abs().max().item())
        assert (e - g).abs().max().item() <= tol * scale, (index, (e - g).abs().max().item())


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("recompute", [False, True])
def test_fast_equals_readable_float64(n: int, recompute: bool,
                                      perturb: Callable[..., torch.nn.Module]) -> None:
    d = 6
    readable, fast = _pair(n, d, perturb, recompute=recompute)
    generator = torch.Generator().manual_seed(n)
    x = torch.randn(2, 3, n, d, dtype=F64, generator=generator).requires_grad_()
    weight = (torch.randn(d, d, dtype=F64, generator=generator) / d**0.5).requires_grad_()
    upstream = torch.randn(2, 3, n, d, dtype=F64, generator=generator)
    _assert_close(_run(readable, x, weight, upstream), _run(fast, x, weight, upstream), TOL)


def test_readable_recompute_changes_no_value(perturb: Callable[..., torch.nn.Module]) -> None:
    readable, _ = _pair(3, 5, perturb)
    recomputing = ManifoldHyperConnection(3, 5, dtype=F64, recompute=True)
    recomputing.load_state_dict(readable.state_dict())
    x = torch.randn(2, 4, 3, 5, dtype=F64).requires_grad_()
    weight = torch.randn(5, 5, dtype=F64).requires_grad_()
    upstream = torch.randn(2, 4, 3, 5, dtype=F64)
    _assert_close(_run(readable, x, weight, upstream), _run(recomputing, x, weight, upstream), 0.0)


def _saved_bytes(module: ManifoldHyperConnection, x: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd keeps for backward, x and parameters excluded
    (the benchmarks' measurement, :func:`benchmarks.measure.saved_bytes`)."""
    return saved_bytes(Step(forward=lambda: module(x, torch.sin), upstream=torch.ones_like(x),
                            leaves=[x, *module.parameters()]))


def _saved_with(implementation: str, recompute: bool, iterations: int) -> int:
    torch.manual_seed(0)
    module = ManifoldHyperConnection(4, 16, implementation=implementation,  # type: ignore[arg-type]
                                     recompute=recompute, sinkhorn_iterations=iterations)
    return _saved_bytes(module, torch.randn(2, 64, 4, 16, requires_grad=True))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_recompute_saves_less_for_backward(implementation: str) -> None:
    kept = _saved_with(implementation, False, 20)
    recomputed = _saved_with(implementation, True, 20)
    assert recomputed < kept
    # what is left is per token O(d + n² + 2n) (x_in, z, the weights, x φ) plus φ itself:
    # nothing of the state's size n·d per token, nothing per Sinkhorn round
    tokens, n, d, m = 2 * 64, 4, 16, 4 * 4 + 2 * 4
    assert recomputed <= 4 * (3 * tokens * d + 2 * tokens * m + n * d * m + tokens * n * n)
    assert _saved_with(implementation, True, 40) == recomputed


def test_saved_memory_grows_with_rounds_only_in_readable() -> None:
    assert _saved_with("readable", False, 40) > _saved_with("readable", False, 20)
    # the fast path's Sinkhorn-Knopp keeps only its logits and recomputes the iterates
    assert _saved_with("fast", False, 40) == _saved_with("fast", False, 20)


def test_fast_saves_no_more_than_readable() -> None:
    x = torch.randn(2, 64, 4, 16, requires_grad=True)
    readable = ManifoldHyperConnection(4, 16)
    fast = ManifoldHyperConnection(4, 16, implementation="fast")
    fast.load_state_dict(readable.state_dict())
    assert _saved_bytes(fast, x) < _saved_bytes(readable, x)


class _LargeAllocations(TorchDispatchMode):
    """Collects the distinct storages of at least ``nbytes`` that ops return: fresh
    allocations, and the storages of pre-existing tensors that ops view or modify in place
    (``pre_existing`` names those, to be left out). Storages are kept alive so that no address
    is reused while counting."""

    def __init__(self, nbytes: int, pre_existing: list[torch.Tensor]) -> None:
        super().__init__()
        self.nbytes = nbytes
        self.skip = {t.untyped_storage().data_ptr() for t in pre_existing}
        self.fresh: dict[int, torch.UntypedStorage] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() >= self.nbytes:
                storage = t.untyped_storage()
                if storage.data_ptr() not in self.skip:
                    self.fresh.setdefault(storage.data_ptr(), storage)
        return out


def _full_size_allocations(implementation: str) -> int:
    """Full-size (state-sized) tensors allocated by one forward + backward of mHC with every
    gradient requested (x, parameters, the branch's weight)."""
    torch.manual_seed(0)
    module = ManifoldHyperConnection(4, 32, dtype=F64,
                                     implementation=implementation)  # type: ignore[arg-type]
    x = torch.randn(2, 64, 4, 32, dtype=F64, requires_grad=True)
    weight = torch.randn(32, 32, dtype=F64, requires_grad=True)
    upstream = torch.randn_like(x)
    params = list(module.parameters())
    with _LargeAllocations(x.untyped_storage().nbytes(), [x, upstream, *params]) as counter:
        out = module(x, lambda h: torch.tanh(h @ weight))
        grads = torch.autograd.grad(out, [x, weight, *params], upstream)
    assert grads[0].shape == x.shape
    return len(counter.fresh)


def test_fast_allocates_one_full_size_gradient() -> None:
    # the point of hcspec.reference.fast's shared gradient buffer: the output and ∂L/∂X are the only
    # state-sized tensors of a forward + backward; the readable version makes one ∂L/∂X term
    # per use of X (norm, projection, read, mix) and more
    assert _full_size_allocations("fast") == 2
    assert _full_size_allocations("readable") > 2


def test_fast_gradcheck_float64() -> None:
    module = ManifoldHyperConnection(3, 4, dtype=F64, implementation="fast")
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(1, 2, 3, 4, dtype=F64, requires_grad=True)
    params = list(module.parameters())

    def f(x: torch.Tensor, *values: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.func.functional_call(
            module, dict(zip([name for name, _ in module.named_parameters()], values,
                             strict=True)), (x, torch.sin))
        return out

    assert torch.autograd.gradcheck(f, (x, *[p.detach().requires_grad_() for p in params]))


def test_fast_handles_unusual_inputs(perturb: Callable[..., torch.nn.Module]) -> None:
    readable, fast = _pair(3, 4, perturb)
    x = torch.randn(4, 2, 3, 4, dtype=F64).transpose(0, 1)  # non-contiguous [2, 4, 3, 4]
    assert not x.is_contiguous()
    calls: list[int] = []

    def branch(h: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return 2 * h

    torch.testing.assert_close(fast(x, branch), readable(x, branch), rtol=0, atol=1e-14)
    assert len(calls) == 2  # once per module call
    # x without grad, parameters with: the parameters still get gradients; the upstream
    # gradient of a sum is an expanded (stride-0) tensor
    fast(x, branch).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in fast.parameters())
    with torch.no_grad():
        torch.testing.assert_close(fast(x, branch), readable(x, branch), rtol=0, atol=1e-14)


def test_fast_rejects_what_readable_rejects() -> None:
    fast = ManifoldHyperConnection(3, 4, implementation="fast")
    with pytest.raises(ValueError, match=r"expected x of shape \[B, T, n=3, d=4\]"):
        fast(torch.randn(2, 3, 4, 4), torch.sin)
    with pytest.raises(ValueError, match=r"branch must return the shape of its input"):
        fast(torch.randn(2, 3, 3, 4), lambda h: h[..., :2])
    with pytest.raises(ValueError, match="implementation must be one of"):
        ManifoldHyperConnection(3, 4, implementation="compiled")  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fast_low_precision_matches_readable(dtype: torch.dtype,
                                             perturb: Callable[..., torch.nn.Module]) -> None:
    readable, fast = _pair(4, 8, perturb, dtype=dtype)
    x = torch.randn(2, 5, 4, 8, dtype=dtype)
    exact = ManifoldHyperConnection(4, 8, dtype=F64)
    exact.load_state_dict({k: v.to(F64) for k, v in readable.state_dict().items()})
    reference = exact(x.to(F64), torch.tanh)
    scale = reference.abs().max().item()
    eps = torch.finfo(dtype).eps
    for module in (readable, fast):
        out = module(x, torch.tanh)
        assert out.dtype == dtype
        assert (out.to(F64) - reference).abs().max().item() <= 16 * eps * scale


@pytest.mark.parametrize("scale", [1.0, 10.0, 1e4])
def test_sinkhorn_fast_equals_readable(scale: float) -> None:
    logits = (scale * torch.randn(5, 7, 4, 4, dtype=F64)).requires_grad_()
    upstream = torch.randn(5, 7, 4, 4, dtype=F64)
    expected = sinkhorn_knopp(logits)
    got = sinkhorn_knopp_fast(logits)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-13)
    (g_expected,) = torch.autograd.grad(expected, logits, upstream)
    (g_got,) = torch.autograd.grad(got, logits, upstream)
    assert torch.isfinite(g_got).all()
    torch.testing.assert_close(g_got, g_expected, rtol=0, atol=1e-10)


def test_sinkhorn_fast_contract() -> None:
    logits = 1e4 * torch.randn(3, 4, 4, dtype=torch.bfloat16)
    out = sinkhorn_knopp_fast(logits, iterations=3)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert torch.autograd.gradcheck(lambda t: sinkhorn_knopp_fast(t, 4),
                                    (torch.randn(2, 3, 3, dtype=F64, requires_grad=True),))
    with pytest.raises(ValueError, match=r"expected logits of shape \[..., n, n\]"):
        sinkhorn_knopp_fast(torch.randn(3, 4))
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        sinkhorn_knopp_fast(torch.randn(3, 3), iterations=0)
    with pytest.raises(TypeError, match="floating-point"):
        sinkhorn_knopp_fast(torch.ones(3, 3, dtype=torch.int64))


@pytest.mark.slow
def test_kit_passes_fast_path_under_ci() -> None:
    # every applicable property passes, compile.fullgraph included (it failed while the
    # Functions passed X along as views of their input: TorchDynamo refused the trace)
    report = check_implementation("reference:mhc-fast", profile="ci", device="cpu")
    bad = [(r.id, r.status, r.message) for r in report.results
           if r.status not in (rp.PASSED, rp.NOT_APPLICABLE)]
    assert bad == [] and report.ok
    for r in report.results:
        if r.status == rp.NOT_APPLICABLE:  # only kind mismatches and the absent GPU
            assert is_expected_not_applicable(r.message), (r.id, r.message)
    compiled = next(r for r in report.results if r.id == "compile.fullgraph")
    assert compiled.status == rp.PASSED and compiled.examples >= 1
    assert sum(r.status == rp.PASSED for r in report.results) >= 25


@pytest.mark.slow
def test_fast_recompute_compiles_fullgraph(perturb: Callable[..., torch.nn.Module]) -> None:
    # the kit compiles reference:mhc-fast (recompute=False); this covers the checkpointed gates
    # and an input without gradient (the conduit then carries none); two compiles, ~8 s
    _, fast = _pair(3, 4, perturb, recompute=True)
    weight = torch.randn(4, 4, dtype=F64, requires_grad=True)
    x = torch.randn(2, 3, 3, 4, dtype=F64)
    upstream = torch.randn(2, 3, 3, 4, dtype=F64)

    def step(state: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = fast(state, lambda h: torch.tanh(h @ weight))
        return out

    def run(fn: Callable[[torch.Tensor], torch.Tensor],
            x_needs_grad: bool) -> list[torch.Tensor]:
        state = x.clone().requires_grad_(x_needs_grad)
        out = fn(state)
        wrt = [state, weight, *fast.parameters()] if x_needs_grad else [weight, *fast.parameters()]
        return [out, *torch.autograd.grad(out, wrt, upstream)]

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=False)
    try:
        for x_needs_grad in (True, False):
            _assert_close(run(step, x_needs_grad), run(compiled, x_needs_grad), TOL)
    finally:
        torch._dynamo.reset()


def test_fresh_buffers_are_advised_as_huge_pages_and_keep_their_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``_fresh`` advises page-aligned ranges inside large CPU blocks only, and a result
    written into it equals the plain op's bitwise."""
    from hcspec.reference import fast

    calls: list[tuple[int, int, int]] = []

    def record(start: int, length: int, advice: int) -> int:
        calls.append((start, length, advice))
        return 0

    monkeypatch.setattr(fast, "_madvise", lambda: record)
    big = torch.randn(64, 4, 4096)  # 4 MiB
    out = fast._fresh(big.shape, big)
    assert out.shape == big.shape and out.dtype == big.dtype
    (start, length, advice), = calls
    assert advice == 14 and start % 4096 == 0 and length % 4096 == 0
    assert out.data_ptr() <= start < out.data_ptr() + 4096
    assert start + length <= out.data_ptr() + out.nbytes
    h = torch.randn(64, 4, 4)
    assert torch.equal(torch.bmm(h, big, out=out), torch.bmm(h, big))
    calls.clear()
    fast._fresh(torch.Size((4, 4)), big)
    assert calls == []


@pytest.mark.parametrize("implementation", ["readable", "fast"])
def test_float16_mean_square_does_not_overflow_at_n8_d257(implementation: str) -> None:
    # n·d = 2056 squares at RMS 10 sum to ~2e5 > 65504: summed in float16 the RMS is inf and
    # every projection 0 (the weights then ~ the biases alone); the reference sums in float32
    torch.manual_seed(0)
    m64 = ManifoldHyperConnection(8, 257, 0, dtype=torch.float64, implementation=implementation)
    with torch.no_grad():
        for p in m64.parameters():
            p.add_(torch.randn_like(p))
    m16 = copy.deepcopy(m64).to(torch.float16)
    x = (10.0 * torch.randn(1, 3, 8, 257, dtype=torch.float64)).to(torch.float16)
    for got, want in zip(m16.weights(x), m64.weights(x.double()), strict=True):
        assert bool(torch.isfinite(got).all())
        assert float((got.double() - want).abs().max()) < 0.02
