"""Published parameterizations in the reference: each layout's step, written independently
here from its source's description, and the reference modules' own tensors under the layouts'
names."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from hcspec.reference import published as pub
from hcspec.reference import targets
from hcspec.spec.published import PARAMETERIZATIONS


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def _deepseek_v4_by_hand(fn: list[list[float]], scale: list[float], base: list[float],
                         X: list[list[float]], z_of, eps: float, norm_eps: float,
                         iters: int) -> list[list[float]]:
    """One token of DeepSeek-V4's step with plain floats and loops, from the description in
    docs/findings/transformers.md (X' = post·F(Σ pre_i X_i) + combᵀ X)."""
    n, d = len(X), len(X[0])
    flat = [X[i][k] for i in range(n) for k in range(d)]
    r = 1.0 / math.sqrt(sum(v * v for v in flat) / len(flat) + norm_eps)
    mixes = [r * sum(fn[m][j] * flat[j] for j in range(len(flat))) for m in range(len(fn))]
    pre = [_sigmoid(mixes[i] * scale[0] + base[i]) + eps for i in range(n)]
    post = [2 * _sigmoid(mixes[n + i] * scale[1] + base[n + i]) for i in range(n)]
    logits = [[mixes[2 * n + i * n + j] * scale[2] + base[2 * n + i * n + j] for j in range(n)]
              for i in range(n)]
    comb = []
    for row in logits:  # softmax over the last axis, + eps
        top = max(row)
        e = [math.exp(v - top) for v in row]
        comb.append([v / sum(e) + eps for v in e])

    def cols(M: list[list[float]]) -> list[list[float]]:
        s = [sum(M[i][j] for i in range(n)) + eps for j in range(n)]
        return [[M[i][j] / s[j] for j in range(n)] for i in range(n)]

    def rows(M: list[list[float]]) -> list[list[float]]:
        return [[v / (sum(r) + eps) for v in r] for r in M]

    comb = cols(comb)
    for _ in range(iters - 1):
        comb = cols(rows(comb))
    collapsed = [sum(pre[i] * X[i][k] for i in range(n)) for k in range(d)]
    z = z_of(collapsed)
    return [[post[j] * z[k] + sum(comb[i][j] * X[i][k] for i in range(n)) for k in range(d)]
            for j in range(n)]


def test_deepseek_v4_step_matches_a_hand_written_token() -> None:
    torch.manual_seed(3)
    n, d = 3, 2
    params = {"hc_fn": torch.randn((n + 2) * n, n * d, dtype=torch.float64),
              "hc_scale": torch.tensor([0.7, 1.3, 0.9], dtype=torch.float64),
              "hc_base": 0.3 * torch.randn((n + 2) * n, dtype=torch.float64),
              "hc_eps": 1e-3, "norm_eps": 1e-5, "sinkhorn_iters": 4}
    x = torch.randn(1, 1, n, d, dtype=torch.float64)

    def branch(z: torch.Tensor) -> torch.Tensor:
        return torch.stack([z[..., 0] * z[..., 1], z[..., 0] - 2 * z[..., 1]], dim=-1)

    got = pub.step("deepseek-v4", params, x, branch)[0, 0]
    want = _deepseek_v4_by_hand(params["hc_fn"].tolist(), params["hc_scale"].tolist(),
                                params["hc_base"].tolist(), x[0, 0].tolist(),
                                lambda c: [c[0] * c[1], c[0] - 2 * c[1]], 1e-3, 1e-5, 4)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), atol=1e-13, rtol=0)
    # the orientation matters: comb X is another network
    published = pub.formula("deepseek-v4", params)
    assert published is not None and published.sinkhorn.iterations == 4
    other = pub.step("deepseek-v4", params, x, branch,
                     dataclasses.replace(published, transposed=False))[0, 0]
    assert float((other - got).abs().max()) > 1e-3


@pytest.mark.parametrize(("make", "layout"), [
    (targets.hc_static, "hc-static"), (targets.hc_dynamic, "hc-dynamic"),
    (targets.mhc, "mhc-paper"), (targets.deepseek_v4, "deepseek-v4")])
def test_reference_modules_compute_their_layout_and_load_it(make, layout: str) -> None:  # type: ignore[no-untyped-def]
    source, sink = make(3, 5, seed=1), make(3, 5, seed=2)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.4 * torch.randn_like(p))
    assert source.conventions["published"] == layout
    x = torch.randn(2, 2, 3, 5, dtype=torch.float64)

    def branch(z: torch.Tensor) -> torch.Tensor:
        return torch.sin(z) + 0.5 * z

    params = source.published_parameters()
    assert set(pub.layout(layout).shapes(3, 5)) <= set(params)
    with torch.no_grad():
        step = pub.step(layout, params, x, branch)
        assert float((source(x, branch) - step).abs().max()) < 1e-14
    sink.load_published({k: (v.detach().clone() if isinstance(v, torch.Tensor) else v)
                         for k, v in params.items()})
    assert float((sink(x, branch) - source(x, branch)).abs().max()) == 0.0


def test_hc_static_layout_is_the_paper_orientation() -> None:
    module = targets.hc_static(3, 4)
    with torch.no_grad():
        module.H_res.copy_(torch.arange(9, dtype=torch.float64).reshape(3, 3))
    assert torch.equal(module.published_parameters()["A_r"], module.H_res.T)


def test_check_parameters_names_what_is_wrong() -> None:
    good = {k: torch.zeros(s) for k, s in pub.layout("hc-static").shapes(2, 3).items()}
    pub.check_parameters("hc-static", good, 2, 3)
    with pytest.raises(ValueError, match="missing tensor 'A_r'"):
        pub.check_parameters("hc-static", {k: v for k, v in good.items() if k != "A_r"}, 2, 3)
    with pytest.raises(ValueError, match=r"'B' should be \[2\], got \[3\]"):
        pub.check_parameters("hc-static", {**good, "B": torch.zeros(3)}, 2, 3)
    with pytest.raises(ValueError, match="unknown published parameterization"):
        pub.layout("deepseek-v5")
    assert tuple(pub.LAYOUTS) == PARAMETERIZATIONS
