"""Verified agreement: ggml's fused DeepSeek-V4 hyper-connection step (llama.cpp 0c1e5709,
vendored by llama-cpp-python 0.3.36, CPU backend) is the published step to float32 precision,
and it is bitwise the same at 1, 2 and 4 threads.

The step is composed as src/models/deepseek4.cpp composes it (``build_hc_pre``,
``build_hc_post``): ``mixes = mul_mat(hc_fn, rms_norm(vec X))``; ``pre = σ(mixes[:4]·s0 +
b[:4]) + eps``; ``post = 2σ(mixes[4:8]·s1 + b[4:8])``; ``comb = ggml_dsv4_hc_comb``;
``x_in = ggml_dsv4_hc_pre(X, pre)``; ``X' = ggml_dsv4_hc_post(F(x_in), X, post, comb)``, with
F = tanh(x W). The float64 NumPy oracle below is written from DeepSeek-V4's published
formulas (softmax of the comb logits over the destination, + eps, a normalisation over the
source, then 19 (destination, source) rounds, every denominator + eps). This script does not
use the kit. Run (a few seconds):

    HC_GGML_LIB=<ggml build dir> python docs/findings/repro/llama_cpp_step.py
"""

import ctypes
import glob
import os
import sys

import numpy as np

EPS, ITERS, N, D, TOKENS = 1e-6, 20, 4, 64, 16
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
        ("ggml_view_1d", P, [P, P, I64, SZ]), ("ggml_view_2d", P, [P, P, I64, I64, SZ, SZ]),
        ("ggml_reshape_2d", P, [P, P, I64, I64]), ("ggml_rms_norm", P, [P, P, F]),
        ("ggml_mul_mat", P, [P, P, P]), ("ggml_mul", P, [P, P, P]), ("ggml_add", P, [P, P, P]),
        ("ggml_sigmoid", P, [P, P]), ("ggml_scale", P, [P, P, F]),
        ("ggml_scale_bias", P, [P, P, F, F]),
        ("ggml_dsv4_hc_comb", P, [P, P, P, P, F, ctypes.c_int32]),
        ("ggml_dsv4_hc_pre", P, [P, P, P]), ("ggml_dsv4_hc_post", P, [P, P, P, P, P]),
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
    """Build a graph with ``outputs_of(ctx, tensors)``, compute it on ``threads`` threads."""
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
    buf = base.ggml_backend_alloc_ctx_tensors(ctx, backend)
    for t, a in zip(tensors, inputs, strict=True):
        base.ggml_backend_tensor_set(t, a.ctypes.data, 0, a.nbytes)
    assert base.ggml_backend_graph_compute(backend, graph) == 0
    results = []
    for t, shape in outs:
        out = np.empty(shape, np.float32)
        base.ggml_backend_tensor_get(t, out.ctypes.data, 0, out.nbytes)
        results.append(out)
    base.ggml_backend_buffer_free(buf)
    base.ggml_backend_free(backend)
    base.ggml_free(ctx)
    return results


def step(threads, x, fn, scale, bias, w):
    def read(ctx, t):
        tx, tfn, ts, tb = t
        row = (2 + N) * N * 4
        mixes = base.ggml_mul_mat(ctx, tfn, base.ggml_rms_norm(
            ctx, base.ggml_reshape_2d(ctx, tx, N * D, TOKENS), EPS))

        def affine(i0, group):
            v = base.ggml_view_2d(ctx, mixes, N, TOKENS, row, i0 * 4)
            v = base.ggml_mul(ctx, v, base.ggml_view_1d(ctx, ts, 1, group * 4))
            return base.ggml_sigmoid(ctx, base.ggml_add(ctx, v, base.ggml_view_1d(
                ctx, tb, N, i0 * 4)))
        pre = base.ggml_scale_bias(ctx, affine(0, 0), 1.0, EPS)
        post = base.ggml_scale(ctx, affine(N, 1), 2.0)
        comb = base.ggml_dsv4_hc_comb(ctx, mixes, ts, tb, EPS, ITERS)
        return [(base.ggml_dsv4_hc_pre(ctx, tx, pre), (TOKENS, D)), (post, (TOKENS, N)),
                (comb, (TOKENS, N, N))]
    x_in, post, comb = compute(threads, read, [x, fn, scale, bias])
    z = np.tanh(x_in.astype(np.float64) @ w).astype(np.float32)

    def write(ctx, t):
        tz, tx, tp, tc = t
        return [(base.ggml_dsv4_hc_post(ctx, tz, tx, tp, tc), (TOKENS, N, D))]
    (out,) = compute(threads, write, [z, x, post, comb])
    return out


def oracle(x, fn, scale, bias, w):
    """DeepSeek-V4's published step in float64 (comb[i, j]: source i, destination j)."""
    x, fn, scale, bias = (a.astype(np.float64) for a in (x, fn, scale, bias))
    flat = x.reshape(TOKENS, N * D)
    mixes = flat / np.sqrt((flat ** 2).mean(-1, keepdims=True) + EPS) @ fn.T
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    pre = sig(mixes[:, :N] * scale[0] + bias[:N]) + EPS
    post = 2 * sig(mixes[:, N:2 * N] * scale[1] + bias[N:2 * N])
    logits = (mixes[:, 2 * N:] * scale[2] + bias[2 * N:]).reshape(TOKENS, N, N)
    comb = np.exp(logits - logits.max(-1, keepdims=True))
    comb = comb / comb.sum(-1, keepdims=True) + EPS
    comb = comb / (comb.sum(-2, keepdims=True) + EPS)
    for _ in range(ITERS - 1):
        comb = comb / (comb.sum(-1, keepdims=True) + EPS)
        comb = comb / (comb.sum(-2, keepdims=True) + EPS)
    x_in = np.einsum("ti,tid->td", pre, x)
    z = np.tanh(x_in @ w)
    return post[:, :, None] * z[:, None, :] + np.einsum("tij,tid->tjd", comb, x)


rng = np.random.default_rng(0)
x = rng.standard_normal((TOKENS, N, D)).astype(np.float32)
fn = (rng.standard_normal(((2 + N) * N, N * D)) * 0.3).astype(np.float32)
scale = np.array([0.8, 1.1, 1.7], np.float32)
bias = (rng.standard_normal((2 + N) * N) * 0.5).astype(np.float32)
w = rng.standard_normal((D, D)) / np.sqrt(D)
want = oracle(x, fn, scale, bias, w)
outs = {k: step(k, x, fn, scale, bias, w) for k in (1, 2, 4)}
err = np.abs(outs[1] - want).max() / np.abs(want).max()
print(f"max |ggml - float64 published| / max |X'| = {err:.2e} "
      f"(float32 eps {np.finfo(np.float32).eps:.2e})")
for k in (2, 4):
    print(f"{k} threads bitwise equal to 1 thread: {np.array_equal(outs[k], outs[1])}")
