"""The depth plot's stacks: mHC's state cannot grow with a zero branch, HC's and the depth
mutant's do; the plot is written when matplotlib is installed (the optional extra ``plot``)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

from benchmarks import depth

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def test_stacks_show_the_bound_of_mhc_and_the_growth_of_the_defect() -> None:
    mhc = depth.state_rms(depth._factory(depth.SUBJECTS["reference:mhc"]), 12, branch=False)
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(mhc))
    mutant = depth.state_rms(
        depth._factory(depth.SUBJECTS["mutant: deep layers skip Sinkhorn–Knopp"]), 12,
        branch=False)
    assert mutant[8] == pytest.approx(mhc[8], rel=1e-12)  # identical for layers 0 … 7
    assert mutant[12] > 2 * mutant[8]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib (extra 'plot') is not installed")
def test_the_plot_is_written(tmp_path: Path) -> None:
    out = tmp_path / "depth.png"
    assert depth.main(["--layers", "3", "--out", str(out)]) == 0
    assert out.stat().st_size > 1000
