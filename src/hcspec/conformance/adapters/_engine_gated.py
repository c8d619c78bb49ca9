"""The gated (Qwen4-exp) residual modules of the serving engines as kit impls: SGLang 0.5.23's
and vLLM 0.33.0's ``GatedResidual`` share the interface ``mix(x) -> (x_in, residuals)`` and
``combine(out, residuals) -> X'`` with ``residuals[0]`` the streams and ``residuals[1]`` their
normalised copy (SGLang adds the decode gate partials, None off its CUDA decode path), and the
checkpoint's tensor names (``hc_norm``, ``input_mix_weight_down`` / ``_up``,
``block_inject_weight``).
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.protocol import Branch, Conventions

NAMES: Final = {"hc_norm.weight": "hc_norm.weight",
                "input_mix_weight_down": "input_mix_weight_down.weight",
                "input_mix_weight_up": "input_mix_weight_up.weight",
                "block_inject_weight": "block_inject_weight.weight"}
"""The ``qwen4-exp`` layout's names -> the module's state-dict keys."""


class EngineGated(nn.Module):
    """An engine's ``GatedResidual`` (a layer's site: ``mix``, the branch, ``combine``, as its
    decoder layer calls them) and its ``hyper_connection_mixer`` (``reduce``: ``mix(x)[0]``).
    The state ``[B,T,n,d]`` is the engine's ``[rows, n·d]`` (streams contiguous): ``[B,T]`` is
    flattened to rows and back. Dtype: the modules' (the kit's ``dtype``).
    """

    kind = "hc-dynamic"
    connection: Any
    mixer: Any

    def __init__(self, connection: nn.Module, mixer: nn.Module, n: int, d: int,
                 notes: str) -> None:
        super().__init__()
        self.connection, self.mixer, self.n, self.d = connection, mixer, n, d
        self.conventions = Conventions(
            compute_dtype=torch.float32, reduce="learned", residual_mixing="identity",
            read="elementwise", published="qwen4-exp", contiguous_input=True, notes=notes)

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, self.n * self.d)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``x [B,T,n,d] -> [B,T,n,d]``: ``mix``, the branch on ``x_in``, ``combine``."""
        lead = x.shape[:-2]
        mixed, residuals = self.connection.mix(self._rows(x))
        out = branch(mixed.reshape(*lead, self.d))
        written: torch.Tensor = self.connection.combine(out.reshape(-1, self.d), residuals)
        return written.reshape(*lead, self.n, self.d)

    def read_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_in [B,T,d], h_post [B,T,n])``: the engine's mix output, and its combine's
        injection weights read by combining a block output of ones into zero streams (the
        combine's ``R + h_post ⊗ out`` with ``R = 0``, ``out = 1``)."""
        lead = x.shape[:-2]
        mixed, residuals = self.connection.mix(self._rows(x))
        normed = residuals[1]
        ones = torch.ones(normed.shape[0], self.d, dtype=mixed.dtype, device=x.device)
        injected = self.connection.combine(
            ones, (torch.zeros_like(residuals[0]), *residuals[1:]))
        h_post = injected.reshape(*lead, self.n, self.d)[..., 0]
        return mixed.reshape(*lead, self.d), h_post

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """``h [B,T,d] -> [B,T,n,d]``: ``n`` copies, as the models widen their input."""
        wide = torch.cat([h for _ in range(self.n)], dim=-1)
        return wide.reshape(*h.shape[:-1], self.n, self.d)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The model's terminal read ``hyper_connection_mixer.mix(x)[0]``: ``[B,T,n,d] ->
        [B,T,d]``."""
        out: torch.Tensor = self.mixer.mix(self._rows(x))[0]
        return out.reshape(*x.shape[:-2], self.d)

    def published_parameters(self) -> dict[str, torch.Tensor | float]:
        """The ``qwen4-exp`` tensors of the site (Linear weights ``[out, in]``, as the layout)
        and the norm's ``variance_epsilon``."""
        c: Any = self.connection
        state = c.state_dict(keep_vars=True)
        params: dict[str, torch.Tensor | float] = {k: state[v] for k, v in NAMES.items()}
        params["norm_eps"] = float(c.hc_norm.variance_epsilon)
        return params

    def load_published(self, params: Any) -> None:
        """Set the site's tensors from a ``qwen4-exp`` mapping (the checkpoint's names,
        ``.weight`` added to the Linear ones, as the engines' weight loaders do)."""
        state = {NAMES[k]: v for k, v in params.items() if k in NAMES}
        self.connection.load_state_dict(state, strict=True)
