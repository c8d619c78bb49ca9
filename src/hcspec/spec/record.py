"""The records of a hyper-connected step's degrees of freedom: one frozen, ``Literal``-typed
value per place where implementations of the same paper's step differ.

* :class:`SinkhornSpec`: the Sinkhorn–Knopp variant that makes ``H_res`` (spec
  ``mhc.sinkhorn_variants``): the positive start, what the iteration count counts, the axis
  normalised last, the two epsilons, the count itself.
* :class:`Gate`: an element-wise gate ``c·σ(h̃) + ε`` (mHC Eq. 8: ``h_pre`` and ``h_post``).
* :class:`Formula`: the mHC / DeepSeek-V4 step, ``kind = "mhc"``: the two gates, the
  :class:`SinkhornSpec`, the orientation of ``H_res``, and the two places DeepSeek-V4's
  logits map (mHC Eq. 7) can depart (the ``hc_scale`` blocks, where the RMS norm sits).

A conformance target declares its step with a :class:`Formula`
(``hcspec.conformance.protocol.Conventions.formula``); the published layouts state theirs
(:mod:`hcspec.spec.published`); the torch statements of these formulas
(:mod:`hcspec.formulas`) compute with them; the kit's divergence searches move through them.
The gated step without Sinkhorn–Knopp (Qwen4-exp) is the record beside it,
:class:`GatedFormula` (``kind = "gated"``), and :data:`StepFormula` is the union of the two,
discriminated by ``kind``.

Pure data: the standard library only (no sympy, no torch), so every layer can read it.
Every record validates itself on construction and raises ``ValueError`` naming the field.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias, get_args

Start = Literal["exp", "softmax", "sigmoid"]
"""The positive map before the normalisations: ``exp`` (mHC Eq. 9), ``softmax`` along one axis
(DeepSeek-V4), ``sigmoid``."""
Count = Literal["rounds", "rounds_from_softmax", "normalisations"]
"""What the iteration count counts: ``rounds`` (one normalisation of each axis),
``rounds_from_softmax`` (the softmax is the first normalisation of the first round),
``normalisations`` (single normalisations)."""
Axis = Literal["rows", "columns"]
"""An axis of a matrix: ``rows`` (each row sums to 1 after its normalisation) or ``columns``."""
Activation = Literal["sigmoid", "softmax"]
"""A gate's activation: ``sigmoid`` (mHC Eq. 8: σ; with multiplier 2 the paper's ``2σ``) or
``softmax`` over the n streams (the gate then sums to its multiplier)."""
Construction = Literal["sinkhorn", "birkhoff", "orthostochastic"]
"""How ``H_res`` is made from its logits: ``sinkhorn`` (mHC Eq. 9, :class:`SinkhornSpec`),
``birkhoff`` (mHC-lite, arXiv 2601.05732: ``Σ_k softmax(a)_k P_k`` over a set of permutation
matrices, exactly doubly stochastic) or ``orthostochastic`` (an orthogonal factor ``Q`` of the
logits by Newton–Schulz iterations, then ``Q ∘ Q``)."""
Norm = Literal["input", "projection"]
"""Where DeepSeek-V4's RMS norm sits: on ``vec(X)`` before the projection (``input``,
published) or on the projection's output (``projection``)."""

STARTS: Final[tuple[Start, ...]] = get_args(Start)
COUNTS: Final[tuple[Count, ...]] = get_args(Count)
AXES: Final[tuple[Axis, ...]] = get_args(Axis)
NORMS: Final[tuple[Norm, ...]] = get_args(Norm)
ACTIVATIONS: Final[tuple[Activation, ...]] = get_args(Activation)
CONSTRUCTIONS: Final[tuple[Construction, ...]] = get_args(Construction)
DEFAULT_NEWTON_SCHULZ: Final = 10
"""The Newton–Schulz iterations assumed for ``orthostochastic`` when none is declared."""

DEFAULT_ITERATIONS: Final = 20
"""The mHC paper's ``t_max`` (§4.2, Eq. 9): the count assumed when none is declared."""


