"""The vocabulary of :mod:`hcspec.conformance.adapters.deepseek_v4_style`: what a user gives the
helper (how ``comb`` is oriented, the module's decomposition, the callables that build, reduce,
stack and run the package's decoder layer) and what a target declares (:class:`V4Style`,
:class:`PublishedTensors`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import torch
from torch import nn

from hcspec.conformance.protocol import Branch, Conventions, Kind

CombOrientation = Literal["source_target", "target_source"]
"""How ``comb`` is indexed: ``"source_target"``: ``comb[i, j]`` is the weight of input stream
``i`` in output stream ``j`` (``X' = combᵀ X``: ``H_res = combᵀ``, the paper's stored
``A_r``); ``"target_source"``: ``comb[j, i]`` (``X' = comb X``: ``H_res = comb``, the kit's row
form)."""


ComposeDtype = Literal["input", "float32"]
"""Where the caller composes: ``"input"`` (``post`` and ``comb`` cast to the state's dtype
first, as transformers' decoder layer does) or ``"float32"`` (composed in float32, then cast
to the declared output dtype)."""


class Decomposition(NamedTuple):
    """What a DeepSeek-V4-style module gives for one state ``X [B, T, n, d]``.

    Attributes:
        pre: ``[B, T, n]`` read weights (``h_pre``); may be ``None`` only when ``collapsed``
            is given (``weights`` then needs the factory's ``read_pre``).
        post: ``[B, T, n]`` write weights (``h_post``).
        comb: ``[B, T, n, n]`` mixing matrix, oriented as the target's ``comb`` says; ``None``
            for a module without one (declared ``residual_mixing="identity"``: the caller adds
            the streams unchanged, ``X'_j = post_j · F(collapsed) + X_j``).
        collapsed: ``[B, T, d]`` the branch input the module computed itself (``Σ_i pre_i
            X_i`` in its own precision), or ``None``: then the helper computes it from
            ``pre`` in the declared ``compute_dtype`` (the state's dtype where that is finer
            or none is declared) and rounds it once to the state's dtype.
    """

    pre: torch.Tensor | None
    post: torch.Tensor
    comb: torch.Tensor | None
    collapsed: torch.Tensor | None = None


Build = Callable[[int, int, int], nn.Module]
"""``build(n, d, layer_index) -> module``: the user's module, initialised (the helper calls it
under the factory's seed, then moves it to the device and, unless kept in float32, the
dtype). ``layer_index`` is 0-based; a package that counts from 1 gets ``layer_index + 1``."""


Decompose = Callable[[Any, torch.Tensor], Decomposition]
"""``decompose(module, x [B, T, n, d]) -> Decomposition``: call the module on the state."""


Reduce = Callable[[Any, torch.Tensor], torch.Tensor]
"""``reduce(module, x [B, T, n, d]) -> [B, T, d]``: a learned reduction head."""


Logits = Callable[[Any, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
"""``logits(module, x [B, T, n, d]) -> (pre [B,T,n], post [B,T,n], comb [B,T,n,n])``: the
module's pre-activation logits (the arguments of σ, c·σ and Sinkhorn–Knopp), ``comb``'s in
the orientation the target declares; the target offers them to the kit as ``logits(x)`` in the
row form (the variant family then checks the declared Sinkhorn variant at identical logits).
"""


LayerStep = Callable[[torch.Tensor, Branch], torch.Tensor]
"""``step(x [B, T, n, d], branch) -> X' [B, T, n, d]``: one step of the package's own decoder
layer with the target's module as the hyper-connection of its first site, ``branch``
(``[..., d] -> [..., d]``, called once) in place of that site's sublayer and norm, and the
other site the identity step (:func:`identity_site`). What the layer returns is the target's
output (cast to the declared output dtype)."""


DecoderLayerOf = Callable[[Any], LayerStep]
"""``layer_of(module) -> step`` (:data:`LayerStep`): the package's decoder layer built around
the target's module, once per impl (so ``forward`` does no construction and stays traceable by
``torch.compile``)."""


class IdentitySite(NamedTuple):
    """The coefficients of a site that leaves the streams unchanged: with a zero sublayer,
    ``X' = post·0 + combᵀ X = X`` exactly (``post = 0``, ``comb = I``), whatever the
    orientation; for neutralising a decoder layer's second site (:data:`LayerStep`).

    Attributes:
        pre: ``[B, T, n]`` zeros. post: ``[B, T, n]`` zeros. comb: ``[B, T, n, n]`` the
        identity. collapsed: ``[B, T, d]`` zeros.
    """

    pre: torch.Tensor
    post: torch.Tensor
    comb: torch.Tensor
    collapsed: torch.Tensor


def identity_site(x: torch.Tensor) -> IdentitySite:
    """:class:`IdentitySite` for the state ``x [..., n, d]``, in float32 (as DeepSeek-V4's
    modules return their coefficients) on ``x``'s device; ``collapsed`` in ``x``'s dtype."""
    *lead, n, d = x.shape
    zeros = torch.zeros(*lead, n, dtype=torch.float32, device=x.device)
    eye = torch.eye(n, dtype=torch.float32, device=x.device).expand(*lead, n, n)
    return IdentitySite(zeros, zeros.clone(), eye,
                        torch.zeros(*lead, d, dtype=x.dtype, device=x.device))


ReadPre = Callable[[Any, torch.Tensor], torch.Tensor]
"""``read_pre(module, x [B, T, n, d]) -> pre [B, T, n]``: for a module that consumes ``pre``
itself; called by ``weights`` only, so ``forward`` stays the module's plain call (e.g.
traceable by ``torch.compile``)."""


@dataclass(frozen=True)
class V4Style:
    """How the caller composes the module's outputs, and what the target declares.

    Attributes:
        comb: the orientation of ``comb`` (:data:`CombOrientation`).
        conventions: the declared conventions (Sinkhorn variant, eps, multiplier, dtypes...).
        kind: the kit's kind; ``"mhc"`` for a Sinkhorn-projected ``comb``, ``"hc-dynamic"``
            for an unconstrained one.
        compose_dtype: :data:`ComposeDtype`.
        keep_float32: the module's parameters stay float32 whatever the factory's dtype (as a
            model's ``_keep_in_fp32_modules``); otherwise they are cast to it.
    """

    comb: CombOrientation
    conventions: Conventions
    kind: Kind = "mhc"
    compose_dtype: ComposeDtype = "input"
    keep_float32: bool = False

    def __post_init__(self) -> None:
        if self.comb not in ("source_target", "target_source"):
            raise ValueError(
                f"comb: expected 'source_target' or 'target_source', got {self.comb!r}")
        if self.compose_dtype not in ("input", "float32"):
            raise ValueError(f"compose_dtype: expected 'input' or 'float32', got "
                             f"{self.compose_dtype!r}")


@dataclass(frozen=True)
class PublishedTensors:
    """Where a module keeps a published parameterization's tensors
    (:mod:`hcspec.reference.published`).

    Attributes:
        layout: the layout's name (``"deepseek-v4"``).
        keys: layout tensor name -> the module's parameter name (as ``named_parameters``
            and ``state_dict`` spell it).
        settings: ``settings(module)`` -> the layout's settings the module uses (``hc_eps``,
            ``norm_eps``, ``sinkhorn_iters``), read from the module's configuration.
    """

    layout: str
    keys: Mapping[str, str]
    settings: Callable[[Any], Mapping[str, float]] = field(default=lambda module: {})

    def read(self, module: nn.Module) -> dict[str, object]:
        """The layout's tensors (the module's own parameters) and settings.

        Raises:
            KeyError: a key the module does not have (named).
        """
        own = dict(module.named_parameters())
        missing = [k for k in self.keys.values() if k not in own]
        if missing:
            raise KeyError(f"published {self.layout}: the module has no parameter "
                           f"{', '.join(missing)}")
        out: dict[str, object] = {name: own[key] for name, key in self.keys.items()}
        out.update(self.settings(module))
        return out

    def load(self, module: nn.Module, params: Mapping[str, object]) -> None:
        """Set the module's parameters from the layout's tensors through its own
        ``load_state_dict`` (which checks the shapes and casts to the parameters' dtype).

        Raises:
            KeyError: a layout tensor missing from ``params``. RuntimeError: as
            ``load_state_dict`` (a wrong shape).
        """
        state = {self.keys[name]: params[name] for name in self.keys}
        module.load_state_dict(state, strict=False)
