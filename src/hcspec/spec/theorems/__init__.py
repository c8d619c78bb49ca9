"""Registered theorems, one module per topic; importing this package registers them all.

- :mod:`.connection`: ``layout.*``, ``forward.shapes``, ``backward.closed_form``
- :mod:`.reduction`: ``reduction.*`` (n = 1: pre-norm, post-norm)
- :mod:`.doubly_stochastic`: ``ds.*``, ``mhc.*``
- :mod:`.init`: ``init.static_prenorm``, ``dynamic.init_equals_static``
- :mod:`.duality`: ``duality.*``, ``unroll.connection_weights``
- :mod:`.counts`: ``counts.params``, ``counts.flops``
- :mod:`.backprop`: ``linear.*``, ``matmul_chain.*``, ``ffn.*``, ``residual.*``, ``prenorm.*``,
  ``postnorm.*``
- :mod:`.norm`: ``norm.jacobians``
- :mod:`.sinkhorn_gradient`: ``sinkhorn.implicit_gradient``
- :mod:`.mhc`: ``mhc.h_pre_range``, ``mhc.h_post_range``, ``mhc.sinkhorn_*``,
  ``ds.permutation_isometry``, ``ds.birkhoff_decompositions``
- :mod:`.kernel`: ``kernel.soundness`` (the proof kernel on planted false inputs)
- :mod:`.lemmas`: ``lemma.*`` (facts other proofs cite)
- :mod:`.remarks`: ``mhc.soft_start``, ``mhc.tensor_parallel_locality``,
  ``reduction.n1_expressiveness``, ``mhc.sinkhorn_seed_loop``
- :mod:`.gated`: ``gated.*``, ``published.qwen4_exp_step`` (the general law; the gated read)
- :mod:`.constructions`: ``constructions.*`` (mHC-lite, orthostochastic H_res)
- :mod:`.published`: ``published.*`` (each published parameterization's step is the closed form)
"""

from hcspec.spec.theorems import (  # noqa: F401  (imported for their registration side effect)
    backprop,
    connection,
    constructions,
    counts,
    doubly_stochastic,
    duality,
    gated,
    init,
    kernel,
    lemmas,
    mhc,
    norm,
    published,
    reduction,
    remarks,
    sinkhorn_gradient,
)
