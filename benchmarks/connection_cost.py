"""Cost of one mHC sublayer next to a plain residual sublayer with the same branch.

Measures forward+backward wall time (median over repeats) and memory of three variants on the
same branch ``F = Linear ∘ RMSNorm`` (d → d):

* ``branch``:   ``F(h)`` alone, ``h: [B, T, d]`` — the common cost;
* ``residual``: ``h + F(h)``;
* ``mhc``:      ``ManifoldHyperConnection(n, d)(X, F)``, ``X: [B, T, n, d]``, 20 Sinkhorn rounds.

The cost of a connection *excluding the branch* is its row minus the ``branch`` row.

Memory, two ways (tracemalloc does not see torch's CPU allocations):

* saved activations — bytes of the distinct tensor storages autograd keeps for backward,
  recorded with ``torch.autograd.graph.saved_tensors_hooks`` (inputs and parameters excluded):
  exact and deterministic, the activation memory a training step has to hold;
* peak — on CUDA ``torch.cuda.max_memory_allocated`` over one step above the memory held
  before it; on CPU the growth of the process's peak RSS (``VmHWM``) during the first
  full-size step of a fresh subprocess per variant (after one tiny step that triggers the
  libraries' one-time initialisation), above its RSS just before; the kernel's peak mark is
  reset first (``/proc/self/clear_refs``). Coarse — page granularity, allocator and BLAS
  workspaces — and it includes the gradients of inputs and parameters.

    PYTHONPATH=. python benchmarks/connection_cost.py            # B=4 T=512 n=4 d=1024 fp32 CPU
    PYTHONPATH=. python benchmarks/connection_cost.py --threads 2 --repeats 30
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table
from torch import nn

from reference import ManifoldHyperConnection

VARIANTS = ("branch", "residual", "mhc")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Setup:
    batch: int
    tokens: int
    n: int
    d: int
    dtype: str
    device: str
    threads: int
    seed: int = 0


class PreNormLinear(nn.Module):
    """The branch: ``F(x) = W · RMSNorm(x)``, ``[B, T, d] -> [B, T, d]``."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d)
        self.linear = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.linear(self.norm(x))
        return out


def build(variant: str, setup: Setup) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
    """A zero-argument forward for ``variant`` and the leaf tensors it reads (inputs, params)."""
    torch.manual_seed(setup.seed)
    dtype, device = DTYPES[setup.dtype], torch.device(setup.device)
    branch = PreNormLinear(setup.d).to(device=device, dtype=dtype)
    leaves = list(branch.parameters())
    if variant == "mhc":
        mhc = ManifoldHyperConnection(setup.n, setup.d, dtype=dtype, device=device)
        x = torch.randn(setup.batch, setup.tokens, setup.n, setup.d, dtype=dtype, device=device)
        x.requires_grad_(True)
        return (lambda: mhc(x, branch)), [*leaves, *mhc.parameters(), x]
    h = torch.randn(setup.batch, setup.tokens, setup.d, dtype=dtype, device=device)
    h.requires_grad_(True)
    if variant == "residual":
        return (lambda: h + branch(h)), [*leaves, h]
    return (lambda: branch(h)), [*leaves, h]


