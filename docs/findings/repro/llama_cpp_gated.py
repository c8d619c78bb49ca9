"""Verified agreement: ggml's Qwen4-exp hyper-connection (llama.cpp 0c1e5709, vendored by
llama-cpp-python 0.3.36, CPU backend) is the published Qwen4-exp step to float32 precision at
n = 2, 3, 4, 5 and 8 streams: neither ``ggml_dsv4_hc_pre_gated`` nor ``ggml_dsv4_hc_post`` with
a NULL ``comb`` asserts a stream count (unlike ``ggml_dsv4_hc_comb``), and the result is
bitwise the same at 1, 2 and 4 threads.

The step is composed as src/models/qwen4exp.cpp composes it for a layer (``build_hc_mix`` and
``build_hc_combine`` with the fused ops): ``xn = rms_norm(X per stream) * gamma`` (the GGUF's
gamma is ``1 + w``: the converter adds 1 to every ``norm.weight``), ``gate = up ·
silu(down · vec(xn) / n)``, ``x_in = ggml_dsv4_hc_pre_gated(xn, gate, 1/n)``, ``post =
2 σ(inject · vec(xn) / n)``, ``X' = ggml_dsv4_hc_post(F(x_in), X, post, NULL)``, with
F = tanh(x W). The float64 NumPy oracle below is written from the published step
(transformers' Qwen4ExpTextGatedResidual): ``N_s = (1 + w_s) X_s / rms(X_s)``, ``G = σ(U
silu(D vec(N) / n))``, ``x_in = mean_s G_s N_s``, ``h_post = 2σ(W vec(N) / n)``, ``X' = X +
h_post F(x_in)``. This script does not use the kit. Run (a few seconds):

    HC_GGML_LIB=<ggml build dir> python docs/findings/repro/llama_cpp_gated.py
"""

import ctypes
import glob
import os
import sys

import numpy as np

EPS, D, R, TOKENS = 1e-6, 32, 4, 8
P, F32 = ctypes.c_void_p, 0


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


