"""The Triton-kernel adapters: Liger-Kernel's LigerMHC (``liger_kernel:mhc``) and
hyper-connections' Triton Sinkhorn (``hyper_connections:mhc-triton``), checked at the shapes
where kernels break (a stream axis that is not 4, a feature axis past one block, several
programs along an axis, a single token).

Skipped where liger-kernel or Triton is not installed. Without a CUDA device the module turns
on Triton's CPU interpreter (``TRITON_INTERPRET=1``) before Triton is imported: there compiled
kernels could not run anyway, and whether a kernel (Triton's own ``tl`` helpers included) is
interpreted or compiled is fixed at its import. Where Triton was already imported without
it, the module is skipped with that reason (run it with ``TRITON_INTERPRET=1`` set).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("liger_kernel", reason="liger-kernel is not installed")

from hcspec.conformance import cli
from hcspec.conformance.adapters import _triton, liger_kernel
from hcspec.conformance.subjects import targets

MODE = liger_kernel.triton_mode()
if MODE.name == "unavailable":
    pytest.skip(f"LigerMHC's kernels cannot run here: {MODE.reason}", allow_module_level=True)
DEVICE = "cuda" if MODE.name == "cuda" else "cpu"


def _perturbed(n: int, d: int, dtype: torch.dtype, seed: int = 0) -> liger_kernel.LigerMHCAdapter:
    """A LigerMHC away from its init (φ, b and the α scaled up), so H_res is far from uniform
    and h_pre/h_post differ per stream."""
    impl = liger_kernel.make(n, d, dtype=dtype, device=DEVICE, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in impl.parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            p.add_((noise * (0.3 if p.dim() == 2 else 1.0)).to(p.dtype).to(p.device))
    return impl


def _law_error(impl: liger_kernel.LigerMHCAdapter, x: torch.Tensor) -> float:
    """max |forward − (H_res X + h_post F(h_preᵀ X)ᵀ)| / scale, the law evaluated in float64
    from the impl's own weights, with a linear branch."""
    w = torch.randn(impl.d, impl.d, generator=torch.Generator().manual_seed(7),
                    dtype=torch.float64) / impl.d ** 0.5

    def branch(z: torch.Tensor) -> torch.Tensor:
        return z @ w.to(z.dtype).to(z.device)

    with torch.no_grad():
        out = impl.forward(x, branch).double().cpu()
        h_pre, h_post, H_res = (t.double().cpu() for t in impl.weights(x))
    X = x.double().cpu()
    x_in = torch.einsum("btn,btnd->btd", h_pre, X)
    want = H_res @ X + h_post.unsqueeze(-1) * (x_in @ w).unsqueeze(-2)
    return float((out - want).abs().max() / max(float(want.abs().max()), 1.0))


@pytest.mark.parametrize(("batch", "tokens", "n", "d"), [
    (1, 1, 4, 8),     # a single token: one program per kernel, masked rows
    (1, 2, 8, 70),    # n = 8; d past the 64-wide post-mix block; n·d = 560 > the 256-wide k block
    (2, 1, 1, 3),     # n = 1: H_res = [1]
    (1, 2, 2, 130),   # d past the 128-wide pre-aggregation block
])
def test_forward_obeys_the_law_at_kernel_edges(batch: int, tokens: int, n: int, d: int) -> None:
    impl = _perturbed(n, d, torch.float32)
    x = torch.randn(batch, tokens, n, d, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    assert _law_error(impl, x) < 2e-6
    _, h_post, H_res = impl.weights(x)
    assert float((H_res.sum(-2) - 1).abs().max()) < 1e-5  # the columns are normalised last
    assert float(H_res.min()) >= 0 and float(h_post.max()) <= 2.0


@pytest.mark.slow
def test_several_token_programs() -> None:
    """33 tokens: two programs of the 32-token blocks (the second one masked after a row)."""
    impl = _perturbed(2, 5, torch.float32, seed=4)
    x = torch.randn(1, 33, 2, 5, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    assert _law_error(impl, x) < 2e-6


def test_factory_declares_what_it_cannot_take() -> None:
    with pytest.raises(ValueError, match="powers of two"):
        liger_kernel.make(3, 8, device=DEVICE)
    with pytest.raises(ValueError, match="float32"):
        liger_kernel.make(4, 8, dtype=torch.int32, device=DEVICE)
    if MODE.name == "interpreter":
        with pytest.raises(ValueError, match="bit patterns"):
            liger_kernel.make(4, 8, dtype=torch.bfloat16, device=DEVICE)
    impl = liger_kernel.make(4, 8, device=DEVICE)  # float64: the float32 path between casts
    out = impl.forward(torch.randn(1, 2, 4, 8, dtype=torch.float64, device=DEVICE),
                       lambda z: z)
    assert out.dtype == torch.float64
    declared = impl.conventions
    assert (declared.formula.sinkhorn.exact_axis, declared.formula.sinkhorn.start,
            declared.formula.sinkhorn.count, declared.compute_dtype) == (
        "columns", "softmax", "rounds_from_softmax", torch.float32)


def test_modes_say_why() -> None:
    compiled = _triton.TritonMode("cuda", "compiled")
    with pytest.raises(ValueError, match="--device cuda"):
        compiled.require_device("cpu", "LigerMHC")
    with pytest.raises(ValueError, match="cannot run here"):
        _triton.TritonMode("unavailable", "no CUDA").require_device("cpu", "LigerMHC")
    # the mode is a lazy detail of the description (it needs torch), added when resolved
    assert MODE.name in targets.describe(targets.BUILTIN["liger_kernel:mhc"]) \
        or MODE.name == "cuda"


@pytest.mark.slow
def test_the_backward_kernels_match_the_closed_form() -> None:
    """The kit's own gradient check, one case: autograd through the Triton backward kernels
    equals the spec's closed-form backward on the reported weights."""
    case = '{"batch":1,"tokens":2,"n":4,"d":8,"seed":1,"perturb":0.3}'
    assert cli.main(["run", "liger_kernel:mhc", "--only", "gradients.closed_form",
                     "--device", DEVICE, "--no-progress", "--case", case]) == 0


def test_hyper_connections_triton_sinkhorn_is_the_kernel() -> None:
    pytest.importorskip("hyper_connections", reason="hyper-connections is not installed")
    from hyper_connections.mHCv2 import log_domain_sinkhorn_knopps

    from hcspec.conformance.adapters import hyper_connections as hc

    impl = hc.make_mhc_v2(4, 8, device=DEVICE, use_triton_sinkhorn=True)
    seen: list[torch.Tensor] = []
    kernel_fn = impl.module.residual_mix_constraint_fn

    def spy(logits: torch.Tensor) -> torch.Tensor:
        seen.append(logits)
        out: torch.Tensor = kernel_fn(logits)
        return out

    impl.module.residual_mix_constraint_fn = spy
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64, device=DEVICE)
    _, _, H_res = impl.weights(x)
    assert len(seen) == 1
    want = log_domain_sinkhorn_knopps(seen[0].detach(), 20)  # the same math in PyTorch
    assert float((kernel_fn(seen[0].detach()) - want).abs().max()) < 1e-6
    assert float((H_res.sum(-2) - 1).abs().max()) < 1e-6
    assert "Triton Sinkhorn kernel, called directly" in impl.conventions.notes
