"""The HC steps as llama.cpp composes them, run on the ggml binding
(:mod:`hcspec.conformance.native.ggml`): DeepSeek-V4's step (``src/models/deepseek4.cpp``:
:func:`read`, :func:`write`, :func:`step_graph`), the sublayer functions of the
``llama_cpp:deepseek-v4`` target, and Qwen4-exp's gated step (``src/models/qwen4exp.cpp``).
NumPy float32 in and out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from hcspec.conformance.native.ggml import (
    Backend,
    FloatArray,
    Graph,
    load,
)

# --- DeepSeek-V4's step, as src/models/deepseek4.cpp composes it -----------------------------
SOURCE: Final = "src/models/deepseek4.cpp"
"""The file of llama.cpp 0c1e5709 (vendor/llama.cpp of the sdist) the composition follows."""


@dataclass(frozen=True)
class Settings:
    """The DeepSeek-V4 settings of one hyper-connection (hparams of deepseek4.cpp).

    Attributes:
        hc_eps: ``dsv4_hc_eps``. norm_eps: ``norm_rms_eps`` (the RMS norm of the mixes).
        sinkhorn_iters: ``dsv4_hc_sinkhorn_iters``. backend: where to compute.
    """

    hc_eps: float = 1e-6
    norm_eps: float = 1e-6
    sinkhorn_iters: int = 20
    backend: Backend = field(default_factory=Backend)


def _mixes(g: Graph, x: FloatArray, hc_fn: FloatArray, hc_scale: FloatArray,
           hc_base: FloatArray, s: Settings) -> tuple[int, int, int, int, int, int]:
    """The mixes and the ``pre``, ``post`` and ``comb`` of ``build_hc_pre`` (deepseek4.cpp
    lines 353–409): ``x [N, n, d]`` (N tokens) as ggml ``[d, n, N]``; returns the tensors
    ``(x, mixes, pre, post, comb, hc_scale)``."""
    lib = g.lib.base
    tokens, n, d = x.shape
    tx = g.tensor(x)
    fn, scale, base = g.tensor(hc_fn), g.tensor(hc_scale), g.tensor(hc_base)
    ctx = g.ctx
    # line 369: flat = ggml_reshape_2d(x, hc_dim, nt); line 370: flat_norm = ggml_rms_norm
    flat = lib.ggml_reshape_2d(ctx, tx, n * d, tokens)
    flat_norm = lib.ggml_rms_norm(ctx, flat, s.norm_eps)
    # line 371: mixes = ggml_mul_mat(hc_fn, flat_norm) -> [(2 + n) n, nt]
    mixes = lib.ggml_mul_mat(ctx, fn, flat_norm)
    row = (2 + n) * n * 4  # mixes->nb[1]: mixes is contiguous float32

    def view_1d(t: int, ne0: int, i0: int) -> int:  # dsv4_view_1d, lines 196–198
        return int(lib.ggml_view_1d(ctx, t, ne0, i0 * 4))

    def view_2d(t: int, ne0: int, ne1: int, i0: int) -> int:  # dsv4_view_2d, lines 200–207
        return int(lib.ggml_view_2d(ctx, t, ne0, ne1, row, i0 * 4))

    def affine(t: int, sc: int, b: int) -> int:  # dsv4_hc_affine, lines 279–287
        return int(lib.ggml_add(ctx, lib.ggml_mul(ctx, t, sc), b))

    # lines 380–383: pre = sigmoid(mixes[:n]·scale[0] + base[:n]) + eps (ggml_scale_bias)
    pre = affine(view_2d(mixes, n, tokens, 0), view_1d(scale, 1, 0), view_1d(base, n, 0))
    pre = int(lib.ggml_scale_bias(ctx, lib.ggml_sigmoid(ctx, pre), 1.0, s.hc_eps))
    # lines 386–389: post = 2 sigmoid(mixes[n:2n]·scale[1] + base[n:2n]) (ggml_scale)
    post = affine(view_2d(mixes, n, tokens, n), view_1d(scale, 1, 1), view_1d(base, n, n))
    post = int(lib.ggml_scale(ctx, lib.ggml_sigmoid(ctx, post), 2.0))
    # lines 392–395: comb = ggml_dsv4_hc_comb(mixes, hc_scale, hc_base, eps, iters) (fused,
    # the default: cparams.fused_dsv4_hc_comb)
    comb = int(lib.ggml_dsv4_hc_comb(ctx, mixes, scale, base, s.hc_eps, s.sinkhorn_iters))
    return tx, int(mixes), pre, post, comb, scale


def read(x: FloatArray, hc_fn: FloatArray, hc_scale: FloatArray, hc_base: FloatArray,
         s: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The branch input and what ``post`` needs, as ``build_hc_pre`` (deepseek4.cpp lines
    353–409) computes them with the fused ops.

    Shapes: ``x [N, n, d]`` (N = B·T tokens), ``hc_fn [(n+2)n, n·d]``, ``hc_scale [3]``,
    ``hc_base [(n+2)n]`` (the published DeepSeek-V4 tensors, whose ggml shapes are these
    reversed); returns ``x_in [N, d]`` (``ggml_dsv4_hc_pre``, line 300 via line 407),
    ``post [N, n]`` and ``comb [N, n_src, n_dst]`` (ggml's ``[dst, src, N]``), all float32.

    Aborts the process (``GGML_ASSERT``) for ``n != 4`` (``ggml_dsv4_hc_comb``).
    """
    tokens, n, d = x.shape
    with Graph(load(), s.backend) as g:
        tx, _, pre, post, comb, _ = _mixes(g, x, hc_fn, hc_scale, hc_base, s)
        # line 300: ggml_dsv4_hc_pre(x, weights) (fused: cparams.fused_dsv4_hc_pre)
        x_in = int(g.lib.base.ggml_dsv4_hc_pre(g.ctx, tx, pre))
        out = g.compute([(x_in, (tokens, d)), (post, (tokens, n)), (comb, (tokens, n, n))])
    return out[0], out[1], out[2]