def _one_of(where: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{where}: expected one of {allowed}, got {value!r}")


def _eps(where: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0.0 <= value < 1.0):
        raise ValueError(f"{where}: expected 0 <= eps < 1, got {value!r}")


@dataclass(frozen=True)
class SinkhornSpec:
    """A Sinkhorn–Knopp variant (spec ``mhc.sinkhorn_variants``): ``M⁰ = start(H̃) +
    additive_eps``, then the normalisations ``count`` and ``iterations`` give, alternating
    and ending with ``exact_axis``, each dividing by the axis sum plus ``denominator_eps``.

    The defaults are the mHC paper (Eq. 9: ``exp``, column then row normalisation, no eps);
    DeepSeek-V4 is ``SinkhornSpec("softmax", "rounds_from_softmax", "columns", ε, ε, t)`` in
    its ``comb``'s own indexing.

    Attributes:
        start: the positive map (:data:`Start`).
        count: what ``iterations`` counts (:data:`Count`); ``"rounds_from_softmax"`` needs
            ``start="softmax"``.
        exact_axis: the axis normalised last (its sums are exact without eps).
        additive_eps: added to every entry of the positive start; 0 means none.
        denominator_eps: added to every normalisation's denominator; 0 means none.
        iterations: the count, an int ≥ 1; ``None``: not declared (a target's declaration
            that leaves it out), :data:`DEFAULT_ITERATIONS` assumed
            (:attr:`effective_iterations`).

    Raises:
        ValueError: a value outside the ones above (the message names the field).
    """

    start: Start = "exp"
    count: Count = "rounds"
    exact_axis: Axis = "rows"
    additive_eps: float = 0.0
    denominator_eps: float = 0.0
    iterations: int | None = None

    def __post_init__(self) -> None:
        _one_of("sinkhorn.start", self.start, STARTS)
        _one_of("sinkhorn.count", self.count, COUNTS)
        _one_of("sinkhorn.exact_axis", self.exact_axis, AXES)
        _eps("sinkhorn.additive_eps", self.additive_eps)
        _eps("sinkhorn.denominator_eps", self.denominator_eps)
        if self.count == "rounds_from_softmax" and self.start != "softmax":
            raise ValueError("sinkhorn.count: 'rounds_from_softmax' needs start='softmax'")
        t = self.iterations
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ValueError(f"sinkhorn.iterations: expected an int >= 1 or None, got {t!r}")

    @property
    def effective_iterations(self) -> int:
        """``iterations``, or :data:`DEFAULT_ITERATIONS` when it is not declared."""
        return self.iterations or DEFAULT_ITERATIONS


@dataclass(frozen=True)
class Gate:
    """An element-wise gate ``h = multiplier · activation(h̃) + eps`` (mHC Eq. 8: ``h_pre =
    σ(h̃_pre)``, ``h_post = 2σ(h̃_post)``; DeepSeek-V4 adds ``hc_eps`` to ``h_pre``).

    Attributes:
        multiplier: ``c``, a finite number > 0.
        eps: added after the activation, ``0 <= eps < 1``; 0 means none.
        activation: :data:`Activation`.

    Raises:
        ValueError: a value outside the ones above (the message names the field).
    """

    multiplier: float = 1.0
    eps: float = 0.0
    activation: Activation = "sigmoid"

    def __post_init__(self) -> None:
        c = self.multiplier
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (
                c > 0.0 and math.isfinite(c)):
            raise ValueError(f"gate.multiplier: expected a finite number > 0, got {c!r}")
        _eps("gate.eps", self.eps)
        _one_of("gate.activation", self.activation, ACTIVATIONS)


@dataclass(frozen=True)
class Formula:
    """The mHC step's degrees of freedom (``kind = "mhc"``: mHC Eq. 7–9 and DeepSeek-V4's
    form of them): ``h_pre = h_pre(H̃_pre)``, ``h_post = h_post(H̃_post)``, ``H_res`` the
    :attr:`sinkhorn` variant of ``H̃_res`` (of ``H̃_resᵀ`` when :attr:`logits_transposed`),
    transposed when :attr:`transposed`. The defaults are the mHC paper's.

    Attributes:
        kind: the discriminator of :data:`StepFormula` (``"mhc"``).
        h_pre: the gate making ``h_pre`` (mHC: ``σ``).
        h_post: the gate making ``h_post`` (mHC: ``2σ``).
        sinkhorn: the Sinkhorn–Knopp variant making ``H_res``.
        transposed: ``H_res`` is the transpose of the variant's result (DeepSeek-V4 mixes
            ``combᵀ X``: its ``comb[i, j]`` is input stream i into output stream j).
        logits_transposed: the variant is applied to ``H̃_resᵀ`` (the logits read in the other
            orientation).
        scales: which ``hc_scale`` entry the (pre, post, comb) logit blocks use (DeepSeek-V4's
            logits map; published ``(0, 1, 2)``), a permutation of ``(0, 1, 2)``.
        norm: where DeepSeek-V4's RMS norm sits (:data:`Norm`; published ``"input"``).
        construction: how ``H_res`` is made (:data:`Construction`); :attr:`sinkhorn` is read
            only for ``"sinkhorn"``.
        permutations: ``birkhoff`` only: the permutation set, each a tuple ``p`` with
            ``P[i, p[i]] = 1``, all of one length n; ``None`` means all n! in lexicographic
            order (:func:`birkhoff_permutations`). The logits are ``[..., len(set)]``.
        newton_schulz_iterations: ``orthostochastic`` only: the iterations
            ``X ← 1.5 X − 0.5 X Xᵀ X`` from ``X₀ = H̃/‖H̃‖_F``, an int ≥ 1.

    Raises:
        ValueError: a value outside the ones above (the message names the field).
    """

    kind: Literal["mhc"] = "mhc"
    h_pre: Gate = field(default=Gate())
    h_post: Gate = field(default=Gate(multiplier=2.0))
    sinkhorn: SinkhornSpec = field(default=SinkhornSpec())
    transposed: bool = False
    logits_transposed: bool = False
    scales: tuple[int, int, int] = (0, 1, 2)
    norm: Norm = "input"
    construction: Construction = "sinkhorn"
    permutations: tuple[tuple[int, ...], ...] | None = None
    newton_schulz_iterations: int = DEFAULT_NEWTON_SCHULZ

    def __post_init__(self) -> None:
        _one_of("formula.kind", self.kind, ("mhc",))
        _one_of("formula.construction", self.construction, CONSTRUCTIONS)
        _permutations(self.construction, self.permutations)
        t = self.newton_schulz_iterations
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise ValueError(f"formula.newton_schulz_iterations: expected an int >= 1, got {t!r}")
        for name, cls in (("h_pre", Gate), ("h_post", Gate), ("sinkhorn", SinkhornSpec)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"formula.{name}: expected a {cls.__name__}, got "
                                 f"{getattr(self, name)!r}")
        for name in ("transposed", "logits_transposed"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"formula.{name}: expected a bool, got {getattr(self, name)!r}")
        if tuple(sorted(self.scales)) != (0, 1, 2):
            raise ValueError(f"formula.scales: expected a permutation of (0, 1, 2), got "
                             f"{self.scales!r}")
        _one_of("formula.norm", self.norm, NORMS)


def _permutations(construction: str,
                  perms: tuple[tuple[int, ...], ...] | None) -> None:
    if perms is None:
        return
    if construction != "birkhoff":
        raise ValueError("formula.permutations: only a 'birkhoff' construction has a "
                         f"permutation set (construction={construction!r})")
    if not isinstance(perms, tuple) or not perms:
        raise ValueError(f"formula.permutations: expected a non-empty tuple, got {perms!r}")
    n = len(perms[0]) if isinstance(perms[0], tuple) else -1
    for p in perms:
        if not isinstance(p, tuple) or len(p) != n or sorted(p) != list(range(n)):
            raise ValueError(f"formula.permutations: {p!r} is not a permutation of "
                             f"range({n}) (every member has one length n)")


_ALL_PERMUTATIONS: dict[int, tuple[tuple[int, ...], ...]] = {}
"""All n! permutations by n, made once (a plain dict: torch.compile traces a cache-wrapped
function with a warning)."""


def _all_permutations(n: int) -> tuple[tuple[int, ...], ...]:
    if n not in _ALL_PERMUTATIONS:
        _ALL_PERMUTATIONS[n] = tuple(itertools.permutations(range(n)))
    return _ALL_PERMUTATIONS[n]


def birkhoff_permutations(formula: Formula, n: int) -> tuple[tuple[int, ...], ...]:
    """The permutation set of a ``birkhoff`` formula at ``n`` streams: its declared one, or
    all ``n!`` in lexicographic order (``itertools.permutations(range(n))``).

    Raises:
        ValueError: the declared set's length is not ``n``.
    """
    if formula.permutations is None:
        return _all_permutations(n)
    if len(formula.permutations[0]) != n:
        raise ValueError(f"formula.permutations: declared for n={len(formula.permutations[0])}"
                         f", used at n={n}")
    return formula.permutations


@dataclass(frozen=True)
class GatedFormula:
    """The gated step's degrees of freedom (``kind = "gated"``: Qwen4-exp's gated residual,
    spec theorems ``gated.*`` and ``published.qwen4_exp_step``); the defaults are the published
    ones. Per token, streams ``X ∈ R^{n×d}``: ``N_s = (norm_offset + w_s) ⊙ rms(X_s)``, the
    element-wise gate ``G = act(U silu(D vec(N) / n))``, ``x_in = (1/n) Σ_s G_s ⊙ N_s``,
    ``h_post = c σ(W vec(N) / n)``, ``X' = X + h_post F(x_in)ᵀ`` (``H_res = I``).

    Attributes:
        kind: the discriminator of :data:`StepFormula` (``"gated"``).
        streams: ``"mean"`` (x_in = (1/n) Σ_s, published) or ``"sum"``.
        gate_input: ``"normalised"`` (the gate reads N, published) or ``"raw"`` (reads X).
        gate_scale_n: the silu's input is ``D vec(N) / n`` (published True) or ``D vec(N)``.
        inject_scale_n: the inject's logits are ``W vec(N) / n`` (published True) or
            ``W vec(N)``.
        post_multiplier: ``c`` in ``h_post = c σ(·)`` (published 2), a finite number > 0.
        inject_input: ``"normalised"`` (published) or ``"raw"``.
        gate_after_mean: False (published: x_in = mean_s(G_s ⊙ N_s)); True: the gate is applied
            after the mean, x_in = mean_s(G_s) ⊙ mean_s(N_s).
        norm_offset: the norm's scale is ``norm_offset + w`` (published 1: zero-initialised
            w), a finite number.
        gate_activation: ``"sigmoid"`` (published: G ∈ (0, 1)) or ``"tanh"`` (G ∈ (−1, 1)).

    Raises:
        ValueError: a field outside its values (named).
    """

    streams: Literal["mean", "sum"] = "mean"
    gate_input: Literal["normalised", "raw"] = "normalised"
    gate_scale_n: bool = True
    inject_scale_n: bool = True
    post_multiplier: float = 2.0
    inject_input: Literal["normalised", "raw"] = "normalised"
    gate_after_mean: bool = False
    norm_offset: float = 1.0
    gate_activation: Literal["sigmoid", "tanh"] = "sigmoid"
    kind: Literal["gated"] = "gated"

    def __post_init__(self) -> None:
        _one_of("gated.streams", self.streams, ("mean", "sum"))
        _one_of("gated.gate_input", self.gate_input, ("normalised", "raw"))
        _one_of("gated.inject_input", self.inject_input, ("normalised", "raw"))
        _one_of("gated.gate_activation", self.gate_activation, ("sigmoid", "tanh"))
        _one_of("gated.kind", self.kind, ("gated",))
        for name in ("gate_scale_n", "inject_scale_n", "gate_after_mean"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"gated.{name}: expected a bool, got {getattr(self, name)!r}")
        c = self.post_multiplier
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (
                c > 0.0 and math.isfinite(c)):
            raise ValueError(f"gated.post_multiplier: expected a finite number > 0, got {c!r}")
        o = self.norm_offset
        if isinstance(o, bool) or not isinstance(o, (int, float)) or not math.isfinite(o):
            raise ValueError(f"gated.norm_offset: expected a finite number, got {o!r}")


StepFormula: TypeAlias = Formula | GatedFormula
"""Every step record, discriminated by ``kind``: ``"mhc"`` (:class:`Formula`) or ``"gated"``
(:class:`GatedFormula`)."""
