"""Find or build llama.cpp's ggml (the CPU backend) for the ``llama_cpp:*`` targets.

The one command::

    python -m hcspec.conformance.native.build            # CPU backend (cmake, a C/C++ compiler)
    python -m hcspec.conformance.native.build --cuda     # also the CUDA backend (needs nvcc)

downloads the llama-cpp-python :data:`SDIST_VERSION` source distribution from the package index
(``pip download --no-deps --no-binary :all:``), checks its sha256 against :data:`SDIST_SHA256`,
unpacks the llama.cpp it vendors (``vendor/llama.cpp``, commit 0c1e5709) and builds the CMake
target ``ggml`` with ``-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON`` and every ``LLAMA_BUILD_*``
option off, into a cache directory keyed by the sdist's hash (:func:`cache_dir`:
``$XDG_CACHE_HOME/hcspec/ggml/<hash>``, else ``~/.cache/hcspec/ggml/<hash>``). A second run finds
the build and does nothing. Nothing of llama.cpp is copied into this repository.

``$HC_GGML_LIB`` names an existing build instead: a directory holding ``libggml-base`` and
``libggml-cpu`` (and ``libggml``, the backend registry, when present). ``$HC_GGML_SDIST`` names
an already downloaded sdist (its hash is still checked).

Needs (Debian/Ubuntu packages): ``cmake`` (≥ 3.14), ``g++`` (or ``build-essential``); the CUDA
build also ``nvcc`` (the CUDA toolkit). No torch, no NumPy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

SDIST_VERSION: Final = "0.3.36"
"""The llama-cpp-python release whose vendored llama.cpp the targets were written against."""

SDIST_SHA256: Final = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
"""sha256 of ``llama_cpp_python-0.3.36.tar.gz`` as the package index serves it."""

LIB_ENV: Final = "HC_GGML_LIB"
"""Environment variable naming a directory with an existing ggml build's shared libraries."""

SDIST_ENV: Final = "HC_GGML_SDIST"
"""Environment variable naming an already downloaded sdist (its hash is checked)."""

BUILD_COMMAND: Final = "python -m hcspec.conformance.native.build"
"""The one command that builds the library (documented in docs/conformance.md)."""

REQUIRED: Final[tuple[str, ...]] = ("ggml-base", "ggml-cpu")
"""The libraries a ggml directory must hold (``lib<name>.so``, ``.dylib`` or ``.dll``)."""

OPTIONAL: Final[tuple[str, ...]] = ("ggml",)
"""Loaded when present: the backend registry (backend selection, CUDA)."""

VENDORED: Final = "vendor/llama.cpp"
"""Where the sdist keeps llama.cpp."""

CMAKE_OPTIONS: Final[tuple[str, ...]] = (
    "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_CURL=OFF",
)
"""The CMake options of every build (CPU backend only unless ``-DGGML_CUDA=ON`` is added)."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hcspec/ggml``, else ``~/.cache/hcspec/ggml`` (not created)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hcspec" / "ggml"


def cache_dir() -> Path:
    """The build directory keyed by the sdist's hash (first 16 hex digits)."""
    return cache_root() / SDIST_SHA256[:16]


def library_file(directory: Path, name: str) -> Path | None:
    """``lib<name>.so`` (or ``.dylib``, ``<name>.dll``) in ``directory``, or None."""
    for candidate in (f"lib{name}.so", f"lib{name}.dylib", f"{name}.dll"):
        path = directory / candidate
        if path.exists():
            return path
    return None


def missing_libraries(directory: Path) -> list[str]:
    """The names of :data:`REQUIRED` that ``directory`` lacks."""
    return [name for name in REQUIRED if library_file(directory, name) is None]


def lib_dir(variant: str = "cpu") -> Path:
    """The cache's library directory of a build ``variant`` (``"cpu"`` or ``"cuda"``)."""
    return cache_dir() / f"lib-{variant}"


def find_library(variant: str = "cpu") -> Path:
    """The directory of the ggml libraries the targets load: ``$HC_GGML_LIB`` when set, else
    the cache's build of ``variant``.

    Raises:
        ImportError: ``$HC_GGML_LIB`` names a directory without the libraries, or (unset) no
            build is cached; the message gives the command that builds one.
    """
    named = os.environ.get(LIB_ENV)
    if named:
        directory = Path(named)
        missing = missing_libraries(directory)
        if missing:
            raise ImportError(f"${LIB_ENV}={named}: no {', '.join('lib' + m for m in missing)} "
                              "there (give a directory of a ggml shared build)")
        return directory
    directory = lib_dir(variant)
    if missing_libraries(directory):
        flag = " --cuda" if variant == "cuda" else ""
        raise ImportError(f"ggml is not built here: run `{BUILD_COMMAND}{flag}` (about 2 min of "
                          f"CPU; cmake and g++), or set ${LIB_ENV} to a ggml build")
    return directory


def unavailable() -> str | None:
    """Why no ggml library can be found (:func:`find_library`'s message, which names the
    build command), or None: the ``available`` check of the ``llama_cpp:*`` targets."""
    try:
        find_library()
    except ImportError as exc:
        return str(exc)
    return None


