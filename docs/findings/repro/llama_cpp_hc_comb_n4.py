"""Declared limit, verified: ggml's ``ggml_dsv4_hc_comb`` (llama.cpp 0c1e5709, vendored by
llama-cpp-python 0.3.36) aborts the process for any expansion rate other than 4.

``ggml_dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter)`` infers ``hc`` from
``mixes->ne[0] = (2 + hc)·hc`` and then asserts ``hc == 4`` (ggml/src/ggml.c, in the op's
constructor): the ``GGML_ASSERT`` prints its line on stderr and calls ``abort()``, at graph
construction, before any computation. ggml.h's comment on the op describes a general ``hc``.
Each rate runs in a child process here (the abort would end this one). This script does not
use the kit; it needs only the ggml shared libraries. Run (a few seconds):

    HC_GGML_LIB=<ggml build dir> python docs/findings/repro/llama_cpp_hc_comb_n4.py

Without ``HC_GGML_LIB`` it looks in ~/.cache/hcspec/ggml/*/lib-cpu (where
``python -m hcspec.conformance.native.build`` puts the build).
"""

import ctypes
import glob
import os
import subprocess
import sys

import numpy as np


def lib_dir() -> str:
    given = os.environ.get("HC_GGML_LIB")
    if given:
        return given
    found = sorted(glob.glob(os.path.expanduser("~/.cache/hcspec/ggml/*/lib-cpu")))
    if not found:
        sys.exit("set HC_GGML_LIB to a ggml build")
    return found[-1]


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


def run(hc: int) -> None:
    """In a child: comb of random mixes for ``hc`` streams, 3 tokens, on the CPU backend."""
    P = ctypes.c_void_p
    base = ctypes.CDLL(os.path.join(lib_dir(), "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(lib_dir(), "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    base.ggml_init.restype, base.ggml_init.argtypes = P, [InitParams]
    base.ggml_new_tensor_1d.restype = P
    base.ggml_new_tensor_1d.argtypes = [P, ctypes.c_int, ctypes.c_int64]
    base.ggml_new_tensor_2d.restype = P
    base.ggml_new_tensor_2d.argtypes = [P, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    base.ggml_dsv4_hc_comb.restype = P
    base.ggml_dsv4_hc_comb.argtypes = [P, P, P, P, ctypes.c_float, ctypes.c_int32]
    base.ggml_new_graph.restype, base.ggml_new_graph.argtypes = P, [P]
    base.ggml_build_forward_expand.argtypes = [P, P]
    base.ggml_backend_alloc_ctx_tensors.restype = P
    base.ggml_backend_alloc_ctx_tensors.argtypes = [P, P]
    base.ggml_backend_tensor_set.argtypes = [P, P, ctypes.c_size_t, ctypes.c_size_t]
    base.ggml_backend_tensor_get.argtypes = [P, P, ctypes.c_size_t, ctypes.c_size_t]
    base.ggml_backend_graph_compute.argtypes = [P, P]
    cpu.ggml_backend_cpu_init.restype = P
    ctx = base.ggml_init(InitParams(1 << 20, None, True))
    mix_dim, tokens = (2 + hc) * hc, 3
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((tokens, mix_dim)).astype(np.float32),
              np.ones(3, np.float32), np.zeros(mix_dim, np.float32)]
    mixes = base.ggml_new_tensor_2d(ctx, 0, mix_dim, tokens)
    scale = base.ggml_new_tensor_1d(ctx, 0, 3)
    bias = base.ggml_new_tensor_1d(ctx, 0, mix_dim)
    comb = base.ggml_dsv4_hc_comb(ctx, mixes, scale, bias, 1e-6, 20)  # aborts for hc != 4
    graph = base.ggml_new_graph(ctx)
    base.ggml_build_forward_expand(graph, comb)
    backend = cpu.ggml_backend_cpu_init()
    base.ggml_backend_alloc_ctx_tensors(ctx, backend)
    for t, a in zip((mixes, scale, bias), arrays, strict=True):
        base.ggml_backend_tensor_set(t, a.ctypes.data, 0, a.nbytes)
    base.ggml_backend_graph_compute(backend, graph)
    out = np.empty((tokens, hc, hc), np.float32)
    base.ggml_backend_tensor_get(comb, out.ctypes.data, 0, out.nbytes)
    sums = out[0].sum(axis=0).round(6)
    print(f"hc={hc}: comb computed, sums over src (normalised last) of token 0 {sums}")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        run(int(sys.argv[1]))
        sys.exit(0)
    for hc in (2, 3, 4, 5, 8):
        child = subprocess.run([sys.executable, __file__, str(hc)], capture_output=True,
                               text=True, env={**os.environ, "GGML_NO_BACKTRACE": "1"})
        if child.returncode == 0:
            print(child.stdout.strip())
        else:
            line = [s for s in child.stderr.splitlines() if "GGML_ASSERT" in s]
            print(f"hc={hc}: child exited {child.returncode} (-6 = SIGABRT): "
                  f"{line[0] if line else child.stderr.strip()[-200:]}")
