"""What an impl declares: the :class:`Conventions` record (how the impl differs from the
papers' defaults), its flat constructor keywords, and :func:`conventions_of`, which reads a
declaration from an impl."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

import torch

from hcspec.conformance.protocol import sizes
from hcspec.conformance.protocol.keywords import _one_of, _with_construction, _with_keywords
from hcspec.spec.kinds import KINDS as KINDS  # the one vocabulary of kinds, defined by the spec
from hcspec.spec.kinds import Kind as Kind
from hcspec.spec.published import PARAMETERIZATIONS
from hcspec.spec.record import (
    DEFAULT_ITERATIONS,
    Activation,
    Axis,
    Construction,
    Count,
    Formula,
    Gate,
    Start,
)

StackPreMix = Literal["own_input", "previous_input"]
"""Where a :class:`Stack`'s sublayer k takes its pre-mix ``h_pre`` from (``Stack.pre_mix_from``):
``"own_input"`` — what sublayer k computes from its own input ``X_k`` (the default);
``"previous_input"`` — what sublayer k − 1 computed from ``X_{k−1}``, and the declared
``initial_pre_mix`` for sublayer 0 (DeepSeek-V4.1's single pass)."""
_STACK_PRE_MIXES: Final[tuple[str, ...]] = ("own_input", "previous_input")

BranchInput = Literal["x_in", "rms_norm", "layer_norm"]
ReduceScale = Literal["sum", "mean", "learned"]
StateDomain = Literal["any", "replicated"]
ResidualMixing = Literal["matrix", "identity"]
Read = Literal["per_stream", "elementwise", "map"]
SinkhornGradient = Literal["unrolled", "implicit"]

_BRANCH_INPUTS: Final[tuple[str, ...]] = ("x_in", "rms_norm", "layer_norm")
_REDUCE_SCALES: Final[tuple[str, ...]] = ("sum", "mean", "learned")
_STATE_DOMAINS: Final[tuple[str, ...]] = ("any", "replicated")
_RESIDUAL_MIXINGS: Final[tuple[str, ...]] = ("matrix", "identity")
_READS: Final[tuple[str, ...]] = ("per_stream", "elementwise", "map")
_SINKHORN_GRADIENTS: Final[tuple[str, ...]] = ("unrolled", "implicit")
_COMPUTE_DTYPES: Final[tuple[torch.dtype, ...]] = (
    torch.float64, torch.float32, torch.bfloat16, torch.float16,
)


@dataclass(frozen=True)
class Conventions:
    """Conventions an adapter declares; every field has the kit's default (the papers' form).

    A declaration changes how a property is checked, never whether it runs, and never turns a
    deviation from the papers into a pass: a declared ``h_post_multiplier`` other than 2, or a
    mixing matrix that is not doubly stochastic, still fails the property that states the
    paper's fact (the message says the deviation was declared; a user who accepts it lists it
    in an expected-failures file). docs/conformance.md gives an example of each field.

    ``layer_index`` (the factory's argument) is 0-based: the first hyper-connected sublayer is
    0. An adapter for a package that counts from 1 (Megatron-LM's ``layer_number``) passes
    ``layer_index + 1``; there is no convention for it.

    Attributes:
        branch_input: what the branch receives — ``"x_in"`` (the aggregate ``h_preᵀ X``, the
            default: the norm of pre-norm lives inside ``F``), or a parameter-free
            ``"rms_norm"`` / ``"layer_norm"`` of it applied by the impl before the branch.
        norm_eps: the epsilon of that norm (ignored for ``"x_in"``).
        reduce: how ``reduce`` combines the streams: ``"sum"`` (HC's ``1ᵀ X``), ``"mean"``,
            or ``"learned"``: a learned reduction head (input-dependent weights, as
            DeepSeek-V4's ``HyperHead``) instead of a fixed sum or mean.
        compute_dtype: the precision the impl computes in internally when it differs from the
            input's (e.g. ``torch.float32`` for an impl that upcasts/downcasts); ``None`` means
            "the input's dtype". Tolerances use the coarser of the two.
        output_dtype: the dtype of ``forward``'s output (and of ``weights``; ``reduce`` may
            return it or the input's) when it is not the input's: an impl that computes in
            float32 and returns float32 for a bfloat16 input declares ``torch.float32``;
            ``None`` means "the input's dtype". Tolerances use the coarsest of it,
            ``compute_dtype`` and the input's.
        weights_dtype: the dtype of ``weights`` when it is finer than ``output_dtype``: an
            engine that keeps its mixing coefficients in float32 (they never pass through the
            state's bfloat16) while it returns a bfloat16 state declares ``torch.float32``
            and reports them unrounded. The properties that compare reported weights with
            the declared formula at the target's own logits (``variant.h_res``,
            ``variant.gates``) then judge them in the coarsest of it, ``compute_dtype`` and the
            input's; every other comparison keeps ``output_dtype``'s. ``None``: the weights
            are returned in ``output_dtype`` (else the input's).
        state_domain: the stream states ``forward`` accepts: ``"any"`` ``[B,T,n,d]`` state (the
            default), or only ``"replicated"`` ones, ``X = 1_n hᵀ`` per token — for an
            implementation that expands a ``[B,T,d]`` hidden state into its n streams inside
            every call. The kit then draws only replicated states (and replicated directions
            for finite differences, comparing gradients projected on them); properties that
            need a full-row-rank state (black-box probing of ``H_res`` and ``h_pre``) are
            reported *not applicable* with this reason.
        residual_mixing: ``"matrix"`` (the impl mixes the streams with ``H_res``, the default)
            or ``"identity"``: the impl has no mixing matrix (``X' = X + h_post zᵀ``; the
            residual streams pass unchanged). Its ``weights`` report ``H_res = I``, and the
            properties check that ``H_res`` is exactly the identity where they would check a
            learned one.
        notes: free text shown in the report (e.g. what the adapter translates).
        read: how the branch input is read from the streams: ``"per_stream"`` (the default,
            ``x_in = h_preᵀ X`` with scalars ``h_pre [n]``) or ``"elementwise"`` (a weight per
            stream and feature, ``x_in = Σ_s h_pre_s ⊙ X_s``, reported by
            ``elementwise_weights``: Qwen4-exp's gated read, spec ``gated.general_law``), or
            ``"map"`` (any other map ``x_in(X)``, reported by ``read_map``). A property that
            needs per-stream weights (reported or probed) is not applicable to either, with
            that reason; the ``gated`` family applies instead.
        sinkhorn_gradient: what the backward of Sinkhorn–Knopp computes: ``"unrolled"`` (the
            default: the gradient of the truncated forward, as autograd through the rounds)
            or ``"implicit"``: the gradient of the limit, by implicit differentiation at the
            fixed point (DeepSeek TileKernels). Declared implicit, the finite-difference
            checks of the truncated forward do not apply and ``variant.sinkhorn_gradient``
            compares with the fixed-point gradient the kit computes.
        supported_expansion_rates: the expansion rates ``n`` the impl supports (a kernel
            written for ``n = 4`` declares ``(4,)``); ``None`` means any. The scale properties
            report a case of another ``n`` not applicable, with this declaration as the reason.
        hidden_size_multiple: the impl supports only hidden sizes ``d`` that are multiples of
            this (a kernel tiled by 64 without masking declares 64); 1 means any.
        max_parameters: the largest parameter count the impl supports, counted as the mHC
            layout of the declared construction has it (:meth:`parameter_count`: ``φ [n·d,
            2n + R]``, the biases and three gating scalars; ``R = n²``, or the ``K``
            permutations of ``birkhoff``, ``n!`` for all of them). mHC-lite's ``φ_res`` has
            ``n·d·n!`` entries (83 M at n = 8, d = 257): the construction's own size, why it
            targets small n (arXiv 2601.05732). The sizes above it are left out with the
            reason (:meth:`unsupported_size`), as an undeclared rate is. None: no bound.
        contiguous_input: the impl needs a contiguous ``[B,T,n,d]`` state (it calls ``view`` on it);
            the strided-input property is then not applicable, and the report says so.
        published: the published parameterization whose tensors the impl holds
            (``"deepseek-v4"``, ``"mhc-paper"``, ``"hc-static"``, ``"hc-dynamic"``,
            :mod:`hcspec.reference.published`), offered by ``published_parameters()``; the
            ``published`` family checks the impl computes that parameterization's step from
            them. None: not declared (the family is not applicable).
        deterministic: False when repeated forwards/backwards of the same input may differ
            (atomics, dropout kept on in eval): the determinism properties then report the
            run-to-run spread instead of requiring bitwise equality, and the inference
            properties do not compare train-mode with eval-mode outputs.
        untraceable: why TorchDynamo cannot trace ``forward`` at all (it calls into another
            array framework: every target of :mod:`hcspec.conformance.bridge` declares it),
            or None (the default): traceable. Declared, ``compile.fullgraph`` is not
            applicable with this reason. Not for a graph break in PyTorch code, which is the
            bug that property reports.
        no_backward: why the impl has no backward at all (inference-only native kernels:
            ``"ggml inference ops have no backward"``), or None (the default): differentiable.
            Declared, every property that differentiates the impl is not applicable with this
            reason (requirement ``DIFFERENTIABLE``), and its outputs carry no autograd graph.
        double_backward: True when the backward is itself differentiable (second-order
            gradients, e.g. for gradient penalties): ``customop.double_backward`` then checks
            it with ``torch.autograd.gradgradcheck`` in float64. False (the default): not
            claimed, that property is not applicable.
        vmap: True when ``forward`` can be vmapped over a batch of parameter sets
            (``torch.func.functional_call`` on an ``nn.Module`` impl; its custom ops have
            ``register_vmap`` rules): ``customop.vmap`` then checks each set's slice against
            its own forward. False (the default): not claimed, not applicable.
        bridged: the array framework the impl runs in behind
            :mod:`hcspec.conformance.bridge` (``"jax"``, ``"mlx"``), or None (the default): the
            impl is PyTorch code the kit calls directly. The bridge sets it; the properties
            whose bug class the bridge itself rules out (it hands the framework a contiguous
            copy of a ``[B, T, n, d]`` state, rejecting any other rank first, and only records
            the train/eval mode) are then not applicable, with that reason, never a pass.
        formula: the mHC step's degrees of freedom, one :class:`hcspec.spec.record.Formula`
            (the default: the mHC paper's, Eq. 8–9): the gates ``h_pre = σ(·) + eps`` and
            ``h_post = c·σ(·) + eps``, and the Sinkhorn–Knopp variant making ``H_res``
            (:class:`hcspec.spec.record.SinkhornSpec`: the positive start ``exp`` / ``softmax``
            / ``sigmoid``, what the iteration count counts, the axis normalised last in the
            row convention — ``"rows"``: ``H 1 = 1`` exact —, the eps added to the positive
            start and in every denominator, the count; an undeclared count is the paper's
            ``t_max = 20`` and the report says so). Every family reads the step from here.

    Constructor keywords (the flat spelling a mapping declaration uses; each sets one field of
    :attr:`formula`, over a ``formula`` also given, and is not an attribute):
    ``sinkhorn_iterations`` (``sinkhorn.iterations``), ``sinkhorn_exact_axis``
    (``sinkhorn.exact_axis``), ``sinkhorn_variant`` (``sinkhorn.start``),
    ``sinkhorn_additive_eps`` (``sinkhorn.additive_eps``, DeepSeek-V4: ``softmax(L) + eps``),
    ``sinkhorn_denominator_eps`` (``sinkhorn.denominator_eps``, ``M / (M.sum(axis) + eps)``),
    ``sinkhorn_iterations_count`` (``sinkhorn.count``: ``"rounds"``, the paper's;
    ``"rounds_from_softmax"``, the softmax is the first normalisation of the first round;
    ``"normalisations"``), ``h_pre_eps`` (``h_pre.eps``, DeepSeek-V4's ``σ(·) + eps``),
    ``h_post_eps`` (``h_post.eps``) and ``h_post_multiplier`` (``h_post.multiplier``, the
    paper's 2), ``h_res_construction`` (``construction``: ``"sinkhorn"``, ``"birkhoff"``
    — mHC-lite —, ``"orthostochastic"``), ``birkhoff_permutations`` (``permutations``: the
    set of permutations mHC-lite combines, all n! when left out), ``h_pre_activation`` and
    ``h_post_activation`` (the gates' ``activation``: ``"sigmoid"``, or ``"softmax"`` over the
    streams; ``2σ`` is ``sigmoid`` with ``h_post_multiplier=2``). None (the default) leaves the
    field as ``formula`` has it.

    Raises:
        ValueError: on construction, for a value outside the ones listed above (the message
            names the keyword or the record's field).
    """

    branch_input: BranchInput = "x_in"
    norm_eps: float = 1e-6
    reduce: ReduceScale = "sum"
    compute_dtype: torch.dtype | None = None
    sinkhorn_iterations: InitVar[int | None] = None
    sinkhorn_exact_axis: InitVar[Axis | None] = None
    state_domain: StateDomain = "any"
    notes: str = ""
    output_dtype: torch.dtype | None = None
    sinkhorn_variant: InitVar[Start | None] = None
    sinkhorn_additive_eps: InitVar[float | None] = None
    sinkhorn_denominator_eps: InitVar[float | None] = None
    sinkhorn_iterations_count: InitVar[Count | None] = None
    h_pre_eps: InitVar[float | None] = None
    h_post_eps: InitVar[float | None] = None
    h_post_multiplier: InitVar[float | None] = None
    residual_mixing: ResidualMixing = "matrix"
    sinkhorn_gradient: SinkhornGradient = "unrolled"
    supported_expansion_rates: tuple[int, ...] | None = None
    hidden_size_multiple: int = 1
    max_parameters: int | None = None
    contiguous_input: bool = False
    deterministic: bool = True
    weights_scale_invariant: bool | None = None
    published: str | None = None
    untraceable: str | None = None
    no_backward: str | None = None
    double_backward: bool = False
    vmap: bool = False
    formula: Formula = dataclasses.field(default_factory=Formula)
    read: Read = "per_stream"
    bridged: str | None = None
    h_res_construction: InitVar[Construction | None] = None
    birkhoff_permutations: InitVar[tuple[tuple[int, ...], ...] | None] = None
    h_pre_activation: InitVar[Activation | None] = None
    h_post_activation: InitVar[Activation | None] = None
    weights_dtype: torch.dtype | None = None

    def __post_init__(self, sinkhorn_iterations: int | None, sinkhorn_exact_axis: Axis | None,
                      sinkhorn_variant: Start | None, sinkhorn_additive_eps: float | None,
                      sinkhorn_denominator_eps: float | None,
                      sinkhorn_iterations_count: Count | None, h_pre_eps: float | None,
                      h_post_eps: float | None, h_post_multiplier: float | None,
                      h_res_construction: Construction | None,
                      birkhoff_permutations: tuple[tuple[int, ...], ...] | None,
                      h_pre_activation: Activation | None,
                      h_post_activation: Activation | None) -> None:
        self._check_sizes()
        if self.published is not None:
            _one_of("published", self.published, PARAMETERIZATIONS)
        _one_of("branch_input", self.branch_input, _BRANCH_INPUTS)
        _one_of("reduce", self.reduce, _REDUCE_SCALES)
        _one_of("state_domain", self.state_domain, _STATE_DOMAINS)
        _one_of("residual_mixing", self.residual_mixing, _RESIDUAL_MIXINGS)
        _one_of("read", self.read, _READS)
        _one_of("sinkhorn_gradient", self.sinkhorn_gradient, _SINKHORN_GRADIENTS)
        for name in ("compute_dtype", "output_dtype", "weights_dtype"):
            value = getattr(self, name)
            if value is not None and value not in _COMPUTE_DTYPES:
                raise ValueError(
                    f"conventions.{name}: expected one of {_COMPUTE_DTYPES} or None, "
                    f"got {value!r}"
                )
        if not isinstance(self.formula, Formula):
            raise ValueError("conventions.formula: expected a hcspec.spec.record.Formula, got "
                             f"{self.formula!r}")
        object.__setattr__(self, "formula", _with_keywords(
            self.formula, sinkhorn_iterations, sinkhorn_exact_axis, sinkhorn_variant,
            sinkhorn_additive_eps, sinkhorn_denominator_eps, sinkhorn_iterations_count,
            h_pre_eps, h_post_eps, h_post_multiplier))
        object.__setattr__(self, "formula", _with_construction(
            self.formula, h_res_construction, birkhoff_permutations, h_pre_activation,
            h_post_activation))
        if not self.norm_eps >= 0.0:
            raise ValueError(f"conventions.norm_eps: expected >= 0, got {self.norm_eps!r}")
        for name in ("untraceable", "no_backward"):
            reason: object = getattr(self, name)
            if reason is not None and (not isinstance(reason, str) or not reason.strip()):
                raise ValueError(f"conventions.{name}: expected None or the reason (a "
                                 f"non-empty str), got {reason!r}")
        framework: object = self.bridged
        if framework is not None and (not isinstance(framework, str) or not framework.strip()):
            raise ValueError("conventions.bridged: expected None or the framework's name (a "
                             f"non-empty str), got {framework!r}")

    def _check_sizes(self) -> None:
        rates: object = self.supported_expansion_rates
        if rates is not None:
            if isinstance(rates, (str, bytes)) or not isinstance(rates, Iterable):
                raise ValueError("conventions.supported_expansion_rates: expected a sequence of "
                                 f"ints >= 1 or None, got {rates!r}")
            rates = tuple(rates)
            if not rates or any(isinstance(r, bool) or not isinstance(r, int) or r < 1
                                for r in rates):
                raise ValueError("conventions.supported_expansion_rates: expected a non-empty "
                                 f"sequence of ints >= 1 or None, got {rates!r}")
            object.__setattr__(self, "supported_expansion_rates", tuple(sorted(set(rates))))
        multiple = self.hidden_size_multiple
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            raise ValueError(
                f"conventions.hidden_size_multiple: expected an int >= 1, got {multiple!r}")
        most = self.max_parameters
        if most is not None and (isinstance(most, bool) or not isinstance(most, int)
                                 or most < 1):
            raise ValueError(
                f"conventions.max_parameters: expected an int >= 1 or None, got {most!r}")
        for name in ("contiguous_input", "deterministic", "double_backward", "vmap"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"conventions.{name}: expected a bool, got "
                                 f"{getattr(self, name)!r}")
        if self.weights_scale_invariant not in (None, True, False):
            raise ValueError("conventions.weights_scale_invariant: expected a bool or None, got "
                             f"{self.weights_scale_invariant!r}")

    def unsupported_size(self, n: int, d: int, *, parameters: bool = True) -> str | None:
        """Why the declared sizes exclude expansion rate ``n`` and hidden size ``d``, or None
        when they are supported; ``parameters=False`` leaves :attr:`max_parameters` out (the
        case lists that keep such a case for the builder to leave out and count,
        :class:`hcspec.conformance.machinery.building.Builder`).

        >>> declared = Conventions(supported_expansion_rates=(4,), hidden_size_multiple=64)
        >>> declared.unsupported_size(8, 65)
        'n=8 is not a declared expansion rate (supported_expansion_rates=(4,))'
        >>> Conventions(hidden_size_multiple=64).unsupported_size(4, 65)
        'd=65 is not a multiple of the declared hidden_size_multiple=64'
        >>> lite = Conventions(h_res_construction="birkhoff", max_parameters=12_000_000)
        >>> lite.unsupported_size(8, 33) is None
        True
        >>> print(lite.unsupported_size(8, 257))  # doctest: +NORMALIZE_WHITESPACE
        n=8, d=257 has 82971155 parameters (birkhoff, φ [n·d, 2n + 40320]), more than the
        declared max_parameters=12000000
        """
        rates = self.supported_expansion_rates
        if rates is not None and n not in rates:
            return (f"n={n} is not a declared expansion rate "
                    f"(supported_expansion_rates={rates})")
        if d % self.hidden_size_multiple:
            return (f"d={d} is not a multiple of the declared "
                    f"hidden_size_multiple={self.hidden_size_multiple}")
        return self.oversized(n, d) if parameters else None

    def oversized(self, n: int, d: int) -> str | None:
        """Why the declared :attr:`max_parameters` excludes ``(n, d)``, or None
        (:func:`hcspec.conformance.protocol.sizes.oversized`)."""
        return sizes.oversized(self.formula, self.max_parameters, n, d)

    def parameter_count(self, n: int, d: int) -> int:
        """The parameters of the mHC layout of the declared construction at ``(n, d)``
        (:func:`hcspec.conformance.protocol.sizes.parameter_count`).

        >>> Conventions().parameter_count(4, 8)
        795
        """
        return sizes.parameter_count(self.formula, n, d)

    def declared(self) -> dict[str, object]:
        """Every declaration by its constructor keyword, in the order of the fields: the
        fields, and the keywords of :attr:`formula` with its values (``formula`` itself only
        where it departs from the mHC step elsewhere: the ``h_pre`` multiplier, an
        activation, an orientation, DeepSeek-V4's logits map)."""
        f, sk = self.formula, self.formula.sinkhorn
        from_formula: dict[str, object] = {
            "sinkhorn_iterations": sk.iterations, "sinkhorn_exact_axis": sk.exact_axis,
            "sinkhorn_variant": sk.start, "sinkhorn_additive_eps": sk.additive_eps,
            "sinkhorn_denominator_eps": sk.denominator_eps,
            "sinkhorn_iterations_count": sk.count, "h_pre_eps": f.h_pre.eps,
            "h_post_eps": f.h_post.eps, "h_post_multiplier": f.h_post.multiplier,
            "h_res_construction": f.construction, "birkhoff_permutations": f.permutations,
            "h_pre_activation": f.h_pre.activation, "h_post_activation": f.h_post.activation}
        flat = Formula(h_pre=Gate(eps=f.h_pre.eps, activation=f.h_pre.activation), sinkhorn=sk,
                       h_post=Gate(f.h_post.multiplier, f.h_post.eps, f.h_post.activation),
                       construction=f.construction, permutations=f.permutations)
        out: dict[str, object] = {}
        for name in _DECLARATIONS:
            if name in from_formula:
                out[name] = from_formula[name]
            elif name != "formula" or f != flat:
                out[name] = getattr(self, name)
        return out

    def declared_fields(self) -> list[str]:
        """The constructor keywords whose values differ from their defaults, in the order of
        :meth:`declared`: what the impl declared (a declaration at its default value cannot be
        told apart, and needs no mention).

        >>> Conventions(reduce="mean", sinkhorn_iterations=10).declared_fields()
        ['reduce', 'sinkhorn_iterations']
        """
        default = Conventions().declared()
        return [name for name, value in self.declared().items()
                if name not in default or value != default[name]]

    def describe(self) -> dict[str, str]:
        """Every declaration (:meth:`declared`) as text, for reports (``None`` iterations shows
        the assumed default; a construction other than ``sinkhorn`` shows no Sinkhorn–Knopp
        field at all, and ``birkhoff_permutations`` only for ``birkhoff``)."""
        out: dict[str, str] = {}
        construction = self.formula.construction
        for name, value in self.declared().items():
            if construction != "sinkhorn" and name.startswith("sinkhorn_") and (
                    name != "sinkhorn_gradient"):
                continue
            if name == "birkhoff_permutations":
                if construction == "birkhoff":
                    out[name] = ("all n! (not declared)" if value is None else
                                 f"{len(cast(tuple[object, ...], value))} declared")
                continue
            if name == "sinkhorn_iterations" and value is None:
                out[name] = f"{DEFAULT_ITERATIONS} (not declared; mHC paper default assumed)"
            elif name in ("compute_dtype", "output_dtype") and value is None:
                out[name] = "input dtype"
            elif name == "weights_dtype" and value is None:
                out[name] = "output dtype"
            else:
                out[name] = str(value)
        return out

    @classmethod
    def from_mapping(cls, declared: Mapping[str, object]) -> Conventions:
        """Conventions from a plain mapping with the field names and constructor keywords
        above (a third party can declare ``conventions = {"sinkhorn_exact_axis": "columns"}``
        without importing the kit). ``compute_dtype``, ``output_dtype`` and ``weights_dtype``
        may be a ``torch.dtype`` or its name (``"float32"``).

        Raises:
            ConventionsError: a key that is not a field or keyword (a typo must not be
                ignored), or a value :class:`Conventions` rejects; the message names the key
                and the fields.
        """
        names = list(_DECLARATIONS)
        unknown = sorted(str(k) for k in declared if k not in names)
        if unknown:
            guesses = [f"{close[0]!r} for {k!r}" for k in unknown
                       if (close := difflib.get_close_matches(k, names, n=1, cutoff=0.6))]
            meant = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
            raise ConventionsError(
                f"impl.conventions: unknown field(s) {unknown}{meant}; the fields are {names}")
        values = dict(declared)
        for key in ("compute_dtype", "output_dtype", "weights_dtype"):
            dtype = values.get(key)
            if isinstance(dtype, str):
                resolved = getattr(torch, dtype.removeprefix("torch."), None)
                if not isinstance(resolved, torch.dtype):
                    raise ConventionsError(
                        f"impl.conventions: {key} {dtype!r} is not a torch dtype name")
                values[key] = resolved
        try:
            return cls(**cast(dict[str, Any], values))
        except (TypeError, ValueError) as exc:
            raise ConventionsError(str(exc)) from exc


_DECLARATIONS: Final[tuple[str, ...]] = tuple(Conventions.__dataclass_fields__)
"""The fields and constructor keywords of :class:`Conventions`, in declaration order."""


class ConventionsError(TypeError):
    """An impl's declared conventions cannot be read: not a :class:`Conventions` or a mapping
    of its fields, an unknown field, or a value outside the allowed ones."""


@runtime_checkable
class DeclaresConventions(Protocol):
    """Optional: an impl that declares its :class:`Conventions` (or a mapping of its
    fields)."""

    conventions: Conventions | Mapping[str, object]


def conventions_of(impl: object) -> Conventions:
    """The conventions ``impl`` declares, or the defaults.

    ``impl.conventions`` may be a :class:`Conventions` or a ``Mapping`` of its field names
    (:meth:`Conventions.from_mapping`). When it does not declare ``sinkhorn_iterations``, an
    int attribute ``impl.sinkhorn_iterations`` (as many modules keep) is used instead.

    Raises:
        ConventionsError: (a ``TypeError``) ``impl.conventions`` is neither, names an unknown
            field or holds an invalid value, or ``impl.sinkhorn_iterations`` is not an int ≥ 1.
    """
    declared = getattr(impl, "conventions", None)
    if declared is None:
        conventions = Conventions()
    elif isinstance(declared, Conventions):
        conventions = declared
    elif isinstance(declared, Mapping):
        conventions = Conventions.from_mapping(declared)
    else:
        raise ConventionsError(
            "impl.conventions: expected a hcspec.conformance.protocol.Conventions or a mapping "
            "of its "
            f"fields, got {type(declared).__name__}"
        )
    attribute = getattr(impl, "sinkhorn_iterations", None)
    if conventions.formula.sinkhorn.iterations is None and attribute is not None:
        if isinstance(attribute, bool) or not isinstance(attribute, int) or attribute < 1:
            raise ConventionsError(
                f"impl.sinkhorn_iterations: expected an int >= 1, got {attribute!r}")
        conventions = dataclasses.replace(conventions, sinkhorn_iterations=attribute)
    return conventions
