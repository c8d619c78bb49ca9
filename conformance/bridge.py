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

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from hcspec.conformance.adapters._capture import check_branch_output, check_state
from hcspec.conformance.protocol import Branch, Conventions, Factory, Kind, Weights

__all__ = [
    "BridgedConnection", "Built", "FlatFunction", "Framework", "Sublayer", "bridged_target",
    "check_sizes", "cross", "declare", "jax_framework", "mlx_framework", "token_bucket",
    "torch_parameters",
]


class Framework(Protocol):
    """An array framework as the bridge uses it.

    Attributes:
        name: the framework's name, for messages (``"mlx"``).
    """

    name: str

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        """A framework array of dtype ``dtype`` (a torch dtype's name, ``"float64"``,
        ``"bfloat16"``) holding ``value`` (float32 where NumPy lacks ``dtype``)."""
        ...

    def to_numpy(self, array: Any) -> np.ndarray:
        """``array`` on the host as NumPy (a dtype NumPy lacks, as float32, exactly)."""
        ...

    def dtype_name(self, array: Any) -> str:
        """The torch dtype name of ``array``'s dtype (``"float32"``)."""
        ...

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        """``fn(*primals)``, evaluated."""
        ...

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        """The vector-Jacobian product of ``fn`` at ``primals`` with ``cotangents`` (one per
        output of ``fn``): one array per primal, shaped like it."""
        ...


def _to_framework(framework: Framework, t: torch.Tensor) -> Any:
    host = t.detach().to("cpu")
    if host.dtype == torch.bfloat16:  # NumPy has no bfloat16: float32 holds it exactly
        host = host.to(torch.float32)
    # always a copy (np.array copies): the framework never sees the caller's storage, its
    # strides or a chance to write into it (the properties of those bug classes are then not
    # applicable on a bridged target: Conventions.bridged)
    return framework.asarray(np.array(host.numpy(), copy=True, order="C"),
                             str(t.dtype).removeprefix("torch."))


def _to_torch(framework: Framework, array: Any, device: torch.device,
              dtype: torch.dtype | None = None) -> torch.Tensor:
    name = framework.dtype_name(array)
    own = getattr(torch, name, None)
    if not isinstance(own, torch.dtype):
        raise TypeError(f"{framework.name}: the array dtype {name!r} has no torch equivalent")
    host = torch.from_numpy(np.array(framework.to_numpy(array), copy=True))
    return host.to(device=device, dtype=dtype or own)


