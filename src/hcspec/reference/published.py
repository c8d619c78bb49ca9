"""Published parameterizations: the step each named parameter layout defines, written plainly.

A *published parameterization* is the layout of tensors a checkpoint or a paper gives one
hyper-connected sublayer, and the formulas that turn those tensors and the stream state
``X [B, T, n, d]`` into the per-token weights. Each one maps onto this project's row form
``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` (spec theorems ``published.*``), so one step is
:func:`step`: :func:`weights` then :func:`hcspec.reference.step.apply_connection`.
The formulas (:class:`Layout`, :func:`weights`) live in the formulas layer,
:mod:`hcspec.formulas.published`, and are re-exported here.

The formulas of every layout (``deepseek-v4``, ``mhc-paper``, ``hc-static``, ``hc-dynamic``),
each written out with its tensors, settings and paper equations, are stated once in
:mod:`hcspec.formulas.published`'s docstring; a step's record,
:class:`~hcspec.spec.record.Formula` (the published ones: :func:`formula`), names each place an
implementation can depart from the DeepSeek-V4 one.

Dtype/device: every function computes in the dtype and on the device of ``x`` (parameters are
cast to it), so float64 inputs give the float64 oracle the kit compares with; gradients flow
to the given tensors. Parameters are a ``Mapping`` from the layout's names to tensors; settings
(plain numbers) may be in the same mapping, else the layout's defaults apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

# The layouts' formulas are stated once, in the formulas layer (also the conformance kit's
# oracle for the published family); the reference re-exports them and runs them through its
# own connection.
from hcspec.formulas.published import (
    LAYOUTS,
    Layout,
    Parameters,
    check_parameters,
    deepseek_v4_logits,
    layout,
    weights,
)
from hcspec.reference.step import Branch, Weights, apply_connection
from hcspec.spec.published import (
    DEEPSEEK_V4,
    DEEPSEEK_V4_FORMULA,
    HC_DYNAMIC,
    HC_STATIC,
    MHC_PAPER,
    PARAMETERIZATIONS,
    SOURCES,
    formula,
)
from hcspec.spec.record import Formula

__all__ = [
    "DEEPSEEK_V4", "DEEPSEEK_V4_FORMULA", "HC_DYNAMIC", "HC_STATIC", "LAYOUTS", "MHC_PAPER",
    "PARAMETERIZATIONS", "SOURCES", "Branch", "Formula", "Layout", "NameMap", "Parameters",
    "Published", "Weights", "check_parameters", "deepseek_v4_logits", "formula", "layout",
    "step", "weights",
]


def step(name: str, params: Parameters, x: torch.Tensor, branch: Branch,
         formula: Formula | None = None) -> torch.Tensor:
    """One step of layout ``name``: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with
    :func:`weights` (``formula``: an mHC layout's record, None: the layout's own at the
    settings of ``params``); ``x [B,T,n,d] -> [B,T,n,d]`` in ``x``'s dtype; ``branch`` called
    once.

    Raises:
        as :func:`weights` and :func:`hcspec.reference.step.apply_connection`.
    """
    return apply_connection(x, branch, *weights(name, params, x, formula))


# --- a module's own tensors under a layout's names ------------------------------------------
@dataclass(frozen=True)
class NameMap:
    """How a module's parameters give a layout's tensors.

    Attributes:
        layout: the layout's name.
        attributes: layout tensor name -> the module's attribute holding it.
        transposed: the layout tensors stored transposed (2-D) in the module.
        settings: layout setting name -> the module's attribute holding it.
    """

    layout: str
    attributes: Mapping[str, str]
    transposed: frozenset[str] = frozenset()
    settings: Mapping[str, str] = field(default_factory=dict)

    def read(self, module: object) -> dict[str, object]:
        """The layout's tensors as views of ``module``'s own parameters (differentiable, so
        a gradient w.r.t. them reaches the parameters), and its settings."""
        out: dict[str, object] = {}
        for key, attribute in self.attributes.items():
            tensor = getattr(module, attribute)
            out[key] = tensor.transpose(0, 1) if key in self.transposed else tensor
        for key, attribute in self.settings.items():
            out[key] = getattr(module, attribute)
        return out

    def load(self, module: object, params: Parameters) -> None:
        """Copy the layout's tensors of ``params`` into ``module``'s parameters (cast to
        their dtype and device), in place, without autograd; the settings given in
        ``params`` (plain numbers) are set too.

        Raises:
            ValueError, TypeError: as :func:`check_parameters` (``module`` has ``n``, ``d``).
        """
        sized: Any = module
        check_parameters(self.layout, params, int(sized.n), int(sized.d))
        with torch.no_grad():
            for key, attribute in self.attributes.items():
                source = params[key]
                assert isinstance(source, torch.Tensor)
                if key in self.transposed:
                    source = source.transpose(0, 1)
                target = getattr(module, attribute)
                target.copy_(source.to(dtype=target.dtype, device=target.device))
        for key, attribute in self.settings.items():
            value = params.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(module, attribute, type(getattr(module, attribute))(value))


class Published:
    """Mixin for a module whose parameters are a layout's (its class sets :attr:`NAMES`):
    the kit's optional ``published_parameters()`` and ``load_published(params)``."""

    NAMES: ClassVar[NameMap]

    def published_parameters(self) -> dict[str, object]:
        """The layout's tensors as views of this module's own parameters, and its settings
        (:meth:`NameMap.read`)."""
        return self.NAMES.read(self)

    def load_published(self, params: Parameters) -> None:
        """Set this module's parameters from ``params`` in the layout (:meth:`NameMap.load`).

        Raises:
            ValueError, TypeError: a missing tensor, a wrong shape, a non-tensor entry.
        """
        self.NAMES.load(self, params)