base = ctypes.CDLL(os.path.join(lib_dir(), "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
cpu = ctypes.CDLL(os.path.join(lib_dir(), "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
I64, F, SZ = ctypes.c_int64, ctypes.c_float, ctypes.c_size_t
for name, res, args in [
        ("ggml_init", P, [InitParams]), ("ggml_new_tensor_1d", P, [P, ctypes.c_int, I64]),
        ("ggml_new_tensor_2d", P, [P, ctypes.c_int, I64, I64]),
        ("ggml_new_tensor_3d", P, [P, ctypes.c_int, I64, I64, I64]),
        ("ggml_reshape_2d", P, [P, P, I64, I64]), ("ggml_reshape_3d", P, [P, P, I64, I64, I64]),
        ("ggml_rms_norm", P, [P, P, F]), ("ggml_mul_mat", P, [P, P, P]),
        ("ggml_mul", P, [P, P, P]), ("ggml_sigmoid", P, [P, P]), ("ggml_silu", P, [P, P]),
        ("ggml_scale", P, [P, P, F]), ("ggml_dsv4_hc_pre_gated", P, [P, P, P, F]),
        ("ggml_dsv4_hc_post", P, [P, P, P, P, P]),
        ("ggml_new_graph", P, [P]), ("ggml_build_forward_expand", None, [P, P]),
        ("ggml_backend_alloc_ctx_tensors", P, [P, P]),
        ("ggml_backend_tensor_set", None, [P, P, SZ, SZ]),
        ("ggml_backend_tensor_get", None, [P, P, SZ, SZ]),
        ("ggml_backend_graph_compute", ctypes.c_int, [P, P]), ("ggml_free", None, [P]),
        ("ggml_backend_free", None, [P]), ("ggml_backend_buffer_free", None, [P])]:
    getattr(base, name).restype, getattr(base, name).argtypes = res, args
cpu.ggml_backend_cpu_init.restype = P
cpu.ggml_backend_cpu_set_n_threads.argtypes = [P, ctypes.c_int]


def compute(threads, outputs_of, inputs):
    """Build a graph with ``outputs_of(ctx, tensors)``, compute it on ``threads`` threads and
    return the outputs (``(tensor, numpy shape)`` each) as float32 arrays."""
    ctx = base.ggml_init(InitParams(1 << 22, None, True))
    tensors = []
    for a in inputs:
        ne = list(reversed(a.shape))
        tensors.append(getattr(base, f"ggml_new_tensor_{len(ne)}d")(ctx, F32, *ne))
    outs = outputs_of(ctx, tensors)
    graph = base.ggml_new_graph(ctx)
    for t, _ in outs:
        base.ggml_build_forward_expand(graph, t)
    backend = cpu.ggml_backend_cpu_init()
    cpu.ggml_backend_cpu_set_n_threads(backend, threads)
    buffer = base.ggml_backend_alloc_ctx_tensors(ctx, backend)
    for t, a in zip(tensors, inputs, strict=True):
        a = np.ascontiguousarray(a, dtype=np.float32)
        base.ggml_backend_tensor_set(t, a.ctypes.data, 0, a.nbytes)
    assert base.ggml_backend_graph_compute(backend, graph) == 0
    results = []
    for t, shape in outs:
        out = np.empty(shape, dtype=np.float32)
        base.ggml_backend_tensor_get(t, out.ctypes.data, 0, out.nbytes)
        results.append(out)
    base.ggml_backend_buffer_free(buffer)
    base.ggml_backend_free(backend)
    base.ggml_free(ctx)
    return results


def ggml_step(x, w, down, up, inject, branch_w, threads):
    """The ggml step: the read in one graph, the branch in NumPy, the write in another."""
    tokens, n, d = x.shape
    gamma = (1.0 + w).reshape(n, d)

    def read(ctx, t):
        tx, tg, td, tu, ti = t
        xn = base.ggml_mul(ctx, base.ggml_rms_norm(ctx, tx, EPS), tg)
        xn = base.ggml_reshape_2d(ctx, xn, n * d, tokens)
        lo = base.ggml_silu(ctx, base.ggml_scale(ctx, base.ggml_mul_mat(ctx, td, xn), 1.0 / n))
        gate = base.ggml_mul_mat(ctx, tu, lo)
        mixed = base.ggml_dsv4_hc_pre_gated(ctx, base.ggml_reshape_3d(ctx, xn, d, n, tokens),
                                            base.ggml_reshape_3d(ctx, gate, d, n, tokens),
                                            1.0 / n)
        post = base.ggml_scale(ctx, base.ggml_sigmoid(
            ctx, base.ggml_scale(ctx, base.ggml_mul_mat(ctx, ti, xn), 1.0 / n)), 2.0)
        return [(mixed, (tokens, d)), (post, (tokens, n))]

    x_in, post = compute(threads, read, [x, gamma, down, up, inject])
    z = np.tanh(x_in.astype(np.float64) @ branch_w).astype(np.float32)

    def write(ctx, t):
        tz, tx, tp = t
        return [(base.ggml_dsv4_hc_post(ctx, tz, tx, tp, None), (tokens, n, d))]

    (out,) = compute(threads, write, [z, x, post])
    return out


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def published_step(x, w, down, up, inject, branch_w):
    """The published Qwen4-exp step in float64."""
    x, w, down, up, inject = (a.astype(np.float64) for a in (x, w, down, up, inject))
    tokens, n, d = x.shape
    normed = x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * (1.0 + w).reshape(n, d)
    flat = normed.reshape(tokens, n * d)
    lo = flat @ down.T / n
    gate = sigmoid((lo * sigmoid(lo)) @ up.T).reshape(tokens, n, d)
    x_in = (gate * normed).mean(1)
    h_post = 2.0 * sigmoid(flat @ inject.T / n)
    return x + h_post[:, :, None] * np.tanh(x_in @ branch_w)[:, None, :]


def main():
    rng = np.random.default_rng(0)
    branch_w = rng.standard_normal((D, D)) / np.sqrt(D)
    for n in (2, 3, 4, 5, 8):
        x = rng.standard_normal((TOKENS, n, D)).astype(np.float32)
        w = (rng.standard_normal(n * D) * 0.1).astype(np.float32)
        down = (rng.standard_normal((R, n * D)) * 0.2).astype(np.float32)
        up = (rng.standard_normal((n * D, R)) * 0.2).astype(np.float32)
        inject = (rng.standard_normal((n, n * D)) * 0.2).astype(np.float32)
        outs = [ggml_step(x, w, down, up, inject, branch_w, t) for t in (1, 2, 4)]
        want = published_step(x, w, down, up, inject, branch_w)
        err = np.abs(outs[0] - want).max() / np.abs(want).max()
        same = all(np.array_equal(outs[0], o) for o in outs[1:])
        print(f"n = {n}: max |ggml - float64 published| / max |X'| = {err:.2e}; "
              f"2 and 4 threads bitwise equal to 1: {same}")
    print(f"float32 eps {np.finfo(np.float32).eps:.2e}")


if __name__ == "__main__":
    main()
