"""examples/train_tiny.py: 30 steps of each connection on CPU lower the loss."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_tiny.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_tiny", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_tiny"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train_tiny() -> ModuleType:
    return _load()


def test_corpus_is_real_text(train_tiny: ModuleType) -> None:
    corpus = train_tiny.Corpus.from_text(train_tiny.load_text())
    assert len(corpus.train) > 100_000
    assert "e" in corpus.vocab and " " in corpus.vocab


@pytest.mark.parametrize("connection", ["residual", "hc-static", "hc-dynamic", "mhc"])
def test_thirty_steps_lower_the_loss(train_tiny: ModuleType, connection: str) -> None:
    corpus = train_tiny.Corpus.from_text(train_tiny.load_text())
    config = train_tiny.Config(steps=30, batch_size=8, seq_len=32, d=32, layers=2, heads=4, n=4,
                               val_batches=2)
    result = train_tiny.train(connection, corpus, config)
    first, last = result.losses[:3], result.losses[-5:]
    assert abs(sum(first) / 3 - math.log(len(corpus.vocab))) < 0.5  # starts near uniform
    assert sum(last) / 5 < sum(first) / 3 - 0.8, result.losses
    assert math.isfinite(result.val_loss) and result.val_loss < result.losses[0]


def test_cli_runs_and_plots(train_tiny: ModuleType, tmp_path: Path) -> None:
    plot = tmp_path / "curves.png"
    results = train_tiny.main(["--steps", "2", "--connections", "hc-static", "--d", "16",
                               "--heads", "2", "--layers", "1", "--seq-len", "16",
                               "--plot", str(plot)])
    assert [r.connection for r in results] == ["hc-static"]
    assert len(results[0].losses) == 2
    pytest.importorskip("matplotlib", reason="matplotlib not installed: plot not produced")
    assert plot.stat().st_size > 1000
