"""SGLang 0.5.23's HY-V4 iHC Triton kernels (``sglang:ihc``) from the installed wheel, and
mutants of them patched at import (the post kernel ignoring ``post``, the pre kernel weighting
every stream with the first stream's gate), which the kit must kill.

Skipped where SGLang or Triton is not installed (its lane, .ci/lanes/sglang, installs them).
Without a CUDA device the module turns on Triton's CPU interpreter before Triton is imported.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from typing import Any

import pytest
import torch

if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("sglang or triton is not installed", allow_module_level=True)
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hcspec.conformance import check_implementation
from hcspec.conformance.adapters import sglang_ihc
from tests.thirdparty._engine_mutants import failed, mutate

MODE = sglang_ihc.triton_mode()
if MODE.name == "unavailable":
    pytest.skip(f"SGLang's Triton kernels cannot run here: {MODE.reason}",
                allow_module_level=True)
DEVICE = "cuda" if MODE.name == "cuda" else "cpu"
KILLERS = ["shape.output", "law.reported"]

MUTANTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "post-ignored": ("_hy4_ihc_post_kernel", [
        ("y_block = post_m * out_block + res_block", "y_block = out_block + res_block")]),
    "pre-first-stream-gate": ("_hy4_ihc_pre_stage2", [
        ("pre_m = tl.sum(tl.where(m_idx == m, pre, 0.0), axis=0)",
         "pre_m = tl.sum(tl.where(m_idx == 0, pre, 0.0), axis=0)")]),
}


def test_step_is_the_ihc_law() -> None:
    """The kernels' step equals ``X' = X + post ⊗ F(Σ_s pre_s X_s)`` with pre, post computed
    here in float64 from the module's parameters (``σ(scale·hc_fn·vec(X)·rsqrt(mean vec(X)² +
    ε) + base) + eps``, post with magnitude 2), within float32 rounding; ``weights`` agree."""
    n, d = 4, 8
    impl = sglang_ihc.make(n, d, seed=1, device=DEVICE)
    x = 3.0 * torch.randn(2, 3, n, d, dtype=torch.float64,
                          generator=torch.Generator().manual_seed(0)).to(DEVICE)
    flat = x.reshape(2, 3, n * d)
    logits = flat @ impl.hc_fn.double().T * torch.rsqrt(flat.square().mean(-1, keepdim=True)
                                                          + sglang_ihc.NORM_EPS)
    scale, base = impl.hc_scale.double(), impl.hc_base.double()
    pre = torch.sigmoid(logits[..., :n] * scale[0] + base[:n]) + sglang_ihc.HC_EPS
    post = 2 * torch.sigmoid(logits[..., n:] * scale[1] + base[n:]) + sglang_ihc.HC_EPS
    x_in = (pre.unsqueeze(-1) * x).sum(-2)
    want = x + post.unsqueeze(-1) * torch.tanh(x_in).unsqueeze(-2)
    got = impl(x, torch.tanh)
    assert (got - want).abs().max().item() < 1e-4
    h_pre, h_post, h_res = impl.weights(x)
    assert (h_pre - pre).abs().max().item() < 1e-5
    assert (h_post - post).abs().max().item() < 1e-5
    assert torch.equal(h_res[0, 0], torch.eye(n, dtype=x.dtype, device=x.device))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed(name: str, tmp_path: pathlib.Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit (kernel profile, shape.output and law.reported) fails on each mutant."""
    function, replacements = MUTANTS[name]
    mutant = mutate(sys.modules[sglang_ihc.MODULE], function, replacements, tmp_path)
    monkeypatch.setitem(sglang_ihc._LOADED, sglang_ihc.MODULE, mutant)

    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return sglang_ihc.make(n, d, **kwargs)

    report = check_implementation(factory, profile="kernel", device=DEVICE, only=KILLERS)
    assert failed(report), f"mutant {name} survived: " + ", ".join(
        f"{r.id}={r.status}" for r in report.results)


@pytest.mark.slow
def test_unmutated_passes() -> None:
    """The killing properties pass on the unmutated kernels (so a kill is the mutation's)."""
    def factory(n: int, d: int, **kwargs: Any) -> Any:
        return sglang_ihc.make(n, d, **kwargs)

    report = check_implementation(factory, profile="kernel", device=DEVICE, only=KILLERS)
    assert not failed(report), [(r.id, r.status) for r in report.results]
    assert set(KILLERS) <= {r.id for r in report.results if r.status == "passed"}