def write(x: FloatArray, z: FloatArray, post: FloatArray, comb: FloatArray,
          s: Settings) -> FloatArray:
    """``build_hc_post`` (deepseek4.cpp lines 411–423) with the fused
    ``ggml_dsv4_hc_post(z, residual = x, post, comb)`` (line 421):
    ``X'[t, dst] = z[t]·post[t, dst] + Σ_src x[t, src]·comb[t, src, dst]``.

    Shapes: ``x [N, n, d]``, ``z [N, d]``, ``post [N, n]``, ``comb [N, n_src, n_dst]``;
    returns ``[N, n, d]`` float32.
    """
    tokens, n, d = x.shape
    with Graph(load(), s.backend) as g:
        tz, tx, tp, tc = g.tensor(z), g.tensor(x), g.tensor(post), g.tensor(comb)
        out = int(g.lib.base.ggml_dsv4_hc_post(g.ctx, tz, tx, tp, tc))
        (result,) = g.compute([(out, (tokens, n, d))])
    return result


def weights(x: FloatArray, hc_fn: FloatArray, hc_scale: FloatArray, hc_base: FloatArray,
            s: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The per-token ``(pre [N, n], post [N, n], comb [N, n_src, n_dst])`` the step uses
    (the same graph as :func:`read`, lines 380–395, without the pre op)."""
    tokens, n, _ = x.shape
    with Graph(load(), s.backend) as g:
        _, _, pre, post, comb, _ = _mixes(g, x, hc_fn, hc_scale, hc_base, s)
        out = g.compute([(pre, (tokens, n)), (post, (tokens, n)), (comb, (tokens, n, n))])
    return out[0], out[1], out[2]


def logits(x: FloatArray, hc_fn: FloatArray, hc_scale: FloatArray, hc_base: FloatArray,
           s: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The arguments of σ, 2σ and the comb's softmax: ``mixes · hc_scale[group] + hc_base``
    (lines 369–381 and 386–387; the comb's as the unfused path, lines 397–401, and the
    comb op's header comment describe it), ``(pre [N, n], post [N, n], comb [N, n_src,
    n_dst])``."""
    tokens, n, _ = x.shape
    with Graph(load(), s.backend) as g:
        lib, ctx = g.lib.base, g.ctx
        _, mixes, _, _, _, scale = _mixes(g, x, hc_fn, hc_scale, hc_base, s)
        scales = np.repeat(np.arange(3), [n, n, n * n])  # which hc_scale entry each mix takes
        factor = g.tensor(np.asarray(hc_scale, dtype=np.float32)[scales])
        del scale
        base = g.tensor(hc_base)
        out = int(lib.ggml_add(ctx, lib.ggml_mul(ctx, mixes, factor), base))
        (flat,) = g.compute([(out, (tokens, (2 + n) * n))])
    return flat[:, :n], flat[:, n:2 * n], flat[:, 2 * n:].reshape(tokens, n, n)


def step_graph(x: FloatArray, hc_fn: FloatArray, hc_scale: FloatArray, hc_base: FloatArray,
               w: FloatArray, s: Settings) -> tuple[Graph, int]:
    """One prepared graph of the whole step with the branch ``F(h) = h ⊙ w`` inside it
    (``ggml_mul``), as llama.cpp's layer graph holds its sublayer between ``hc_pre`` and
    ``hc_post`` (deepseek4.cpp lines 1249–1261): returns the :class:`Graph` (call
    :meth:`Graph.run` to compute it again, :meth:`Graph.close` when done) and the output
    tensor ``[N, n, d]``. For benchmarks: the graph is built and its buffers allocated once."""
    g = Graph(load(), s.backend)
    tx, _, pre, post, comb, _ = _mixes(g, x, hc_fn, hc_scale, hc_base, s)
    lib = g.lib.base
    x_in = lib.ggml_dsv4_hc_pre(g.ctx, tx, pre)
    z = lib.ggml_mul(g.ctx, x_in, g.tensor(w))
    out = int(lib.ggml_dsv4_hc_post(g.ctx, z, tx, post, comb))
    g.prepare([out])
    return g, out


def pre_gated(x: FloatArray, gate: FloatArray, scale: float, s: Settings) -> FloatArray:
    """``ggml_dsv4_hc_pre_gated(x, gate, scale)``: ``scale · Σ_h x[t, h]·σ(gate[t, h])``
    element-wise (Qwen4-exp, qwen4exp.cpp line 299). Shapes ``x, gate [N, n, d]`` → ``[N, d]``.
    The step of ``llama_cpp:qwen4-exp`` is :func:`gated_read` and :func:`gated_write`."""
    tokens, _, d = x.shape
    with Graph(load(), s.backend) as g:
        out = int(g.lib.base.ggml_dsv4_hc_pre_gated(g.ctx, g.tensor(x), g.tensor(gate), scale))
        (result,) = g.compute([(out, (tokens, d))])
    return result


# --- the sublayer functions of the llama_cpp:deepseek-v4 target (run in the worker) ----------
Params = dict[str, npt.NDArray[np.generic]]
"""The published DeepSeek-V4 tensors by name: ``hc_fn``, ``hc_scale``, ``hc_base``."""


def _tokens(x: npt.NDArray[np.generic]) -> FloatArray:
    b, t, n, d = x.shape
    return np.ascontiguousarray(x, dtype=np.float32).reshape(b * t, n, d)


def _tensors(params: Params) -> tuple[FloatArray, FloatArray, FloatArray]:
    def f32(key: str) -> FloatArray:
        return np.ascontiguousarray(params[key], dtype=np.float32)

    return f32("hc_fn"), f32("hc_scale"), f32("hc_base")


def sublayer_read(s: Settings, params: Params, x: npt.NDArray[np.generic]
                  ) -> list[FloatArray]:
    """:func:`read` on a state ``x [B, T, n, d]``: ``[x_in [B,T,d], post [B,T,n],
    comb [B,T,n_src,n_dst]]`` float32."""
    b, t, n, d = x.shape
    x_in, post, comb = read(_tokens(x), *_tensors(params), s)
    return [x_in.reshape(b, t, d), post.reshape(b, t, n), comb.reshape(b, t, n, n)]


def sublayer_write(s: Settings, params: Params, x: npt.NDArray[np.generic],
                   z: npt.NDArray[np.generic], post: npt.NDArray[np.generic],
                   comb: npt.NDArray[np.generic]) -> FloatArray:
    """:func:`write` on ``x [B,T,n,d]``, ``z [B,T,d]``, ``post [B,T,n]``,
    ``comb [B,T,n_src,n_dst]``: ``X' [B,T,n,d]`` float32."""
    del params
    b, t, n, d = x.shape
    f32 = np.float32
    out = write(_tokens(x), np.ascontiguousarray(z, dtype=f32).reshape(b * t, d),
                np.ascontiguousarray(post, dtype=f32).reshape(b * t, n),
                np.ascontiguousarray(comb, dtype=f32).reshape(b * t, n, n), s)
    return out.reshape(b, t, n, d)


def sublayer_weights(s: Settings, params: Params, x: npt.NDArray[np.generic]
                     ) -> list[FloatArray]:
    """:func:`weights` on ``x [B,T,n,d]`` in the kit's row form: ``[h_pre [B,T,n],
    h_post [B,T,n], H_res [B,T,n,n]]`` with ``H_res[dst, src] = comb[src, dst]``."""
    b, t, n, _ = x.shape
    pre, post, comb = weights(_tokens(x), *_tensors(params), s)
    return [pre.reshape(b, t, n), post.reshape(b, t, n),
            np.ascontiguousarray(comb.reshape(b, t, n, n).swapaxes(-1, -2))]


def sublayer_logits(s: Settings, params: Params, x: npt.NDArray[np.generic]
                    ) -> list[FloatArray]:
    """:func:`logits` on ``x [B,T,n,d]`` in the row form of :func:`sublayer_weights`."""
    b, t, n, _ = x.shape
    pre, post, comb = logits(_tokens(x), *_tensors(params), s)
    return [pre.reshape(b, t, n), post.reshape(b, t, n),
            np.ascontiguousarray(comb.reshape(b, t, n, n).swapaxes(-1, -2))]


# --- Qwen4-exp's gated step, as src/models/qwen4exp.cpp composes it --------------------------
GATED_SOURCE: Final = "src/models/qwen4exp.cpp"
"""The file of llama.cpp 0c1e5709 the gated composition follows (``build_hc_mix`` lines
270–324, ``build_hc_combine`` lines 326–349)."""


GATED_NAMES: Final = ("hc_norm.weight", "input_mix_weight_down", "input_mix_weight_up",
                      "block_inject_weight")
"""The published ``qwen4-exp`` tensors (transformers' names) the gated functions take."""


def _gated_tensors(params: Params, n: int, d: int
                   ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The GGUF's tensors from the published ones: the norm's gamma folded to ``1 + w``
    (llama.cpp's converter, conversion/qwen.py lines 401–402, for every ``norm.weight``) in
    ggml's ``[n_embd, hc]`` (NumPy ``[n, d]``); ``down [r, n·d]``, ``up [n·d, r]``,
    ``inject [n, n·d]`` as they are (ggml's shapes are these reversed)."""
    def f32(key: str) -> FloatArray:
        return np.ascontiguousarray(params[key], dtype=np.float32)

    gamma = (np.float32(1.0) + f32(GATED_NAMES[0])).reshape(n, d)
    return gamma, f32(GATED_NAMES[1]), f32(GATED_NAMES[2]), f32(GATED_NAMES[3])


def _gated_mix(g: Graph, x: FloatArray, params: Params, s: Settings
               ) -> tuple[int, int, int]:
    """``build_hc_mix`` (qwen4exp.cpp lines 270–324) with the fused read (the default,
    ``cparams.fused_dsv4_hc_pre``, src/llama-context.cpp line 240): ``x [N, n, d]`` as ggml
    ``[d, n, N]``; returns the tensors ``(x, mixed [d, N], inject logits [n, N])``."""
    lib, ctx = g.lib.base, g.ctx
    tokens, n, d = x.shape
    gamma, down, up, inject = (g.tensor(a) for a in _gated_tensors(params, n, d))
    tx = g.tensor(x)
    # line 284: xn = ggml_mul(ggml_rms_norm(x, eps), w_norm): the RMS over one stream (ne0)
    xn = lib.ggml_mul(ctx, lib.ggml_rms_norm(ctx, tx, s.norm_eps), gamma)
    # line 285: xn = ggml_reshape_2d(xn, hc_dim, nt)
    xn = lib.ggml_reshape_2d(ctx, xn, n * d, tokens)
    # lines 288–290: gate = up · silu(scale(down · xn, 1/hc)) (build_lora_mm is ggml_mul_mat)
    lo = lib.ggml_silu(ctx, lib.ggml_scale(ctx, lib.ggml_mul_mat(ctx, down, xn), 1.0 / n))
    gate = lib.ggml_mul_mat(ctx, up, lo)
    # lines 296–298: mixed = ggml_dsv4_hc_pre_gated(xn, gate, 1/hc), both as [n_embd, hc, nt]
    mixed = lib.ggml_dsv4_hc_pre_gated(ctx, lib.ggml_reshape_3d(ctx, xn, d, n, tokens),
                                       lib.ggml_reshape_3d(ctx, gate, d, n, tokens), 1.0 / n)
    # line 319: inject = build_lora_mm(w_inject, xn)
    logits = lib.ggml_mul_mat(ctx, inject, xn)
    return tx, int(mixed), int(logits)


def _combine_weights(g: Graph, logits: int, n: int) -> int:
    """``build_hc_combine`` lines 335–336: ``w = 2 σ(inject / hc)`` ``[hc, nt]``."""
    lib, ctx = g.lib.base, g.ctx
    return int(lib.ggml_scale(ctx, lib.ggml_sigmoid(ctx, lib.ggml_scale(ctx, logits, 1.0 / n)),
                              2.0))


def gated_read(s: Settings, params: Params, x: npt.NDArray[np.generic]) -> list[FloatArray]:
    """The read of one Qwen4-exp hyper-connection (``build_hc_mix``, qwen4exp.cpp lines
    270–324, and the weights of ``build_hc_combine``, lines 335–336) on a state ``x [B,T,n,d]``
    with the published ``qwen4-exp`` tensors ``params`` (:data:`GATED_NAMES`): ``[x_in [B,T,d],
    h_post [B,T,n]]`` float32. Any ``n >= 1`` (no op asserts a count)."""
    b, t, n, d = x.shape
    with Graph(load(), s.backend) as g:
        _, mixed, logits = _gated_mix(g, _tokens(x), params, s)
        w = _combine_weights(g, logits, n)
        x_in, h_post = g.compute([(mixed, (b * t, d)), (w, (b * t, n))])
    return [x_in.reshape(b, t, d), h_post.reshape(b, t, n)]


def gated_write(s: Settings, params: Params, x: npt.NDArray[np.generic],
                z: npt.NDArray[np.generic], post: npt.NDArray[np.generic]) -> FloatArray:
    """``build_hc_combine``'s fused write (qwen4exp.cpp line 341,
    ``cparams.fused_dsv4_hc_post``): ``ggml_dsv4_hc_post(z, residual = x, post, NULL)``, the
    NULL comb being the identity: ``X'[t, s] = x[t, s] + post[t, s]·z[t]``.

    Shapes: ``x [B,T,n,d]``, ``z [B,T,d]``, ``post [B,T,n]``; returns ``[B,T,n,d]`` float32.
    """
    del params
    b, t, n, d = x.shape
    f32 = np.float32
    with Graph(load(), s.backend) as g:
        tz = g.tensor(np.ascontiguousarray(z, dtype=f32).reshape(b * t, d))
        tx = g.tensor(_tokens(x))
        tp = g.tensor(np.ascontiguousarray(post, dtype=f32).reshape(b * t, n))
        out = int(g.lib.base.ggml_dsv4_hc_post(g.ctx, tz, tx, tp, None))
        (result,) = g.compute([(out, (b * t, n, d))])
    return result.reshape(b, t, n, d)
