"""A bridge from a non-PyTorch HC/mHC implementation (MLX, JAX, ...) to a kit target.

The kit drives an impl with torch tensors and a torch branch, and differentiates it with torch
autograd (:mod:`hcspec.conformance.protocol`). An implementation written in another array
framework joins it through this module:

* the framework-side code of one sublayer is split at the branch call, as every HC/mHC step
  can be (HC arXiv:2409.19606 Eq. 3–5; mHC arXiv:2512.24880 Eq. 3): ``read(params, x) ->
  (x_in, *saved)`` computes the branch input (and whatever the write needs: ``h_post``,
  ``H_res``), ``write(params, x, z, *saved) -> x'`` the new state from the branch output ``z``
  (:class:`Sublayer`);
* the bridge calls ``read`` in the framework, converts ``x_in`` to torch, calls the kit's torch
  branch on it exactly once, converts its output back and calls ``write``: the branch's vjp is
  torch autograd's, the framework's parts are differentiated by the framework's own vjp
  (``mx.vjp``, ``jax.vjp``), each wrapped as a ``torch.autograd.Function`` (:func:`cross`), so
  the gradient w.r.t. the state reaches it through the write, the read and the branch;
* the parameters live as torch leaf tensors (``requires_grad``) that ``parameters()`` yields:
  the kit perturbs them in place and reads their gradients as any other target's; they cross
  to the framework on every call, and the framework's vjp w.r.t. them is their gradient;
* arrays cross through NumPy on the host: a dtype NumPy lacks (``bfloat16``) crosses as
  float32 and is cast back exactly on the other side, so every value keeps its dtype;
* the precision is declared: :func:`bridged_target` needs ``compute_dtype`` (the dtype the
  framework computes in, or None for "the dtype that crosses"), which goes into the declared
  :class:`~hcspec.conformance.protocol.Conventions`.

Every property then applies unchanged. A :class:`Framework` says how to convert and how to take
a vjp; :func:`mlx_framework` and :func:`jax_framework` are given (each imports its framework
when called, never at this module's import). docs/conformance.md ("Implementations in other
frameworks") has a worked example; examples/jax_mhc_adapter.py is one in JAX.

Limits (stated on the impl's ``conventions.notes``): second derivatives are not available (the
backward is ``once_differentiable``), and ``torch.compile`` cannot trace a framework call: every
bridged target declares ``Conventions.untraceable`` (:data:`UNTRACEABLE`), so
``compile.fullgraph`` is not applicable there, with that reason.
"""

from hcspec.conformance.bridge.connection import (
    BridgedConnection,
    Built,
    FlatFunction,
    Sublayer,
    bridged_target,
    check_sizes,
    declare,
    token_bucket,
    torch_parameters,
)
from hcspec.conformance.bridge.crossing import (
    Framework,
    cross,
)
from hcspec.conformance.bridge.frameworks import (
    jax_framework,
    mlx_framework,
)

__all__ = [
    "BridgedConnection", "Built", "FlatFunction", "Framework", "Sublayer", "bridged_target",
    "check_sizes", "cross", "declare", "jax_framework", "mlx_framework", "token_bucket",
    "torch_parameters",
]
