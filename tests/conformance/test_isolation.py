"""isolation: torch's global state is snapshotted, compared and restored; check_implementation
leaves the caller's process as it found it, whatever the target changes."""

from __future__ import annotations

import doctest
from typing import Any

import torch

from hcspec.conformance.adapters.reference import make_hc_static
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run import isolation
from hcspec.conformance.run.session import check_implementation


def test_the_docstring_example_runs() -> None:
    assert doctest.testmod(isolation).failed == 0


def test_every_kind_of_change_is_named_and_restored() -> None:
    before = isolation.snapshot()
    with isolation.watch() as changed:
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(1234)
        torch.set_grad_enabled(False)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(max(1, torch.get_num_threads() + 1))
        torch.autograd.set_detect_anomaly(True)
        torch.set_float32_matmul_precision("medium")
    assert changed == [
        "default dtype torch.float32 -> torch.float64",
        "the global CPU RNG state was changed (reseeded or drawn from)",
        "grad mode True -> False",
        "torch.use_deterministic_algorithms False -> True",
        "torch.backends.cuda.matmul.allow_tf32 False -> True",  # set by the precision
        "float32 matmul precision highest -> medium",
        f"torch.get_num_threads() {before.num_threads} -> {before.num_threads + 1}",
        "anomaly mode False -> True",
    ]
    assert isolation.changes(before, isolation.snapshot()) == []


def _hostile(n: int, d: int, **kwargs: Any) -> Any:
    torch.set_default_dtype(torch.float16)
    torch.manual_seed(99)
    torch.autograd.set_detect_anomaly(True)
    return make_hc_static(n, d, **kwargs)


def test_check_implementation_leaves_the_process_as_it_found_it() -> None:
    torch.manual_seed(5)
    before = isolation.snapshot()
    report = check_implementation(_hostile, profile="quick", device="cpu",
                                  only=["shape.output"])
    assert isolation.changes(before, isolation.snapshot()) == []
    assert report.global_state_changes == ["default dtype torch.float32 -> torch.float16",
                                           "anomaly mode False -> True"]
    assert any("default dtype torch.float32 -> torch.float16" in w for w in report.warnings)
    output = next(r for r in report.results if r.id == "shape.output")
    assert output.status == rp.PASSED
    assert "default dtype torch.float32 -> torch.float16" in output.global_state_changes
