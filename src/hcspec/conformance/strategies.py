"""Public hypothesis strategies for HC/mHC tests: shapes, cases, stream states, logits, doubly
stochastic matrices and branches (sublayers ``F``).

Tensors are not drawn element by element: a strategy draws a seed and a magnitude, and the
tensor is generated from them with a seeded ``torch.Generator`` (float64 on the CPU, then cast
and moved). That keeps examples cheap, shrinks to small seeds and magnitudes, and makes every
counterexample reproducible from a few integers (see :class:`Case`).

Use them in your own tests (``@given(hst.cases(max_n=4))`` on a test function); one case,
its state and its branch:

>>> import torch
>>> from hcspec.conformance import strategies as hst
>>> case = hst.Case(batch=2, tokens=3, n=4, d=8, seed=1)
>>> x = hst.stream_state(case, torch.float64)
>>> x.shape
torch.Size([2, 3, 4, 8])
>>> branch = hst.make_branch(case.branch, case.d, torch.float64, seed=case.seed)
>>> branch(x[..., 0, :]).shape
torch.Size([2, 3, 8])
>>> torch.equal(x, hst.stream_state(case, torch.float64))  # the same case, the same state
True
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import torch
from hypothesis import strategies as st

from hcspec.conformance import profiles, salts
from hcspec.conformance.protocol import Branch
from hcspec.conformance.salts import Salt

BRANCHES: Final[tuple[str, ...]] = (
    "zero", "constant", "identity", "linear", "mlp", "token_mixing",
)
"""Branch names: ``zero`` (F ≡ 0), ``constant`` (F ≡ c), ``identity``, ``linear`` (x W),
``mlp`` (tanh(x W₁) W₂, smooth so gradients are well defined), ``token_mixing`` (a causal
running mean over the token axis followed by a linear map: the only branch that is not
token-wise)."""

TOKEN_WISE_BRANCHES: Final[tuple[str, ...]] = tuple(b for b in BRANCHES if b != "token_mixing")
SMOOTH_BRANCHES: Final[tuple[str, ...]] = ("linear", "mlp")
"""Branches with a non-trivial Jacobian (used by the gradient properties)."""

NORMAL_SCALES: Final[tuple[float, ...]] = (1.0, 0.1, 10.0)
EXTREME_SCALES: Final[tuple[float, ...]] = (1e-6, 1e-3, 1e3, 1e6)
PERTURBATIONS: Final[tuple[float, ...]] = (0.0, 0.1, 0.3, 1.0)
"""Std of the Gaussian noise added to every exposed parameter (0: the factory's init)."""


@dataclass(frozen=True)
class Case:
    """One example a property checks; every tensor in it is generated from these numbers.

    Attributes:
        batch, tokens, n, d: the state shape ``[B, T, n, d]``.
        layer_index: passed to the factory (static HC init: ``h_pre = e_{k mod n}``).
        seed: seeds the factory, the state, the branch and the perturbation.
        scale: magnitude of the stream state (entries ``N(0, scale²)``).
        perturb: std of the noise added to the impl's parameters (0: at init).
        param_scale: factor applied to the parameters after the perturbation (stress tests).
        branch: one of :data:`hcspec.conformance.BRANCHES`.
    """

    batch: int = 2
    tokens: int = 3
    n: int = 4
    d: int = 8
    layer_index: int = 0
    seed: int = 0
    scale: float = 1.0
    perturb: float = 0.0
    param_scale: float = 1.0
    branch: str = "mlp"

    def __post_init__(self) -> None:
        for name in ("batch", "tokens", "n", "d"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Case.{name}: expected a positive int, got {value!r}")
        if self.layer_index < 0 or self.seed < 0:
            raise ValueError(
                f"Case: layer_index and seed must be >= 0, got {self.layer_index}, {self.seed}"
            )
        if self.branch not in BRANCHES:
            raise ValueError(f"Case.branch: expected one of {BRANCHES}, got "
                             f"{self.branch!r}")
        if not (self.scale > 0 and self.perturb >= 0 and self.param_scale > 0):
            raise ValueError(
                "Case: scale and param_scale must be > 0 and perturb >= 0, got "
                f"{self.scale}, {self.perturb}, {self.param_scale}"
            )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(B, T, n, d)``."""
        return (self.batch, self.tokens, self.n, self.d)

    def fields_at_default(self) -> list[str]:
        """The names of the fields that hold their default value, in field order."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) == f.default]

    def to_json(self) -> str:
        """Compact JSON (the CLI's ``--case`` reads it back with :meth:`from_json`)."""
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Case:
        """Parse :meth:`to_json` output (missing fields take their defaults).

        Raises:
            ValueError: not a JSON object, an unknown field, or an invalid value.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--case: expected a JSON object, got {text!r} ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"--case: expected a JSON object, got {text!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"--case: unknown fields {unknown}; expected some of {sorted(known)}")
        return cls(**data)


def _generator(seed: int, salt: int) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed((seed * 1_000_003 + salt) % (2**63 - 1))
    return gen


def gaussian(
    shape: Sequence[int], seed: int, salt: int, dtype: torch.dtype, device: str = "cpu",
    std: float = 1.0,
) -> torch.Tensor:
    """``N(0, std²)`` entries of ``shape``, generated in float64 on the CPU from ``(seed, salt)``
    and then cast to ``dtype`` and moved to ``device`` (so every dtype/device sees the same
    values up to rounding)."""
    values = torch.randn(tuple(shape), generator=_generator(seed, salt), dtype=torch.float64)
    return (values * std).to(device=device, dtype=dtype)


def stream_state(
    case: Case, dtype: torch.dtype, device: str = "cpu", salt: Salt = salts.STATE,
) -> torch.Tensor:
    """The stream state ``X [B, T, n, d]`` of ``case`` (entries ``N(0, case.scale²)``), drawn
    with ``salt`` (:mod:`hcspec.conformance.salts`: another salt gives an independent state)."""
    return gaussian(case.shape, case.seed, salt.at(), dtype, device, std=case.scale)


class CountingBranch:
    """Wraps a branch, counting calls and keeping each call's input (detached clones kept
    only when ``record=True``)."""

    def __init__(self, fn: Branch, record: bool = True) -> None:
        self.fn = fn
        self.record = record
        self.calls = 0
        self.inputs: list[torch.Tensor] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.record and isinstance(x, torch.Tensor):
            self.inputs.append(x.detach().clone())
        return self.fn(x)


def make_branch(
    name: str, d: int, dtype: torch.dtype, device: str = "cpu", seed: int = 0,
) -> Branch:
    """The branch ``F: [B, T, d] -> [B, T, d]`` called ``name`` (one of :data:`BRANCHES`), with
    its constants generated from ``seed`` in ``dtype`` on ``device``. Every branch accepts any
    leading axes except ``token_mixing``, which needs ``[B, T, d]``.

    Raises:
        ValueError: unknown ``name``.
    """
    if name == "zero":
        return torch.zeros_like
    if name == "identity":
        return lambda x: x
    if name == "constant":
        c = gaussian((d,), seed, salts.BRANCH_CONSTANT.at(), dtype, device)
        return lambda x: c.expand_as(x)
    scale = 1.0 / math.sqrt(d)
    w1 = gaussian((d, d), seed, salts.BRANCH_FIRST_WEIGHT.at(), dtype, device, std=scale)
    if name == "linear":
        return lambda x: x @ w1
    w2 = gaussian((d, d), seed, salts.BRANCH_SECOND_WEIGHT.at(), dtype, device, std=scale)
    if name == "mlp":
        return lambda x: torch.tanh(x @ w1) @ w2
    if name == "token_mixing":
        def mix(x: torch.Tensor) -> torch.Tensor:
            if x.dim() != 3:
                raise ValueError(f"token_mixing branch: expected [B, T, d], got {tuple(x.shape)}")
            counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device)
            running_mean = x.cumsum(dim=1) / counts.view(1, -1, 1)
            return torch.tanh(running_mean @ w1) @ w2
        return mix
    raise ValueError(f"unknown branch {name!r}; expected one of {BRANCHES}")


def shapes(
    max_batch: int = 3, max_tokens: int = 4, min_n: int = 1, max_n: int = 4, max_d: int = 12,
    d_more_than_n: bool = False, n_values: Sequence[int] | None = None,
    ragged_d: Sequence[int] = (),
) -> st.SearchStrategy[tuple[int, int, int, int]]:
    """``(B, T, n, d)`` with ``1 ≤ B ≤ max_batch``, ``1 ≤ T ≤ max_tokens``,
    ``min_n ≤ n ≤ max_n`` (or ``n`` one of ``n_values`` when given) and ``1 ≤ d ≤ max_d`` or
    ``d`` one of ``ragged_d`` (``d > n`` when ``d_more_than_n``, as the pseudo-inverse probe
    of H_res needs: a ragged ``d ≤ n`` is then raised to ``n + 1``)."""
    n_strategy = (st.integers(min_n, max_n) if n_values is None
                  else st.sampled_from(tuple(n_values)))
    ragged = tuple(sorted(set(ragged_d)))

    @st.composite
    def build(draw: Any) -> tuple[int, int, int, int]:
        b = draw(st.integers(1, max_batch))
        t = draw(st.integers(1, max_tokens))
        n = draw(n_strategy)
        low = n + 1 if d_more_than_n else 1
        d = draw(st.integers(low, max(max_d, n + 2)))
        if ragged and draw(st.booleans()):
            d = max(draw(st.sampled_from(ragged)), low)
        return (b, t, n, d)

    return build()


def cases(
    *,
    max_batch: int = 3,
    max_tokens: int = 4,
    min_n: int = 1,
    max_n: int = 4,
    max_d: int = 12,
    d_more_than_n: bool = True,
    min_batch: int = 1,
    branches: Sequence[str] = TOKEN_WISE_BRANCHES,
    perturbations: Sequence[float] = PERTURBATIONS,
    scales: Sequence[float] = NORMAL_SCALES,
    param_scales: Sequence[float] = (1.0,),
    max_layer_index: int = 7,
    n_values: Sequence[int] | None = None,
    ragged_d: Sequence[int] = (),
) -> st.SearchStrategy[Case]:
    """:class:`Case` examples (shapes as :func:`shapes` draws them). Shrinks towards the
    first listed branch, perturbation, scale and parameter scale, and towards small shapes,
    seeds and layer indices. The same bounds give the same strategy object (strategies are
    immutable; building one parses its function's source, a few milliseconds, and most
    properties of a run share their bounds)."""
    return _cases(max_batch, max_tokens, min_n, max_n, max_d, d_more_than_n, min_batch,
                  tuple(branches), tuple(perturbations), tuple(scales), tuple(param_scales),
                  max_layer_index, None if n_values is None else tuple(n_values),
                  tuple(ragged_d))


@functools.lru_cache(maxsize=256)
def _cases(
    max_batch: int, max_tokens: int, min_n: int, max_n: int, max_d: int, d_more_than_n: bool,
    min_batch: int, branches: tuple[str, ...], perturbations: tuple[float, ...],
    scales: tuple[float, ...], param_scales: tuple[float, ...], max_layer_index: int,
    n_values: tuple[int, ...] | None = None, ragged_d: tuple[int, ...] = (),
) -> st.SearchStrategy[Case]:
    """:func:`cases` with hashable bounds, built once per bounds."""
    # The inner strategies are built once, not per draw: building a composite strategy parses
    # its function's source (hypothesis checks how ``draw`` is used), several milliseconds each
    # time. Drawing from the same strategies in the same order draws the same cases.
    shape = shapes(max_batch, max_tokens, min_n, max_n, max_d, d_more_than_n, n_values,
                   ragged_d)
    layer, seed = st.integers(0, max_layer_index), st.integers(0, 2**16)
    scale, perturb = st.sampled_from(tuple(scales)), st.sampled_from(tuple(perturbations))
    param_scale, branch = st.sampled_from(tuple(param_scales)), st.sampled_from(tuple(branches))

    @st.composite
    def build(draw: Any) -> Case:
        b, t, n, d = draw(shape)
        b = max(b, min_batch)
        return Case(
            batch=b, tokens=t, n=n, d=d,
            layer_index=draw(layer),
            seed=draw(seed),
            scale=draw(scale),
            perturb=draw(perturb),
            param_scale=draw(param_scale),
            branch=draw(branch),
        )

    return build()


def stream_states(
    shape: tuple[int, int, int, int], dtype: torch.dtype = torch.float64,
    scales: Sequence[float] = NORMAL_SCALES + EXTREME_SCALES,
) -> st.SearchStrategy[torch.Tensor]:
    """Stream states ``X`` of ``shape`` with Gaussian entries at one of ``scales`` (extreme
    magnitudes included by default)."""
    return st.builds(
        lambda seed, scale: gaussian(shape, seed, salts.STATE.at(), dtype, std=scale),
        st.integers(0, 2**16), st.sampled_from(tuple(scales)),
    )


def logits(
    n: int, dtype: torch.dtype = torch.float64,
    stds: Sequence[float] = (0.01, 0.3, 1.0, 3.0, 10.0, 1e2, 1e4),
) -> st.SearchStrategy[torch.Tensor]:
    """``n×n`` Sinkhorn–Knopp logits with Gaussian entries of one of ``stds`` (large ones
    stress overflow: a plain-domain ``exp`` overflows float64 beyond ~709)."""
    return st.builds(
        lambda seed, std: gaussian((n, n), seed, salts.LOGITS.at(), dtype, std=std),
        st.integers(0, 2**16), st.sampled_from(tuple(stds)),
    )


def doubly_stochastic_matrices(
    n: int, dtype: torch.dtype = torch.float64, max_terms: int = 4,
) -> st.SearchStrategy[torch.Tensor]:
    """Exactly constructed doubly stochastic ``n×n`` matrices: convex combinations of up to
    ``max_terms`` permutation matrices (Birkhoff–von Neumann: these are all of them), including
    the permutations themselves (the vertices, spec ``ds.permutation_vertices``)."""
    perms = list(itertools.permutations(range(n))) if n <= 6 else None

    @st.composite
    def build(draw: Any) -> torch.Tensor:
        k = draw(st.integers(1, max_terms))
        weights = draw(st.lists(st.integers(1, 100), min_size=k, max_size=k))
        total = sum(weights)
        out = torch.zeros(n, n, dtype=torch.float64)
        for w in weights:
            if perms is not None:
                perm = draw(st.sampled_from(perms))
            else:
                perm = tuple(draw(st.permutations(list(range(n)))))
            out[torch.arange(n), torch.tensor(perm)] += w / total
        return out.to(dtype)

    return build()


def branch_names(token_wise_only: bool = False) -> st.SearchStrategy[str]:
    """Names of branches (see :data:`BRANCHES`)."""
    return st.sampled_from(TOKEN_WISE_BRANCHES if token_wise_only else BRANCHES)


profiles.register_with_hypothesis()  # users' own tests can load_profile("hcspec-ci")

