"""``python -m tools.typecheck``: ``mypy --strict`` over spec/, reference/ and conformance/ under
their installed names (``hcspec.spec``, ``hcspec.reference``, ``hcspec.conformance``).

The folders sit at the repository root but are imported as ``hcspec.*`` (pyproject maps them),
and mypy cannot follow the import hook of an editable install. So this builds a throw-away tree
``hcspec/{spec,reference,conformance}`` of symbolic links to the folders and points mypy at it.
Extra arguments go to mypy. Exit status: mypy's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("spec", "reference", "conformance")


def main(argv: list[str] | None = None) -> int:
    """Run mypy --strict on the three layers as ``hcspec.<layer>``; returns mypy's exit code."""
    with tempfile.TemporaryDirectory(prefix="hcspec-typecheck-") as tmp:
        package = Path(tmp, "hcspec")
        package.mkdir()
        for layer in LAYERS:
            (package / layer).symlink_to(ROOT / layer, target_is_directory=True)
        command = [sys.executable, "-m", "mypy", "--strict",
                   "--config-file", str(ROOT / "pyproject.toml"),
                   "--cache-dir", str(ROOT / ".mypy_cache"),
                   *(arg for layer in LAYERS for arg in ("-p", f"hcspec.{layer}")),
                   *(sys.argv[1:] if argv is None else argv)]
        env = dict(os.environ, MYPYPATH=tmp)
        return subprocess.run(command, cwd=tmp, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
