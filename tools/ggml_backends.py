"""Compare ggml's fused DeepSeek-V4 step on one backend (``CUDA0``) with the CPU backend and
with the float64 published oracle, without the kit's worker (a check script for
tools/gpu_check.sh).

    python -m tools.ggml_backends --backend CUDA0          # HC_GGML_LIB: a build with CUDA
    python -m tools.ggml_backends --backend CPU --threads 2   # (what CI can run)

For several seeds and sizes (n = 4; 1 to 257 tokens; d from 8 to 1024) the state, the
parameters (``hc_fn ~ N(0, 0.3²)``, ``hc_scale`` near 1, ``hc_base ~ N(0, 0.5²)``) and a
``tanh`` branch are drawn; ``X'`` is computed by ggml on the backend and on the CPU backend
(:mod:`hcspec.conformance.native.ggml_steps`: ``read``, the branch in NumPy, ``write``) and by the
published formulas in float64 (:mod:`hcspec.formulas.published`). Printed: the
largest error relative to ``max |X'|`` of the backend vs the oracle and vs the CPU. Exit
status 1 when the backend's error vs the oracle exceeds ``--tolerance`` (default 5e-5: the CPU
backend errs by up to 4e-6 at d = 1024, its float32 sums over n·d = 4096 products), 2 when
the backend cannot be initialised.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
import torch

from hcspec.conformance.native import ggml, ggml_steps
from hcspec.formulas.published import weights

SIZES = ((1, 8), (7, 64), (33, 256), (257, 1024))
"""``(tokens, d)`` of the cases (n = 4)."""


def step(x: np.ndarray, params: dict[str, np.ndarray], w: np.ndarray,
         backend: ggml.Backend) -> np.ndarray:
    """``X' [N, 4, d]`` by ggml on ``backend`` with the branch ``tanh(x_in w)``."""
    s = ggml_steps.Settings(backend=backend)
    x_in, post, comb = ggml_steps.read(x, params["hc_fn"], params["hc_scale"], params["hc_base"], s)
    z = np.tanh(x_in.astype(np.float64) @ w).astype(np.float32)
    return ggml_steps.write(x, z, post, comb, s)


def oracle(x: np.ndarray, params: dict[str, np.ndarray], w: np.ndarray) -> np.ndarray:
    """The float64 published DeepSeek-V4 step (row form) on the same inputs."""
    tokens, n, d = x.shape
    x64 = torch.tensor(x, dtype=torch.float64).reshape(1, tokens, n, d)
    h_pre, h_post, h_res = weights("deepseek-v4", {k: torch.tensor(v, dtype=torch.float64)
                                                   for k, v in params.items()}, x64)
    z = torch.tanh(torch.einsum("btn,btnd->btd", h_pre, x64) @ torch.tensor(w))
    out = torch.einsum("btij,btjd->btid", h_res, x64) + h_post[..., None] * z[..., None, :]
    return out.reshape(tokens, n, d).numpy()


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tools.ggml_backends")
    parser.add_argument("--backend", default="CUDA0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=5e-5)
    args = parser.parse_args(argv)
    lib = ggml.load()
    print(f"ggml at {lib.directory}; devices {lib.devices()}")
    backend, cpu = ggml.Backend(args.backend, args.threads), ggml.Backend("CPU", args.threads)
    worst = 0.0
    for seed in range(args.seeds):
        for tokens, d in SIZES:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal((tokens, 4, d)).astype(np.float32)
            params = {"hc_fn": (rng.standard_normal((24, 4 * d)) * 0.3).astype(np.float32),
                      "hc_scale": (1 + 0.3 * rng.standard_normal(3)).astype(np.float32),
                      "hc_base": (rng.standard_normal(24) * 0.5).astype(np.float32)}
            w = rng.standard_normal((d, d)) / np.sqrt(d)
            try:
                got = step(x, params, w, backend)
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            want, on_cpu = oracle(x, params, w), step(x, params, w, cpu)
            scale = float(np.abs(want).max())
            vs_oracle = float(np.abs(got - want).max()) / scale
            vs_cpu = float(np.abs(got - on_cpu).max()) / scale
            worst = max(worst, vs_oracle)
            print(f"seed {seed} tokens {tokens:4d} d {d:5d}: {args.backend} vs float64 oracle "
                  f"{vs_oracle:.2e}, vs CPU {vs_cpu:.2e} (bitwise equal: "
                  f"{np.array_equal(got, on_cpu)})")
    print(f"worst {args.backend} vs oracle: {worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
