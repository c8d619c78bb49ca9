"""The implementation side of the bridge: a framework sublayer split at the branch call
(:class:`Sublayer`), the torch module that runs it (:class:`BridgedConnection`) and the target
that builds one (:func:`bridged_target`); see :mod:`hcspec.conformance.bridge`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import torch

from hcspec.conformance.bridge.crossing import (
    Framework,
    cross,
)
from hcspec.conformance.protocol import Branch, Conventions, Factory, Kind, Weights
from hcspec.conformance.protocol.validation import check_branch_output, check_state

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
    out are then not applicable: :func:`hcspec.conformance.machinery.requirements.not_bridged`)."""
    note = BRIDGE_NOTE.format(name=framework_name)
    notes = f"{conventions.notes}; {note}" if conventions.notes else note
    return replace(conventions, compute_dtype=compute_dtype, notes=notes,
                   untraceable=UNTRACEABLE.format(name=framework_name),
                   bridged=framework_name)


# --- frameworks -----------------------------------------------------------------------------