class _Call:
    """One framework function on flat arrays, with how its results come back to torch."""

    def __init__(self, framework: Framework, fn: Callable[..., Sequence[Any]],
                 device: torch.device) -> None:
        self.framework, self.fn, self.device = framework, fn, device

    def forward(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        arrays = [_to_framework(self.framework, t) for t in inputs]
        outputs = self.framework.call(self.fn, arrays)
        return tuple(_to_torch(self.framework, o, self.device) for o in outputs)

    def backward(self, inputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                 wanted: Sequence[bool]) -> tuple[torch.Tensor | None, ...]:
        arrays = [_to_framework(self.framework, t) for t in inputs]
        cotangents = [_to_framework(self.framework, g) for g in grads]
        pulled = self.framework.vjp(self.fn, arrays, cotangents)
        if len(pulled) != len(inputs):
            raise RuntimeError(f"{self.framework.name}: vjp returned {len(pulled)} arrays for "
                               f"{len(inputs)} primals")
        return tuple(
            _to_torch(self.framework, g, t.device, t.dtype) if want else None
            for g, t, want in zip(pulled, inputs, wanted, strict=True))


class _Crossing(torch.autograd.Function):
    """``call``'s framework function as a torch op whose backward is the framework's vjp."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.call = call
        ctx.save_for_backward(*inputs)
        return call.forward(inputs)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        inputs = ctx.saved_tensors
        return (None, *ctx.call.backward(inputs, grads, ctx.needs_input_grad[1:]))


def cross(framework: Framework, fn: Callable[..., Sequence[Any]],
          *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Run the framework function ``fn(*arrays) -> sequence of arrays`` on torch tensors.

    The inputs cross to the framework (NumPy on the host, dtypes kept), ``fn`` runs there, its
    outputs come back as torch tensors on the first input's device, each in the torch dtype of
    the framework array's dtype. The result is differentiable: its backward sends the
    cotangents to the framework and returns ``framework.vjp(fn, arrays, cotangents)``, each
    gradient cast to its input's dtype (once differentiable).

    Raises:
        ValueError: no input.
        TypeError: an output dtype without a torch equivalent.
        RuntimeError: the framework's vjp returned another number of arrays than primals.
    """
    if not inputs:
        raise ValueError("cross: give at least one input tensor")
    outputs: tuple[torch.Tensor, ...] = _Crossing.apply(  # type: ignore[no-untyped-call]
        _Call(framework, fn, inputs[0].device), *inputs)
    return outputs


# --- the implementation side --------------------------------------------------------------

Params = Mapping[str, Any]
"""The parameters, by name, as framework arrays (the first argument of every framework
function of a :class:`Sublayer`)."""


@dataclass(frozen=True)
class Sublayer:
    """The framework-side functions of one hyper-connected sublayer, split at the branch.

    Attributes:
        read: ``read(params, x [B,T,n,d]) -> (x_in [B,T,d], *saved)``: the branch input and
            the arrays ``write`` needs (``h_post``, ``H_res`` ...).
        write: ``write(params, x, z [B,T,d], *saved) -> x' [B,T,n,d]``.
        weights: optional ``weights(params, x) -> (h_pre [B,T,n], h_post [B,T,n],
            H_res [B,T,n,n])`` in the kit's row form ``X' = H_res X + h_post zᵀ``.
        reduce: optional ``reduce(params, x) -> [B,T,d]``, the stream reduction at the output.
    """

    read: Callable[..., Sequence[Any]]
    write: Callable[..., Any]
    weights: Callable[..., Sequence[Any]] | None = None
    reduce: Callable[..., Any] | None = None


class Built(NamedTuple):
    """What a bridged target's ``build`` returns for one sublayer.

    Attributes:
        parameters: every trainable array by name, as NumPy (initialised as the package does).
        sublayer: the framework functions (:class:`Sublayer`).
    """

    parameters: Mapping[str, np.ndarray]
    sublayer: Sublayer


class FlatFunction:
    """A :class:`Sublayer` function ``fn(params, *arrays)`` as a function of flat arrays
    (the parameters first, in ``names`` order) returning a list: what :func:`cross` runs and
    :meth:`Framework.vjp` differentiates.

    A framework with autodiff differentiates the call; one without (a NumPy stand-in whose
    functions carry hand-written vjps) can read ``fn``, ``names`` and ``single``.

    Attributes:
        fn: the sublayer function. names: the parameter names. single: ``fn`` returns one
            array (wrapped in a list here) rather than a sequence.
    """

    def __init__(self, fn: Callable[..., Any], names: Sequence[str], single: bool) -> None:
        self.fn, self.names, self.single = fn, tuple(names), single

    def __call__(self, *arrays: Any) -> list[Any]:
        count = len(self.names)
        out = self.fn(dict(zip(self.names, arrays[:count], strict=True)), *arrays[count:])
        return [out] if self.single else list(out)


def _flat(fn: Callable[..., Any], names: Sequence[str], single: bool = False) -> FlatFunction:
    return FlatFunction(fn, names, single)


def token_bucket(tokens: int) -> int:
    """The bucket of ``tokens``: the next power of two (at least 1). A bridged target that
    buckets pads the token axis to it, so a framework that compiles per shape (XLA: seconds per
    new ``(B, T)``, every executable kept) compiles ``log₂`` as many shapes.

    >>> [token_bucket(t) for t in (1, 2, 3, 5, 8, 9)]
    [1, 2, 4, 8, 8, 16]
    """
    return 1 if tokens <= 1 else 1 << (tokens - 1).bit_length()


_SHAPES_SEEN: dict[str, set[tuple[int, ...]]] = {}
"""The state shapes each framework (by name) was called with since its caches were last
cleared (:attr:`BridgedConnection.max_cached_shapes`)."""


def _pad_tokens(t: torch.Tensor, tokens: int) -> torch.Tensor:
    """``t [B, T, ...]`` with zero tokens appended up to ``tokens`` (differentiable)."""
    missing = tokens - t.shape[1]
    if missing <= 0:
        return t
    return torch.cat([t, t.new_zeros(t.shape[0], missing, *t.shape[2:])], dim=1)


class BridgedConnection:
    """A sublayer in another framework, presented as a kit impl
    (:mod:`hcspec.conformance.protocol`).

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]``; with the sublayer's ``weights``,
    ``weights(x) -> (h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``; with its ``reduce``,
    ``reduce(x) -> [B,T,d]``; ``expand(h [B,T,d]) -> [B,T,n,d]`` replicates. Dtypes: what the
    framework returns, mapped to torch (the declared conventions say what that is). Device: the
    framework computes where it computes; the results come back on ``x``'s device.

    Attributes:
        n, d, kind, conventions: as the protocol says.
        framework: the :class:`Framework`.
        params: the parameters by name, torch leaf tensors (``requires_grad``).
        sublayer: the framework functions.
        bucket_tokens: pad the token axis with zero tokens up to :func:`token_bucket` before
            the framework sees it, and drop them after (the branch sees the real tokens only).
            Sound only for a per-token step, which the kit checks (``independence.token``:
            one token's output does not depend on another's).
        max_cached_shapes: after this many distinct state shapes, call the framework's
            ``clear_caches()`` (when it has one, e.g. ``jax.clear_caches``) and start counting
            again; None: never.

    Raises:
        ValueError: (from the methods) ``x`` not ``[B, T, n, d]``; a branch output of another
            shape.
    """

    def __init__(self, framework: Framework, sublayer: Sublayer, params: dict[str, torch.Tensor],
                 n: int, d: int, kind: Kind, conventions: Conventions, *,
                 bucket_tokens: bool = False, max_cached_shapes: int | None = None) -> None:
        self.framework = framework
        self.bucket_tokens = bucket_tokens
        self.max_cached_shapes = max_cached_shapes
        self.sublayer = sublayer
        self.params = params
        self.n, self.d = n, d
        self.kind: str = kind
        self.conventions = conventions
        self.training = True
        names = list(params)
        self._read = _flat(sublayer.read, names)
        self._write = _flat(sublayer.write, names, single=True)
        self._weights = None if sublayer.weights is None else _flat(sublayer.weights, names)
        self._reduce = None if sublayer.reduce is None else _flat(sublayer.reduce, names, True)
        if self._weights is None:  # capability detection is by presence (protocol)
            self.weights = None  # type: ignore[assignment]
        if self._reduce is None:
            self.reduce = None  # type: ignore[assignment]

    def parameters(self) -> Iterator[torch.Tensor]:
        """The parameters (torch leaves; the kit may modify them in place under no_grad)."""
        return iter(self.params.values())

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """``(name, tensor)`` per parameter, the names the package gives them."""
        return iter(self.params.items())

    def train(self, mode: bool = True) -> BridgedConnection:
        """Record the mode (the bridged sublayer has no train-only behaviour)."""
        self.training = bool(mode)
        return self

    def eval(self) -> BridgedConnection:
        """``train(False)``."""
        return self.train(False)

    def _crossing(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        """``x`` as it crosses (padded to its token bucket when :attr:`bucket_tokens`), and
        the real token count; counts the shape for :attr:`max_cached_shapes`."""
        tokens = x.shape[1]
        padded = _pad_tokens(x, token_bucket(tokens)) if self.bucket_tokens else x
        if self.max_cached_shapes is not None:
            seen = _SHAPES_SEEN.setdefault(self.framework.name, set())
            seen.add(tuple(padded.shape))
            if len(seen) > self.max_cached_shapes:
                clear = getattr(self.framework, "clear_caches", None)
                if callable(clear):
                    clear()
                seen.clear()
                seen.add(tuple(padded.shape))
        return padded, tokens

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``read`` in the framework, the torch ``branch`` once on ``x_in``, ``write`` in the
        framework; differentiable w.r.t. ``x``, the parameters and what the branch depends on.
        With :attr:`bucket_tokens` the framework sees the padded state and the branch the real
        tokens only.

        Raises:
            ValueError: see the class.
        """
        check_state(x, self.n, self.d)
        params = tuple(self.params.values())
        padded, tokens = self._crossing(x)
        x_in, *saved = cross(self.framework, self._read, *params, padded)
        x_in = x_in[:, :tokens]
        z = check_branch_output(branch(x_in), x_in)
        (out,) = cross(self.framework, self._write, *params, padded,
                       _pad_tokens(z, padded.shape[1]), *saved)
        return out[:, :tokens]

    def weights(self, x: torch.Tensor) -> Weights:
        """The sublayer's ``(h_pre, h_post, H_res)`` at ``x`` (row form), differentiable.

        Raises:
            ValueError: see the class.
        """
        check_state(x, self.n, self.d)
        assert self._weights is not None  # the attribute is None otherwise
        padded, tokens = self._crossing(x)
        h_pre, h_post, h_res = cross(self.framework, self._weights, *self.params.values(),
                                     padded)
        return h_pre[:, :tokens], h_post[:, :tokens], h_res[:, :tokens]

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The sublayer's reduction of ``x`` to ``[B, T, d]``, differentiable.

        Raises:
            ValueError: see the class.
        """
        check_state(x, self.n, self.d)
        assert self._reduce is not None  # the attribute is None otherwise
        padded, tokens = self._crossing(x)
        (out,) = cross(self.framework, self._reduce, *self.params.values(), padded)
        return out[:, :tokens]

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into the n streams ``[B, T, n, d]`` (in torch).

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).contiguous()


BRIDGE_NOTE = ("runs in {name} through hcspec.conformance.bridge: arrays cross through NumPy, "
               "the backward is {name}'s vjp (once differentiable), the branch is the kit's "
               "torch callable, called once between the framework's read and write")


def torch_parameters(values: Mapping[str, np.ndarray], dtype: torch.dtype | None,
                     device: str) -> dict[str, torch.Tensor]:
    """Torch leaf tensors (``requires_grad``) holding ``values``, in ``dtype`` (None: each
    array's own dtype) on ``device``."""
    out: dict[str, torch.Tensor] = {}
    for name, value in values.items():
        t = torch.from_numpy(np.array(value, copy=True))
        out[name] = t.to(device=device, dtype=dtype or t.dtype).requires_grad_(True)
    return out


def bridged_target(framework: Callable[[], Framework],
                   build: Callable[[int, int, int, int], Built], *,
                   conventions: Conventions, compute_dtype: torch.dtype | None,
                   parameter_dtype: torch.dtype | None = None, kind: Kind = "mhc",
                   bucket_tokens: bool = False,
                   max_cached_shapes: int | None = None) -> Factory:
    """A kit target (factory) for a sublayer written in another framework.

    Args:
        framework: returns the :class:`Framework` (called when an impl is built, so the
            framework is imported then, not when the target is declared).
        build: ``build(n, d, layer_index, seed) -> Built``: the parameters (NumPy, initialised
            as the package does, randomness from ``seed`` only) and the framework functions.
        conventions: what the target declares; ``compute_dtype`` replaces its field of that
            name, and the bridge's limits are added to its notes.
        compute_dtype: the precision the framework computes in (``torch.float32`` for a
            package that upcasts to float32), or None: the dtype that crosses. Required, so
            that the precision is always declared.
        parameter_dtype: the dtype of the parameters whatever the factory's dtype (a package
            that keeps them in float32), or None: the factory's dtype.
        kind: the kit's kind.
        bucket_tokens, max_cached_shapes: bound the framework's compilations
            (:class:`BridgedConnection`): token counts padded to powers of two, and the
            framework's caches cleared after so many distinct shapes. A framework that
            compiles per shape (JAX on CPU: about 5 s forward and 15–20 s backward per new
            ``(B, T)``, every executable kept) otherwise compiles every shape a run draws.

    Returns:
        ``make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0)`` building a
        fresh :class:`BridgedConnection`.

    Raises:
        ValueError: (from ``make``) ``n``/``d`` not positive ints, ``layer_index < 0`` or
            ``seed < 0``.
    """
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> BridgedConnection:
        check_sizes(n, d, layer_index, seed)
        fw = framework()
        built = build(n, d, layer_index, seed)
        params = torch_parameters(built.parameters, parameter_dtype or dtype, device)
        declared = declare(conventions, compute_dtype, fw.name)
        if bucket_tokens:
            declared = replace(declared, notes=f"{declared.notes}; token counts padded with "
                                               "zero tokens to powers of two")
        return BridgedConnection(fw, built.sublayer, params, n, d, kind, declared,
                                 bucket_tokens=bucket_tokens,
                                 max_cached_shapes=max_cached_shapes)

    make.__doc__ = (f"Kit factory for a sublayer bridged from another framework, built by "
                    f"{getattr(build, '__qualname__', build)!s}.")
    return make


def check_sizes(n: int, d: int, layer_index: int, seed: int) -> None:
    """Validate a factory's arguments.

    Raises:
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if layer_index < 0:
        raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
    if seed < 0:
        raise ValueError(f"seed: expected >= 0, got {seed}")


UNTRACEABLE = ("forward calls into {name} through hcspec.conformance.bridge, which TorchDynamo "
               "cannot trace (torch.compile sees only the torch.autograd.Function boundary)")
"""The ``Conventions.untraceable`` reason every bridged target declares."""


def declare(conventions: Conventions, compute_dtype: torch.dtype | None,
            framework_name: str) -> Conventions:
    """``conventions`` with ``compute_dtype``, the bridge's note added, ``untraceable``
    declared (:data:`UNTRACEABLE`: ``compile.fullgraph`` is then not applicable) and
    ``bridged`` set to the framework's name (the properties whose bug class the bridge rules
    out are then not applicable: :func:`hcspec.conformance.properties.requirements.not_bridged`)."""
    note = BRIDGE_NOTE.format(name=framework_name)
    notes = f"{conventions.notes}; {note}" if conventions.notes else note
    return replace(conventions, compute_dtype=compute_dtype, notes=notes,
                   untraceable=UNTRACEABLE.format(name=framework_name),
                   bridged=framework_name)


# --- frameworks -----------------------------------------------------------------------------

class _Mlx:
    """MLX (``mlx.core``) as a :class:`Framework`: ``mx.vjp``; arrays through NumPy."""

    name = "mlx"

    def __init__(self) -> None:
        # the framework is imported here, when a target is built
        self.mx: Any = importlib.import_module("mlx.core")

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        target = getattr(self.mx, dtype)
        return self.mx.array(value, dtype=self.mx.float32 if dtype == "bfloat16" else target
                             ).astype(target)

    def to_numpy(self, array: Any) -> np.ndarray:
        if array.dtype == self.mx.bfloat16:
            array = array.astype(self.mx.float32)
        return np.array(array)

    def dtype_name(self, array: Any) -> str:
        return str(array.dtype).removeprefix("mlx.core.")

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        outputs = list(fn(*primals))
        self.mx.eval(outputs)
        return outputs

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        _, grads = self.mx.vjp(lambda *a: list(fn(*a)), list(primals), list(cotangents))
        self.mx.eval(grads)
        return list(grads)


class _Jax:
    """JAX as a :class:`Framework`: ``jax.vjp``; arrays through NumPy. Turns on
    ``jax_enable_x64`` (JAX's switch for float64, off by default: a float64 state would
    otherwise cross as float32)."""

    name = "jax"

    def __init__(self) -> None:
        # the framework is imported here, when a target is built
        self.jax: Any = importlib.import_module("jax")
        self.jax.config.update("jax_enable_x64", True)
        self.jnp: Any = importlib.import_module("jax.numpy")

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        return self.jnp.asarray(value).astype(self.jnp.dtype(dtype))

    def to_numpy(self, array: Any) -> np.ndarray:
        if array.dtype == self.jnp.bfloat16:
            array = array.astype(self.jnp.float32)
        return np.asarray(array)

    def dtype_name(self, array: Any) -> str:
        return str(array.dtype)

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        return list(fn(*primals))

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        _, pull = self.jax.vjp(lambda *a: tuple(fn(*a)), *primals)
        return list(pull(tuple(cotangents)))

    def clear_caches(self) -> None:
        """Drop every compiled executable (``jax.clear_caches``): a bridged target with
        ``max_cached_shapes`` calls it, bounding the memory mappings each compiled shape
        keeps (``vm.max_map_count``)."""
        self.jax.clear_caches()


def mlx_framework() -> Framework:
    """MLX as a :class:`Framework` (imports ``mlx.core``).

    Raises:
        ImportError: mlx is not installed.
    """
    return _Mlx()


def jax_framework() -> Framework:
    """JAX as a :class:`Framework` (imports ``jax`` and turns on ``jax_enable_x64``).

    Raises:
        ImportError: jax is not installed.
    """
    return _Jax()
