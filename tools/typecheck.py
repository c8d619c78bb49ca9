"""``python -m tools.typecheck``: shorthand for the direct call, from the repository root,
``python -m mypy --strict -p hcspec.spec -p hcspec.formulas -p hcspec.reference
-p hcspec.conformance``.

Nothing is rebuilt or linked here: ``src/hcspec`` holds the layers under their installed names
(real folders; the top-level ``spec``, ``reference`` and ``conformance`` link to them) and
pyproject's ``mypy_path`` points mypy at ``src``.
Extra arguments go to mypy. Exit status: mypy's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("spec", "formulas", "reference", "conformance")


def main(argv: list[str] | None = None) -> int:
    """Run mypy --strict on the four layers as ``hcspec.<layer>``; returns mypy's exit code."""
    command = [sys.executable, "-m", "mypy", "--strict",
               *(arg for layer in LAYERS for arg in ("-p", f"hcspec.{layer}")),
               *(sys.argv[1:] if argv is None else argv)]
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
