"""State norm vs depth: a stack of L sublayers of each reference target (and of the depth
mutant), each fed the previous one's output, with a zero branch and with a random pre-norm
MLP branch; the RMS of the stream state after every sublayer, plotted on a log scale.

mHC mixes with doubly stochastic matrices, whose products are doubly stochastic (spec
``ds.product_closure``): with a zero branch the state cannot grow, with a branch it grows at
most by what the branches add. HC's mixing has no such bound. The mutant
``depth_deep_layers_unnormalised`` (Sinkhorn–Knopp skipped from layer 8 on, modelled on an MLX
kernel whose hidden-state std grew from 0.07 to 376 over 43 layers) shows what a defect that
only deep layers take looks like.

Run from the repository root (matplotlib is the optional extra ``plot``)::

    python -m benchmarks.depth --out docs/findings/depth.png
"""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

N, D, TOKENS = 4, 64, 32
"""Expansion rate, hidden size and tokens of the stacks."""
PERTURBATION = 0.3
"""Relative std of the noise added to every parameter (away from the init)."""

SUBJECTS: dict[str, str] = {
    "reference:hc-static": "hcspec.reference.targets:hc_static",
    "reference:hc-dynamic": "hcspec.reference.targets:hc_dynamic",
    "reference:mhc": "hcspec.reference.targets:mhc",
    "mutant: deep layers skip Sinkhorn–Knopp":
        "tests.mutants.depth_deep_layers_unnormalised:make",
}
"""Label -> factory (``module:attribute``)."""


def _factory(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    factory: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return factory


def _branch(d: int, seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A pre-norm MLP sublayer ``W₂ tanh(W₁ RMSNorm(x))`` with fixed random weights."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    w1 = torch.randn(d, 4 * d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    w2 = torch.randn(4 * d, d, generator=gen, dtype=torch.float64) / math.sqrt(4 * d)

    def branch(x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return torch.tanh(normed @ w1) @ w2

    return branch


def _perturb(impl: Any, seed: int) -> None:
    gen = torch.Generator().manual_seed(20_000 + seed)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(PERTURBATION * (1 + p.abs()) * torch.randn(p.shape, generator=gen,
                                                               dtype=p.dtype))


def state_rms(factory: Callable[..., Any], layers: int, branch: bool) -> list[float]:
    """RMS of the state after each of ``layers`` sublayers (float64, CPU), from a unit-RMS
    random state; layer ``l`` is built with ``layer_index=l, seed=l`` and perturbed."""
    x = torch.randn(1, TOKENS, N, D, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    zero: Callable[[torch.Tensor], torch.Tensor] = torch.zeros_like
    out = [float(x.pow(2).mean().sqrt())]
    with torch.no_grad():
        for layer in range(layers):
            impl = factory(N, D, layer_index=layer, dtype=torch.float64, seed=layer)
            _perturb(impl, layer)
            x = impl.forward(x, _branch(D, layer) if branch else zero)
            out.append(float(x.pow(2).mean().sqrt()))
    return out


def plot(curves: dict[tuple[str, bool], list[float]], path: Path) -> str:
    """Save the RMS-vs-depth plot to ``path``; returns "" or why it was not drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc}); pip install 'hcspec[plot]'"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    for ax, branch in zip(axes, (False, True), strict=True):
        for (label, with_branch), rms in curves.items():
            if with_branch != branch:
                continue
            style = "--" if label.startswith("mutant") else "-"
            ax.plot(range(len(rms)), rms, style, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("sublayers")
        ax.set_title("random pre-norm MLP branch" if branch else "zero branch (F ≡ 0)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("RMS of the stream state")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"State norm vs depth (n = {N}, d = {D}, parameters perturbed "
                 f"{PERTURBATION:g}·(1 + |θ|))")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return ""


def main(argv: list[str] | None = None) -> int:
    """Print the RMS at a few depths per subject and write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--out", type=Path, default=Path("docs/findings/depth.png"))
    args = parser.parse_args(argv)
    curves: dict[tuple[str, bool], list[float]] = {}
    for label, spec in SUBJECTS.items():
        factory = _factory(spec)
        for branch in (False, True):
            rms = state_rms(factory, args.layers, branch)
            curves[(label, branch)] = rms
            marks = ", ".join(f"{k}: {rms[k]:.3g}"
                              for k in sorted({0, 8, 16, args.layers}) if k <= args.layers)
            print(f"{label:52s} {'mlp ' if branch else 'zero'} RMS at {marks}")
    why = plot(curves, args.out)
    print(why or f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