def describe() -> str:
    """One sentence naming the library directory the targets load (for the target list)."""
    directory = find_library()
    info = directory / "BUILD_INFO.json"
    origin = f"${LIB_ENV}" if os.environ.get(LIB_ENV) else "the cache"
    if info.is_file():
        data = json.loads(info.read_text())
        return (f"ggml from llama-cpp-python {data.get('sdist_version')} at {directory} "
                f"(from {origin}; built with {data.get('backends')})")
    return f"ggml at {directory} (from {origin})"


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path``, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_sdist(into: Path, log: Callable[[str], None] = print) -> Path:
    """The verified sdist in ``into`` (from ``$HC_GGML_SDIST``, a previous download, or
    ``pip download``).

    Raises:
        RuntimeError: pip failed, or the file's sha256 is not :data:`SDIST_SHA256`.
    """
    into.mkdir(parents=True, exist_ok=True)
    target = into / f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
    given = os.environ.get(SDIST_ENV)
    if given:
        shutil.copyfile(given, target)
    if not target.is_file():
        log(f"downloading llama-cpp-python=={SDIST_VERSION} (sdist) with pip")
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 f"llama-cpp-python=={SDIST_VERSION}", "-d", tmp],
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"pip download failed:\n{done.stderr[-2000:]}")
            shutil.move(str(Path(tmp) / target.name), target)
    actual = sha256_of(target)
    if actual != SDIST_SHA256:
        target.unlink()
        raise RuntimeError(f"{target.name}: sha256 {actual}, expected {SDIST_SHA256}")
    return target


def unpack(sdist: Path, into: Path) -> Path:
    """Unpack the vendored llama.cpp of ``sdist`` under ``into``; return its root."""
    prefix = f"llama_cpp_python-{SDIST_VERSION}/{VENDORED}/"
    root = into / "llama.cpp"
    if (root / "CMakeLists.txt").is_file():
        return root
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        for member in members:
            member.name = member.name[len(prefix):]
        archive.extractall(root, members=[m for m in members if m.name],
                           filter="data")
    return root


def source_dir() -> Path:
    """The unpacked llama.cpp of the cached build (fetched and unpacked when absent).

    Raises:
        RuntimeError: as :func:`fetch_sdist`.
    """
    return unpack(fetch_sdist(cache_dir()), cache_dir())


def cmake_build(source: Path, build: Path, *, cuda: bool = False, jobs: int = 2,
                targets: Sequence[str] = ("ggml",),
                log: Callable[[str], None] = print) -> Path:
    """Configure and build ``targets`` of the llama.cpp tree ``source`` in ``build``; return
    the directory of the shared libraries (``build/bin``).

    Raises:
        RuntimeError: cmake is missing, or configuring or building failed (its output's
            tail in the message).
    """
    if shutil.which("cmake") is None:
        raise RuntimeError("cmake is not on PATH (apt-get install cmake g++)")
    options = [*CMAKE_OPTIONS, f"-DGGML_CUDA={'ON' if cuda else 'OFF'}"]
    if cuda:  # only this machine's GPU: a build for every architecture takes far longer
        options.append("-DCMAKE_CUDA_ARCHITECTURES="
                       + os.environ.get("HC_GGML_CUDA_ARCHITECTURES", "native"))
    steps = (["cmake", "-S", str(source), "-B", str(build), *options],
             ["cmake", "--build", str(build), "--target", *targets, "-j", str(jobs)])
    for step in steps:
        log("$ " + " ".join(step))
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            raise RuntimeError(f"{step[0]} {step[1]} failed:\n{output}")
    return build / "bin"


def install(libraries: Path, dest: Path, info: dict[str, object]) -> Path:
    """Copy the ggml shared libraries of ``libraries`` (symbolic links resolved) into
    ``dest`` with ``BUILD_INFO.json``; return ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in (*REQUIRED, *OPTIONAL, "ggml-cuda"):
        found = library_file(libraries, name)
        if found is not None:
            shutil.copyfile(found.resolve(), dest / found.name)
    (dest / "BUILD_INFO.json").write_text(json.dumps(info, indent=2) + "\n")
    return dest


def build(*, cuda: bool = False, jobs: int = 2, force: bool = False,
          log: Callable[[str], None] = print) -> Path:
    """Build ggml into the cache (:func:`lib_dir`) unless already there; return the library
    directory.

    Raises:
        RuntimeError: as :func:`fetch_sdist` and :func:`cmake_build`.
    """
    variant = "cuda" if cuda else "cpu"
    dest = lib_dir(variant)
    if not force and not missing_libraries(dest):
        log(f"ggml already built: {dest}")
        return dest
    started = time.monotonic()
    source = source_dir()
    built = cmake_build(source, cache_dir() / f"build-{variant}", cuda=cuda, jobs=jobs, log=log)
    info: dict[str, object] = {"sdist_version": SDIST_VERSION, "sdist_sha256": SDIST_SHA256,
            "backends": "CPU+CUDA" if cuda else "CPU", "cmake_options": list(CMAKE_OPTIONS),
            "seconds": round(time.monotonic() - started, 1)}
    install(built, dest, info)
    log(f"built ggml ({info['backends']}) in {info['seconds']} s: {dest}")
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=BUILD_COMMAND, description="Build llama.cpp's ggml (CPU backend) from the "
        f"llama-cpp-python {SDIST_VERSION} sdist into {cache_root()}/<hash>.")
    parser.add_argument("--cuda", action="store_true", help="also build the CUDA backend")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    parser.add_argument("--print-dir", action="store_true",
                        help="print the library directory the targets load and exit")
    args = parser.parse_args(argv)
    if args.print_dir:
        try:
            print(find_library("cuda" if args.cuda else "cpu"))
        except ImportError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    try:
        build(cuda=args.cuda, jobs=args.jobs, force=args.force)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
