"""benchmarks/connection_cost.py runs at a tiny size and its memory counts are consistent."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "connection_cost.py"


def test_tiny_run() -> None:
    spec = importlib.util.spec_from_file_location("connection_cost", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["connection_cost"] = module
    spec.loader.exec_module(module)
    rows = module.main(["--batch", "1", "--tokens", "8", "--n", "2", "--d", "16",
                        "--repeats", "2", "--warmup", "1", "--no-peak"])
    assert set(rows) == {"branch", "residual", "mhc"}
    assert all(r["median_ms"] > 0 for r in rows.values())
    # x + F(x) saves nothing beyond F; mHC saves at least the branch input and output (2·B·T·d)
    assert rows["residual"]["saved_mib"] == rows["branch"]["saved_mib"]
    assert rows["mhc"]["saved_mib"] - rows["branch"]["saved_mib"] >= 2 * 8 * 16 * 4 / 2**20
    assert rows["mhc"]["peak_mib"] == -1.0  # --no-peak
    # the peak is measured in a fresh process; one run shows that path works
    setup = module.Setup(1, 8, 2, 16, "float32", "cpu", 1)
    assert module.peak_bytes("mhc", setup) >= 0
