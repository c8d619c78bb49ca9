"""A deliberately aborting native stand-in for the kit's native-fault isolation
(:mod:`hcspec.conformance.native`): a static HC sublayer at init (``h_pre = e₀``,
``h_post = 1``, ``H_res = I``, HC arXiv:2409.19606 Eq. 14) whose read first calls a C function
that prints a ``GGML_ASSERT``-style line and calls ``abort()`` for n ≠ 4 (as ggml's
``ggml_dsv4_hc_comb`` does), compiled by :func:`compile_library` with gcc.

TARGETs (the library named by ``$HC_STANDIN_LIB``):
``tests.conformance.native_standin:make_aborting`` (declares nothing: an n ≠ 4 case kills the
worker, the property fails with SIGABRT and the assert line) and
``tests.conformance.native_standin:make_declared`` (declares ``supported_expansion_rates =
(4,)``: those cases are skipped, nothing aborts). The worker-side functions import no torch.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
int standin_check(int n) {
    if (n != 4) {
        fprintf(stderr, "standin.c:6: GGML_ASSERT(hc == 4) failed\n");
        fflush(stderr);
        abort();
    }
    return n;
}
void standin_segfault(void) {
    volatile int *nowhere = 0;
    *nowhere = 1;
}
void standin_spin(void) {
    volatile unsigned long turns = 0;
    for (;;) { turns++; }
}
"""
LIB_ENV = "HC_STANDIN_LIB"


def compile_library(directory: Path) -> Path:
    """Compile :data:`SOURCE` with gcc into ``directory/libstandin.so``; return its path."""
    source = directory / "standin.c"
    source.write_text(SOURCE)
    lib = directory / "libstandin.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    return lib


def read(lib: str, params: dict[str, Any], x: np.ndarray) -> list[np.ndarray]:
    """Worker side: the C check on n, then ``x_in = X_0`` (``h_pre = e₀``)."""
    del params
    ctypes.CDLL(lib).standin_check(int(x.shape[-2]))
    return [np.ascontiguousarray(x[..., 0, :])]


def write(params: dict[str, Any], x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Worker side: ``X' = X + 1 zᵀ``."""
    del params
    return np.asarray(x + z[..., None, :])


def crash(kind: str) -> None:
    """Worker side: die by ``kind`` (``"segfault"``), or hang (``"hang"``)."""
    if kind == "segfault":
        ctypes.string_at(0)
    time.sleep(3600)


def native_crash(lib: str, kind: str) -> None:
    """Worker side: die in C (``"segfault"``: ``standin_segfault``, ``"abort"``:
    ``standin_check(3)``) or hang in C (``"hang"``: ``standin_spin``)."""
    native = ctypes.CDLL(lib)
    if kind == "segfault":
        native.standin_segfault()
    elif kind == "abort":
        native.standin_check(3)
    else:
        native.standin_spin()


def _factory(declared: bool) -> Any:
    from hcspec.conformance.bridge import Built, Sublayer
    from hcspec.conformance.native.framework import native_target
    from hcspec.conformance.protocol import Conventions

    def build(n: int, d: int, layer_index: int, seed: int, threads: int) -> Built:
        lib = os.environ[LIB_ENV]
        return Built({}, Sublayer(read=functools.partial(read, lib), write=write))

    conventions = Conventions(supported_expansion_rates=(4,) if declared else None)
    return native_target("standin", build, conventions=conventions,
                         no_backward="the stand-in has no backward", kind="hc-static")


def make_aborting(n: int, d: int, **options: Any) -> Any:
    """The stand-in declaring no size limit (the kit's factory signature); built lazily so
    that the worker, importing this module for :func:`read`, imports no torch."""
    return _factory(False)(n, d, **options)


def make_declared(n: int, d: int, **options: Any) -> Any:
    """The stand-in declaring ``supported_expansion_rates = (4,)``."""
    return _factory(True)(n, d, **options)
