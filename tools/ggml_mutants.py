"""Build ggml with a planted bug in its CPU hyper-connection kernels and show that the kit's
``llama_cpp:deepseek-v4`` run fails by a named property.

    python -m tools.ggml_mutants                 # build every mutant, run each, print the verdicts
    python -m tools.ggml_mutants --only eps_dropped --profile quick
    python -m tools.ggml_mutants --build-only    # the libraries only (printed: one dir each)

The unpacked llama.cpp of the cached build (``python -m hcspec.conformance.native.build``
fetches it) is copied to a temporary directory (without its ``models``, ``docs`` and
``media``) and configured with the same options, one bug is planted by an exact text replacement in
``ggml/src/ggml-cpu/ops.cpp`` (each replacement must match exactly once, else the script stops:
the source moved), and ``ggml-base``/``ggml-cpu`` are built; the next mutant reverts it and plants
its own in the same build tree, so only ``ops.cpp`` recompiles. Each mutant's libraries go to
``<cache>/mutants/<name>/`` and the run uses them through ``$HC_GGML_LIB``.

The bugs (:data:`MUTANTS`):

* ``eps_dropped``: ``ggml_dsv4_hc_comb`` no longer adds ``eps`` after the softmax;
* ``iterations_short``: its loop of (row, column) normalisations runs one round fewer;
* ``comb_transposed``: ``ggml_dsv4_hc_post`` reads ``comb[src, dst]`` for ``comb[dst, src]``.

Nothing of llama.cpp is copied into this repository: the replacements name single lines of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hcspec.conformance.native import build as native_build

OPS = "ggml/src/ggml-cpu/ops.cpp"


@dataclass(frozen=True)
class Mutant:
    """One planted bug: ``old`` replaced by ``new`` in :data:`OPS` (exactly once)."""

    name: str
    what: str
    old: str
    new: str


MUTANTS: tuple[Mutant, ...] = (
    Mutant("eps_dropped", "the additive eps after the softmax dropped (ggml_dsv4_hc_comb)",
           "comb[idx] = comb[idx] * inv_sum + eps;", "comb[idx] = comb[idx] * inv_sum;"),
    Mutant("iterations_short", "the Sinkhorn rounds counted one short (ggml_dsv4_hc_comb)",
           "for (int32_t i = 1; i < n_iter; ++i) {", "for (int32_t i = 2; i < n_iter; ++i) {"),
    Mutant("comb_transposed", "comb read transposed in ggml_dsv4_hc_post",
           "comb->data     + idst*nbc0 + isrc*nbc1", "comb->data     + isrc*nbc0 + idst*nbc1"),
)
BY_NAME = {m.name: m for m in MUTANTS}


def mutants_dir() -> Path:
    """Where the mutants' libraries go: ``<cache>/mutants``."""
    return native_build.cache_dir() / "mutants"


def build_mutants(names: Sequence[str], jobs: int = 2) -> dict[str, Path]:
    """Build the named mutants (see the module docstring); return each one's library
    directory.

    Raises:
        RuntimeError: a replacement does not match exactly once, or the build failed.
    """
    source = native_build.source_dir()
    out: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="ggml-mutants-") as tmp:
        tree = Path(tmp) / "llama.cpp"

        def bulky(directory: str, names: list[str]) -> set[str]:  # not needed to build ggml
            return set(names) & {"models", "docs", "media"} if Path(directory) == source else set()

        shutil.copytree(source, tree, ignore=bulky)
        ops = tree / OPS
        pristine = ops.read_text()
        for name in names:
            mutant = BY_NAME[name]
            count = pristine.count(mutant.old)
            if count != 1:
                raise RuntimeError(f"{name}: {mutant.old!r} occurs {count} times in {OPS}")
            ops.write_text(pristine.replace(mutant.old, mutant.new))
            started = time.monotonic()
            libraries = native_build.cmake_build(
                tree, Path(tmp) / "build", jobs=jobs,
                targets=("ggml-base", "ggml-cpu"), log=lambda s: print(s, file=sys.stderr))
            dest = mutants_dir() / name
            if dest.exists():
                shutil.rmtree(dest)
            native_build.install(libraries, dest, {
                "mutant": name, "what": mutant.what, "sdist_version": native_build.SDIST_VERSION,
                "seconds": round(time.monotonic() - started, 1)})
            # the registry library is not rebuilt: the targets load base and cpu only
            (dest / "libggml.so").unlink(missing_ok=True)
            out[name] = dest
            print(f"{name}: built in {time.monotonic() - started:.0f} s -> {dest}",
                  file=sys.stderr)
        ops.write_text(pristine)
    return out


def run_kit(library: Path, profile: str, report: Path) -> tuple[int, list[str]]:
    """``hc-conformance run llama_cpp:deepseek-v4 --profile PROFILE`` with ``$HC_GGML_LIB =
    library``; return its exit status and the ids of the failed properties."""
    root = Path(__file__).resolve().parents[1]  # this checkout's kit, not an installed one
    path = os.pathsep.join(p for p in (str(root / "src"), str(root),
                                       os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, native_build.LIB_ENV: str(library), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "llama_cpp:deepseek-v4",
         "--profile", profile, "--json", str(report)], env=env, capture_output=True,
        text=True, check=False)
    if not report.is_file():
        raise RuntimeError(f"no report; the run said:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    results = json.loads(report.read_text())["results"]
    return done.returncode, [r["id"] for r in results if r["status"] == "failed"]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); 0 when every mutant's run fails by a
    named property, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tools.ggml_mutants")
    parser.add_argument("--only", nargs="*", choices=list(BY_NAME), default=list(BY_NAME))
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args(argv)
    built = build_mutants(args.only, args.jobs)
    if args.build_only:
        for name, path in built.items():
            print(f"{name}\t{path}")
        return 0
    killed = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in built.items():
            status, failed = run_kit(path, args.profile, Path(tmp) / f"{name}.json")
            caught = status == 1 and bool(failed)
            killed &= caught
            print(f"{name} ({BY_NAME[name].what}): exit {status}, "
                  f"{'failed: ' + ', '.join(failed) if failed else 'NOT caught'}")
    return 0 if killed else 1


if __name__ == "__main__":
    raise SystemExit(main())
