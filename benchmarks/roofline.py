"""Roofline: what this machine can do, what a connection must do, and how close we are.

Machine limits, measured in the same run (medians):

* copy bandwidth — ``dst.copy_(src)`` between two existing buffers larger than the last-level
  cache (bytes moved = read + write); also ``src.clone()``, which includes allocating (and on
  Linux page-faulting in) a fresh output, the cost every new full-size tensor pays;
* float32 matmul rate — ``torch.mm`` of two square matrices, ``2k³`` FLOPs.

Work of one connection, forward + backward, excluding the branch (a lower bound: what a fused
implementation must move and compute). With ``S = B·T·n·d·s`` (one state, ``s`` bytes per
element), ``h = B·T·d·s`` (one stream) and ``P`` the bytes of the weight-generating parameters:

* bytes — HC/mHC: forward reads X, writes X' and x_in, reads z: ``2S + 2h``; backward reads G'
  and X, writes ∂X, reads g_in and z, writes g_z: ``3S + 3h``; parameters read twice and their
  gradient written: ``3P``. Residual ``x + F(x)``: ``3h`` forward, ``3h`` backward.
* FLOPs — forward per token of each kind from the spec
  (:func:`hcspec.spec.counts.flops_per_module`, with ``t_max`` Sinkhorn–Knopp rounds for mHC);
  the residual ``d``. Backward = 2 × forward, so forward + backward = 3 × forward.
* parameters — :func:`hcspec.spec.counts.params_per_module` (hc-dynamic without norm
  parameters).

Bound = max(bytes / copy bandwidth, FLOPs / matmul rate); the table prints achieved time
(fwd+bwd − branch, from the connection section of the same run) ÷ bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from benchmarks import markdown as md
from benchmarks.connection import MAIN_RUN, ConfigResult
from benchmarks.measure import Timing
from benchmarks.subjects import BRANCH_ONLY, Config
from hcspec.reference.sinkhorn import DEFAULT_ITERATIONS
from hcspec.spec import counts
from hcspec.spec.kinds import KINDS


@dataclass(frozen=True)
class Limits:
    """Measured machine limits (bytes/s, FLOP/s) and the sizes they were measured at."""

    copy_bandwidth: float
    clone_bandwidth: float
    matmul_rate: float
    copy_bytes: int
    matmul_size: int
    device: str


def _median_seconds(fn: object, repeats: int, device: str) -> float:
    assert callable(fn)
    fn()
    seconds = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return Timing.median(seconds)


def measure_limits(copy_mib: int, matmul_size: int, repeats: int, device: str) -> Limits:
    """Copy bandwidth (``copy_`` and ``clone``) of a ``copy_mib`` MiB float32 tensor and the
    float32 ``torch.mm`` rate at ``matmul_size``², medians of ``repeats``."""
    elements = copy_mib * 2**20 // 4
    src = torch.rand(elements, device=device)
    dst = torch.empty_like(src)
    moved = 2 * src.nbytes  # read + write
    copy_s = _median_seconds(lambda: dst.copy_(src), repeats, device)
    clone_s = _median_seconds(lambda: src.clone(), repeats, device)
    a = torch.rand(matmul_size, matmul_size, device=device)
    b = torch.rand(matmul_size, matmul_size, device=device)
    mm_s = _median_seconds(lambda: torch.mm(a, b), repeats, device)
    return Limits(moved / copy_s, moved / clone_s, 2 * matmul_size**3 / mm_s, src.nbytes,
                  matmul_size, device)


def forward_flops_per_token(kind: str, n: int, d: int,
                            iterations: int = DEFAULT_ITERATIONS) -> int | None:
    """Forward FLOPs per token of one connection of ``kind`` (see the module docstring);
    None for a kind without a count."""
    if kind == "residual":
        return d
    if kind in KINDS:
        return counts.flops_per_module(kind, n, d, iterations)
    return None


def weight_parameter_count(kind: str, n: int, d: int) -> int:
    """Parameters that generate the weights (read in forward and backward, gradient written)."""
    if kind in KINDS:
        return counts.params_per_module(kind, n, d)
    return 0


def work(kind: str, config: Config) -> tuple[int, int] | None:
    """``(bytes, FLOPs)`` of one forward + backward of a ``kind`` connection at ``config``,
    excluding the branch; None for an unknown kind."""
    flops = forward_flops_per_token(kind, config.n, config.d)
    if flops is None:
        return None
    tokens = config.batch * config.tokens
    item = torch.empty((), dtype=config.dtype).element_size()
    state, stream = tokens * config.n * config.d * item, tokens * config.d * item
    if kind == "residual":
        return 6 * stream, 3 * tokens * flops
    params = weight_parameter_count(kind, config.n, config.d) * item
    return 5 * state + 5 * stream + 3 * params, 3 * tokens * flops


def limits_table(limits: Limits) -> md.Table:
    """The measured machine limits."""
    t = md.Table(f"Machine limits ({limits.device}, float32)", ["measure", "value", "how"])
    size = md.mib(limits.copy_bytes)
    t.add("copy bandwidth", f"{limits.copy_bandwidth / 1e9:.1f} GB/s",
          f"dst.copy_(src), {size} MiB, read + write")
    t.add("clone bandwidth (fresh output)", f"{limits.clone_bandwidth / 1e9:.1f} GB/s",
          f"src.clone(), {size} MiB: includes allocating and first-touching the output")
    t.add("matmul rate", f"{limits.matmul_rate / 1e9:.0f} GFLOP/s",
          f"torch.mm {limits.matmul_size}×{limits.matmul_size} @ "
          f"{limits.matmul_size}×{limits.matmul_size}")
    return t


def roofline_table(result: ConfigResult, limits: Limits) -> tuple[md.Table, dict[str, float]]:
    """Achieved vs bound for every measured subject of ``result``; also returns
    name -> achieved/bound.

    A row measured in this process: its "− branch" median ÷ bound. A row from another run
    (:attr:`~benchmarks.connection.Row.run` not ``main``, see :mod:`benchmarks.venvs`): its
    same-run ratio to ``reference:mhc-fast`` × ``reference:mhc-fast``'s achieved ÷ bound here
    (no absolute time crosses runs); its "achieved ms" is that ratio × the bound.
    """
    config = result.config
    t = md.Table(
        f"Roofline, {config.name}: {config.describe()}, forward + backward minus the branch",
        ["subject", "kind", "run", "MB moved", "MFLOP", "bound ms", "bound by", "achieved ms",
         "achieved ÷ bound"],
    )
    ratios: dict[str, float] = {}
    base = result.baseline()
    base_ratio = None
    if base is not None and base.minus_branch is not None:
        counted = work(base.kind, config)
        if counted is not None:
            base_ratio = base.minus_branch / bound_seconds(counted, limits)
    for row in result.rows:
        if row.skipped or row.name == BRANCH_ONLY or row.minus_branch is None:
            continue
        counted = work(row.kind, config)
        if counted is None:
            continue
        nbytes, flops = counted
        memory_s, compute_s = nbytes / limits.copy_bandwidth, flops / limits.matmul_rate
        bound = max(memory_s, compute_s)
        if row.run in ("", MAIN_RUN):
            ratios[row.name] = row.minus_branch / bound
        elif row.relative is not None and base_ratio is not None:
            ratios[row.name] = row.relative * base_ratio
        else:
            continue
        t.add(row.name, row.kind, row.run or MAIN_RUN, f"{nbytes / 1e6:.1f}",
              f"{flops / 1e6:.1f}", md.ms(bound), "memory" if memory_s >= compute_s else "compute",
              md.ms(ratios[row.name] * bound), md.ratio(ratios[row.name]))
    t.notes = ["Counts are per kind (module docstring of benchmarks/roofline.py); a third-party "
               "implementation of a kind is held to the same work. Bound uses the copy_ "
               "bandwidth; with the clone bandwidth (every output freshly allocated) it would "
               f"be {limits.copy_bandwidth / limits.clone_bandwidth:.1f}× longer for the "
               "memory part.",
               "Rows from another run: same-run ratio to reference:mhc-fast × reference:mhc-fast's "
               "achieved ÷ bound in this run (no absolute time crosses runs)."]
    if config.dtype != torch.float32:
        t.notes.append(f"Bytes are counted in {str(config.dtype).removeprefix('torch.')}; the "
                       "compute part uses the float32 matmul rate (the CPU has no faster "
                       "low-precision path that every implementation would use).")
    return t, ratios


def bound_seconds(counted: tuple[int, int], limits: Limits) -> float:
    """max(bytes / copy bandwidth, FLOPs / matmul rate) for ``counted = (bytes, FLOPs)``."""
    return max(counted[0] / limits.copy_bandwidth, counted[1] / limits.matmul_rate)
