"""Kit limitation, verified: compile.fullgraph on mlx_lm:deepseek-v41 fails in the bridge, not in
mlx-lm 0.32.2.

mlx-lm's DeepSeek-V4.1 sublayer compiles with MLX's own compiler: ``mx.compile`` of one step
(``HyperConnection``, ``_collapse``, a branch, ``_expand``) and of its gradient equal the eager
ones. What the kit compiles is ``torch.compile(fullgraph=True)`` of the bridged forward, a call
into MLX that TorchDynamo cannot trace (it stops at mlx's ``nb_type.__new__``). This script does
not use the kit. Run (mlx-lm 0.32.2 and mlx[cpu] 0.32.4 installed, a few seconds):

    python docs/findings/repro/mlx_lm_compile.py
"""

import mlx.core as mx
import numpy as np
from mlx_lm.models import deepseek_v41 as pkg

n, d = 4, 8
rng = np.random.default_rng(0)
hc = pkg.HyperConnection(pkg.ModelArgs(hidden_size=d, hc_mult=n))
hc.update({"fn": mx.array(rng.normal(0, 0.3, hc.fn.shape).astype(np.float32)),
           "base": mx.array(rng.normal(0, 0.3, hc.base.shape).astype(np.float32))})
w = mx.array(rng.normal(0, 0.4, (d, d)).astype(np.float32))
x = mx.array(rng.normal(0, 1, (2, 3, n, d)).astype(np.float32))
g = mx.array(rng.normal(0, 1, (2, 3, n, d)).astype(np.float32))


def step(streams: mx.array) -> mx.array:
    pre, post, comb = hc(streams)
    z = mx.tanh(pkg._collapse(streams, pre) @ w)
    return pkg._expand(z, streams, post, comb)


def loss(streams: mx.array) -> mx.array:
    return (step(streams) * g).sum()


eager, compiled = step(x), mx.compile(step)(x)
grad_eager, grad_compiled = mx.grad(loss)(x), mx.compile(mx.grad(loss))(x)
forward_diff = float(mx.abs(eager - compiled).max())
grad_diff = float(mx.abs(grad_eager - grad_compiled).max())
print(f"Sinkhorn path: {'fallback loop' if pkg._sinkhorn_kernel is None else 'Metal kernel'}")
print(f"mx.compile forward vs eager: max |diff| = {forward_diff:.3g}")
print(f"mx.compile gradient vs eager: max |diff| = {grad_diff:.3g}")
assert forward_diff <= 1e-5 and grad_diff <= 1e-5, "mx.compile differs from eager"
print("the package's step compiles with MLX's compiler and equals eager")
