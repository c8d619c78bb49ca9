"""Shared machinery: every connection here is a per-token (n+1)×(n+1) matrix in the HC paper layout.

HC arXiv:2409.19606 §2.1, Eq. 1–5 write one hyper-connection as

    HC = [[0,   B  ],        B   ∈ R^{1×n}   (write-back weights, "depth connection")
          [A_m, A_r]]        A_m ∈ R^{n×1}   (read weights),  A_r ∈ R^{n×n} (stream mixing)

and the layer as ``Ĥ = Bᵀ T(Hᵀ A_m)ᵀ + A_rᵀ H`` with ``H ∈ R^{n×d}`` (streams are rows).
Internally this package keeps the streams on *columns*, ``S = Hᵀ ∈ R^{d×n}``, where the layer
reads ``Ŝ = Ĥᵀ = T(S A_m) B + S A_r`` (Alg. 2's width/depth connections), i.e. one matmul
``S [A_m | A_r]`` followed by a rank-1 update. The public boundary speaks the project's row
convention (docs/reference.md): ``X [B,T,n,d]`` in and out, and :meth:`weights` reports
``h_pre = A_m``, ``h_post = Bᵀ``, ``H_res = A_rᵀ``. The transposes happen only at that boundary.

Written independently of ``reference/`` (the false-positive check of the conformance kit).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

Branch = Callable[[Tensor], Tensor]

SUPPORTED_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_factory_arguments(
    n: object, d: object, layer_index: object, dtype: object, device: object, seed: object
) -> torch.device:
    """Validate the arguments of a ``make`` factory and return the resolved ``torch.device``.

    Raises:
        ValueError: ``n < 1``, ``d < 1``, ``layer_index < 0``, an unsupported dtype (supported:
            float64, float32, bfloat16, float16) or an unparsable device string.
        TypeError: a non-integer ``n``/``d``/``layer_index``/``seed`` or a non-dtype ``dtype``.
    """
    for name, value, least in (("n", n, 1), ("d", d, 1), ("layer_index", layer_index, 0)):
        if not _is_int(value):
            raise TypeError(f"{name}: expected int, got {type(value).__name__} ({value!r})")
        assert isinstance(value, int)
        if value < least:
            raise ValueError(f"{name}: expected an integer >= {least}, got {value}")
    if not _is_int(seed):
        raise TypeError(f"seed: expected int, got {type(seed).__name__} ({seed!r})")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype: expected a torch.dtype, got {type(dtype).__name__} ({dtype!r})")
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype: expected one of {SUPPORTED_DTYPES}, got {dtype}")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device: expected str or torch.device, got {type(device).__name__}")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device: expected e.g. 'cpu' or 'cuda', got {device!r}") from error


class PaperLayoutConnection(nn.Module):
    """Base class: subclasses supply the per-token paper matrix, this class applies it.

    Attributes ``n`` (expansion rate), ``d`` (hidden size), ``kind``. Subclasses implement
    :meth:`hc_matrix`. All tensors are ``[B, T, ...]``; every computation is token-wise.
    """

    kind: str = ""

    def __init__(self, n: int, d: int, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.n = n
        self.d = d
        self._built_dtype = dtype
        self._built_device = device

    # -- subclasses -----------------------------------------------------------------------
    def hc_matrix(self, x: Tensor) -> Tensor:
        """Paper-layout matrix ``[[0, B], [A_m, A_r]]`` per token.

        Shapes: ``x [B,T,n,d]`` -> ``[B,T,n+1,n+1]``.

        Dtype: may be wider than ``x`` (forward casts it to ``x.dtype``).
        """
        raise NotImplementedError

    # -- boundary checks --------------------------------------------------------------------
    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the parameters (follows ``.to(...)``); inputs must have this dtype."""
        for parameter in self.parameters():
            return parameter.dtype
        return self._built_dtype

    def _device(self) -> torch.device:
        for parameter in self.parameters():
            return parameter.device
        return self._built_device

    def _check_state(self, x: object, name: str = "x") -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor [B, T, n={self.n}, d={self.d}], "
                            f"got {type(x).__name__}")
        if x.ndim != 4 or tuple(x.shape[-2:]) != (self.n, self.d):
            raise ValueError(f"{name}: expected shape [B, T, n={self.n}, d={self.d}], "
                             f"got {tuple(x.shape)}")
        self._check_dtype_device(x, name)
        return x

    def _check_dtype_device(self, t: Tensor, name: str) -> None:
        if t.dtype != self.dtype:
            raise ValueError(f"{name}: expected dtype {self.dtype} (the dtype this connection was "
                             f"built with), got {t.dtype}")
        if t.device != self._device():
            raise ValueError(f"{name}: expected device {self._device()}, got {t.device}")

    # -- protocol ---------------------------------------------------------------------------
    def forward(self, x: Tensor, branch: Branch) -> Tensor:
        """One HC-wrapped sublayer: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` (HC Eq. 3–5, mHC Eq. 3).

        Shapes: ``x [B, T, n, d]`` -> ``[B, T, n, d]``; ``branch`` is called exactly once, on
        ``x_in [B, T, d]``, and must return ``[B, T, d]`` of the same dtype and device.
        Dtype/device: those the connection was built with; the output has the input's.

        Raises:
            TypeError: ``x`` or the branch output is not a tensor, ``branch`` is not callable.
            ValueError: wrong shape, dtype or device of ``x`` or of the branch output.
        """
        x = self._check_state(x)
        if not callable(branch):
            raise TypeError(f"branch: expected a callable [B,T,d] -> [B,T,d], got "
                            f"{type(branch).__name__}")
        matrix = self.hc_matrix(x).to(x.dtype)
        columns = x.transpose(-1, -2)                                # S = Xᵀ: [B, T, d, n]
        read_and_mix = matrix[..., 1:, :]                            # [A_m | A_r]: [B, T, n, n+1]
        mixed = columns @ read_and_mix                               # [S A_m | S A_r]: [B,T,d,n+1]
        x_in = mixed[..., 0].contiguous()                            # S A_m: [B, T, d]
        z = branch(x_in)
        if not isinstance(z, Tensor):
            raise TypeError(f"branch output: expected a torch.Tensor of shape "
                            f"{tuple(x_in.shape)}, got {type(z).__name__}")
        if z.shape != x_in.shape:
            raise ValueError(f"branch output: expected shape {tuple(x_in.shape)} ([B, T, d]), "
                             f"got {tuple(z.shape)}")
        self._check_dtype_device(z, "branch output")
        write = matrix[..., 0:1, 1:]                                 # B: [B, T, 1, n]
        new_columns = mixed[..., 1:] + z.unsqueeze(-1) * write       # S A_r + z B: [B, T, d, n]
        return new_columns.transpose(-1, -2).contiguous()

    def weights(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Effective per-token weights in the row convention, as :meth:`forward` uses them.

        Shapes: ``x [B,T,n,d]`` -> ``h_pre [B,T,n]`` (= A_m), ``h_post [B,T,n]`` (= Bᵀ),
        ``H_res [B,T,n,n]`` (= A_rᵀ), with ``X' = H_res X + h_post zᵀ`` and ``x_in = h_preᵀ X``.
        Dtype: that of ``x``.

        Raises:
            TypeError, ValueError: as :meth:`forward` for ``x``.
        """
        x = self._check_state(x)
        matrix = self.hc_matrix(x).to(x.dtype)
        h_pre = matrix[..., 1:, 0]
        h_post = matrix[..., 0, 1:]
        H_res = matrix[..., 1:, 1:].transpose(-1, -2)
        return h_pre, h_post, H_res

    def expand(self, h: Tensor) -> Tensor:
        """Network input: replicate the embedding on every stream, ``X₀ = 1_n h₀ᵀ`` (HC §2, Fig. 2).

        Shapes: ``h [B, T, d]`` -> ``[B, T, n, d]`` (a fresh tensor; never aliases ``h``).

        Raises:
            TypeError, ValueError: ``h`` not a tensor, or not ``[B, T, d]`` of this dtype/device.
        """
        if not isinstance(h, Tensor):
            raise TypeError(f"h: expected a torch.Tensor [B, T, d={self.d}], got "
                            f"{type(h).__name__}")
        if h.ndim != 3 or h.shape[-1] != self.d:
            raise ValueError(f"h: expected shape [B, T, d={self.d}], got {tuple(h.shape)}")
        self._check_dtype_device(h, "h")
        batch, tokens, _ = h.shape
        replicated = h.unsqueeze(-2).expand(batch, tokens, self.n, self.d)
        return replicated.clone(memory_format=torch.contiguous_format)

    def reduce(self, x: Tensor) -> Tensor:
        """Network output: sum the streams, ``h_L = 1ᵀ X_L`` (HC §2; before the final norm).

        Shapes: ``x [B, T, n, d]`` -> ``[B, T, d]``.

        Raises:
            TypeError, ValueError: as :meth:`forward` for ``x``.
        """
        return self._check_state(x).sum(dim=-2)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, n={self.n}, d={self.d}, dtype={self.dtype}"