def step(forward: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> None:
    """One forward + backward with a unit upstream gradient; gradients are then dropped."""
    out = forward()
    out.backward(torch.ones_like(out))
    for leaf in leaves:
        leaf.grad = None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(setup: Setup, repeats: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per forward+backward for every variant, interleaved round-robin so that a
    change in machine load hits all variants alike."""
    built = {variant: build(variant, setup) for variant in VARIANTS}
    for _ in range(warmup):
        for forward, leaves in built.values():
            step(forward, leaves)
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for _ in range(repeats):
        for variant, (forward, leaves) in built.items():
            _sync(setup.device)
            start = time.perf_counter()
            step(forward, leaves)
            _sync(setup.device)
            seconds[variant].append(time.perf_counter() - start)
    return seconds


def saved_activation_bytes(variant: str, setup: Setup) -> int:
    """Bytes of the distinct storages autograd saves for backward, inputs/params excluded."""
    forward, leaves = build(variant, setup)
    excluded = {leaf.untyped_storage().data_ptr() for leaf in leaves}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    out.backward(torch.ones_like(out))
    return sum(storages.values())


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux ≥ 4.0); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _peak_in_this_process(variant: str, setup: Setup) -> int:
    torch.set_num_threads(setup.threads)
    # One tiny step first, so one-time library initialisation is not counted as peak memory.
    step(*build(variant, replace(setup, batch=1, tokens=1)))
    forward, leaves = build(variant, setup)
    before = _rss_bytes()
    if not _reset_peak_rss() and _peak_rss_bytes() > before:
        return -1  # an earlier, higher peak would hide this step's: cannot measure
    step(forward, leaves)
    return max(0, _peak_rss_bytes() - before)


def peak_bytes(variant: str, setup: Setup) -> int:
    """Peak memory growth of one forward+backward (see the module docstring); -1 if unknown."""
    if setup.device.startswith("cuda"):
        forward, leaves = build(variant, setup)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        step(forward, leaves)
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - held)
    if platform.system() != "Linux":
        return -1
    root = str(Path(__file__).resolve().parents[1])
    paths = [root, os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure-peak", variant,
               "--batch", str(setup.batch), "--tokens", str(setup.tokens), "--n", str(setup.n),
               "--d", str(setup.d), "--dtype", setup.dtype, "--device", setup.device,
               "--threads", str(setup.threads)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"peak-memory subprocess failed:\n{done.stderr}")
    return int(done.stdout.strip().splitlines()[-1])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="mHC sublayer vs residual: time and memory")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-peak", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--measure-peak", choices=VARIANTS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    setup = Setup(args.batch, args.tokens, args.n, args.d, args.dtype, args.device, args.threads)
    if args.measure_peak:  # the fresh process that peak_bytes starts
        print(_peak_in_this_process(args.measure_peak, setup))
        return {}
    console = Console()
    console.print(
        f"B={setup.batch} T={setup.tokens} n={setup.n} d={setup.d} {setup.dtype} on "
        f"{setup.device}, {setup.threads} thread(s), torch {torch.__version__}, "
        f"median of {args.repeats} after {args.warmup} warm-up steps"
    )
    rows: dict[str, dict[str, float]] = {}
    timings = time_steps(setup, args.repeats, args.warmup)
    for variant, seconds in timings.items():
        rows[variant] = {
            "median_ms": 1e3 * statistics.median(seconds),
            "min_ms": 1e3 * min(seconds),
            "saved_mib": saved_activation_bytes(variant, setup) / 2**20,
            "peak_mib": -1.0 if args.no_peak else peak_bytes(variant, setup) / 2**20,
        }
    mib = lambda v: f"{v:.1f}" if v >= 0 else "n/a"  # noqa: E731
    table = Table(title="forward + backward of one sublayer")
    for column in ("variant", "median ms", "min ms", "saved activations MiB", "peak MiB"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant, r in rows.items():
        table.add_row(variant, f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}",
                      mib(r["saved_mib"]), mib(r["peak_mib"]))
    for variant in ("residual", "mhc"):
        r, b = rows[variant], rows["branch"]
        measured = r["peak_mib"] >= 0 and b["peak_mib"] >= 0
        table.add_row(f"{variant} − branch", f"{r['median_ms'] - b['median_ms']:.1f}",
                      f"{r['min_ms'] - b['min_ms']:.1f}",
                      f"{r['saved_mib'] - b['saved_mib']:.1f}",
                      f"{r['peak_mib'] - b['peak_mib']:.1f}" if measured else "n/a")
    console.print(table)
    state_mib = setup.batch * setup.tokens * setup.n * setup.d * torch.finfo(
        DTYPES[setup.dtype]).bits / 8 / 2**20
    console.print(f"for scale: one multi-stream state [B,T,n,d] is {state_mib:.1f} MiB")
    return rows


if __name__ == "__main__":
    main()
