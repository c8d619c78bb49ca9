"""Run-level diagnostics: behaviours of a target that would otherwise surface only as a
scatter of property failures, reported once in the run's header (``Report.warnings``).

The kit runs every property on impls as the factory builds them. A module built by PyTorch is
in training mode; if its forward is random there (dropout), every property that compares two
forwards fails, and the header says why (HC arXiv:2409.19606 Eq. 3–5 has no random term, so
this is a real difference from the law, shown — not hidden by switching to eval mode).
"""

from __future__ import annotations

import torch

from hcspec.conformance import probes, strategies
from hcspec.conformance.protocol import Conventions, HyperConnectionImpl


def sample_state(n: int, d: int, dtype: torch.dtype, device: str,
                 conventions: Conventions) -> torch.Tensor:
    """A ``[2, 3, n, d]`` state for the diagnostics, replicated across the streams when the
    impl declares ``state_domain="replicated"``."""
    x = strategies.stream_state(strategies.Case(2, 3, n, d, seed=7), dtype, device)
    if conventions.state_domain == "replicated":
        x = x[..., :1, :].expand_as(x).contiguous()
    return x


def diagnose(impl: HyperConnectionImpl, dtype: torch.dtype, device: str,
             conventions: Conventions) -> list[str]:
    """Warnings about ``impl`` as built: a forward that returns non-finite values, one that
    is not deterministic (naming the module's training mode), or one that fails on the
    sample state. Never raises except
    ``KeyboardInterrupt`` (the properties report whatever goes wrong in detail)."""
    try:
        x = sample_state(impl.n, impl.d, dtype, device, conventions)
        branch = strategies.make_branch("mlp", impl.d, dtype, device, seed=7)
        with torch.no_grad():
            first = probes.forward_on_copy(impl, x, branch)
            second = probes.forward_on_copy(impl, x, branch)
        if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
                and first.shape == second.shape):
            return []
        bad = [int((~torch.isfinite(t)).sum()) for t in (first, second)
               if t.is_floating_point()]
        if any(bad):  # NaN != NaN: not a sign of randomness, and the real cause
            return [f"forward returned {max(bad)} non-finite values (NaN/inf) for a finite "
                    f"sample [2, 3, {impl.n}, {impl.d}] state: properties that compare outputs "
                    "fail because of it (this is not non-determinism)"]
        same = bool(torch.equal(first, second))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # reported in detail by shape.output
        return [f"forward raised on a sample [2, 3, {impl.n}, {impl.d}] state: "
                f"{type(exc).__name__}: {exc}"]
    if same:
        return []
    diff = float((first - second).abs().max()) if first.is_floating_point() else float("nan")
    training = getattr(impl, "training", None)
    mode = ("in training mode, as the factory built it (e.g. dropout is active)"
            if training is True else "in the mode the factory built it")
    return [f"forward is not deterministic {mode}: two forwards of the same input differ by up "
            f"to {diff:.3g}. Properties that compare forwards (law, independence, gradients, "
            "reduction, dtype) then fail because of it; state.deterministic_eval checks eval "
            "mode."]
