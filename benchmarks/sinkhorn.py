"""Sinkhorn–Knopp: cost and doubly-stochastic error against the iteration count.

Logits are those the mHC layer produces at init — ``α_res · mat(x' φ_res) + b_res`` of a freshly
built :class:`reference.ManifoldHyperConnection` on a random state, ``x'`` the RMS-normalised
flattened state (mHC Eq. 7) — and two families of larger ones: the whole logits × 10 and × 100
(which sharpens the init's diagonal bias, so H_res → I and converges *faster*), and only the
input-dependent part ``α_res · mat(x' φ_res)`` × 10, 100, 1000 (what growing α or φ do in
training: the spread of the logits grows, and convergence slows). Error after t rounds
(mHC Eq. 9, column then row normalisation): max over matrices of ``max |row sum − 1|`` and
``max |column sum − 1|``. Rows are normalised last, so their error is rounding; the column error
is the convergence error. Cost: forward and forward + backward of ``reference.sinkhorn_knopp``
(readable) and ``hcspec.reference.fast.sinkhorn_knopp_fast`` on the same ``[B·T, n, n]`` logits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks import markdown as md
from benchmarks.measure import Timing
from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from hcspec.reference.fast import sinkhorn_knopp_fast

FAMILIES: tuple[tuple[str, float, float], ...] = (
    ("init", 1.0, 1.0),
    ("×10", 10.0, 10.0),
    ("×100", 100.0, 100.0),
    ("dyn ×10", 1.0, 10.0),
    ("dyn ×100", 1.0, 100.0),
    ("dyn ×1000", 1.0, 1000.0),
)
"""(label, factor on b_res, factor on the input-dependent part α_res·mat(x'φ_res))."""


@dataclass
class SinkhornResult:
    """Errors per (scale, iterations) and cost per (implementation, iterations)."""

    tokens: int
    n: int
    dtype: torch.dtype
    iterations: list[int]
    row_error: dict[tuple[str, int], float] = field(default_factory=dict)
    column_error: dict[tuple[str, int], float] = field(default_factory=dict)
    cost: dict[tuple[str, str, int], float] = field(default_factory=dict)


def init_logits(tokens: int, n: int, d: int, dtype: torch.dtype,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The two parts of the ``[tokens, n, n]`` H_res logits of a freshly initialised mHC layer
    on random states: ``(b_res broadcast, α_res · mat(x' φ_res))``."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = ManifoldHyperConnection(n, d, dtype=torch.float64)
    x = torch.randn(tokens, n * d, generator=generator, dtype=torch.float64)
    inv_rms = torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + layer.norm_eps)
    with torch.no_grad():
        dynamic = layer.alpha_res * (inv_rms * (x @ layer.phi_res)).view(tokens, n, n)
        bias = layer.b_res.expand(tokens, n, n)
    return bias.to(dtype), dynamic.to(dtype)


def _time(fn: object, repeats: int) -> float:
    assert callable(fn)
    fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return Timing.median(seconds)


def measure(tokens: int, n: int, d: int, iterations: list[int], repeats: int,
            dtype: torch.dtype = torch.float32) -> SinkhornResult:
    """Errors at every scale and iteration count; costs at every iteration count."""
    result = SinkhornResult(tokens, n, dtype, iterations)
    bias, dynamic = init_logits(tokens, n, d, dtype)
    base = bias + dynamic
    for label, bias_factor, dynamic_factor in FAMILIES:
        logits = bias_factor * bias + dynamic_factor * dynamic
        for t in iterations:
            with torch.no_grad():
                h = sinkhorn_knopp(logits, t)
            result.row_error[(label, t)] = (h.sum(-1) - 1).abs().max().item()
            result.column_error[(label, t)] = (h.sum(-2) - 1).abs().max().item()
    upstream = torch.randn_like(base)
    for name, fn in (("readable", sinkhorn_knopp), ("fast", sinkhorn_knopp_fast)):
        for t in iterations:
            leaf = base.clone().requires_grad_()

            def forward(fn: object = fn, t: int = t, leaf: torch.Tensor = leaf) -> None:
                with torch.no_grad():
                    fn(leaf, t)  # type: ignore[operator]

            def step(fn: object = fn, t: int = t, leaf: torch.Tensor = leaf) -> None:
                fn(leaf, t).backward(upstream)  # type: ignore[operator]
                leaf.grad = None

            result.cost[(name, "fwd", t)] = _time(forward, repeats)
            result.cost[(name, "fwd+bwd", t)] = _time(step, repeats)
    return result


def tables(result: SinkhornResult) -> list[md.Table]:
    """The error table and the cost table."""
    dtype = str(result.dtype).removeprefix("torch.")
    errors = md.Table(
        f"Sinkhorn–Knopp error, {result.tokens} matrices n={result.n}, {dtype}: max |column "
        "sum − 1| per logit family, and max |row sum − 1| over all families",
        ["rounds"] + [f"col err {label}" for label, _, _ in FAMILIES] + ["row err (all)"],
    )
    for t in result.iterations:
        errors.add(str(t), *[f"{result.column_error[(label, t)]:.1e}" for label, _, _ in FAMILIES],
                   f"{max(result.row_error[(label, t)] for label, _, _ in FAMILIES):.1e}")
    errors.notes = [
        "init: the layer's logits at init (b_res = c·I with diagonal 0.7 after projection, "
        "plus α_res·x'φ_res of std ≈ 0.01); ×10, ×100: the whole logits scaled (H_res → I, "
        "converges faster); dyn ×k: only the input-dependent part scaled (std ≈ 0.01·k).",
        "Rows are normalised last, so the row error is rounding; the column error is the "
        "convergence error. 0.0e+00: exact in this dtype.",
    ]
    cost = md.Table(
        f"Sinkhorn–Knopp cost, {result.tokens} matrices n={result.n}, {dtype} (median ms)",
        ["rounds", "readable fwd", "readable fwd+bwd", "fast fwd", "fast fwd+bwd",
         "fwd+bwd readable ÷ fast"],
    )
    for t in result.iterations:
        c = result.cost
        cost.add(str(t), md.ms(c[("readable", "fwd", t)]), md.ms(c[("readable", "fwd+bwd", t)]),
                 md.ms(c[("fast", "fwd", t)]), md.ms(c[("fast", "fwd+bwd", t)]),
                 md.ratio(c[("readable", "fwd+bwd", t)] / c[("fast", "fwd+bwd", t)]))
    return [errors, cost]


def plot(result: SinkhornResult, path: Path) -> str:
    """Save the error-vs-rounds plot to ``path``; returns "" or why it was not drawn
    (matplotlib, the optional extra ``plot``, is not installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc}); pip install 'hcspec[plot]'"
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    floor = torch.finfo(result.dtype).eps
    ts = result.iterations
    colors = ("tab:blue", "tab:cyan", "tab:purple", "tab:orange", "tab:red", "tab:brown")
    for (label, _, _), color in zip(FAMILIES, colors, strict=True):
        ax.plot(ts, [max(result.column_error[(label, t)], floor / 10) for t in ts], "-o",
                color=color, markersize=3, label=f"column error, {label}")
    ax.plot(ts, [max(max(result.row_error[(label, t)] for label, _, _ in FAMILIES), floor / 10)
                 for t in ts], ":", color="black", label="row error (all)")
    ax.axhline(floor, color="grey", linewidth=0.8, linestyle="--")
    ax.text(result.iterations[-1], floor * 1.5, f"{result.dtype} eps".replace("torch.", ""),
            ha="right", va="bottom", fontsize=8, color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Sinkhorn–Knopp rounds t")
    ax.set_ylabel("max |sum − 1|")
    ax.set_title(f"Doubly-stochastic error, mHC logits, n={result.n} "
                 f"(values < eps/10 drawn at eps/10)", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return ""
