"""Black-box probing: read an implementation's effective weights through the branch the kit
injects, even when the implementation hides them.

For one token with state ``X ∈ R^{n×d}`` and ``X' = H_res X + h_post F(x_in)ᵀ``:

* branch ``F ≡ 0`` gives ``X'(0) = H_res X``; with ``d > n`` and ``X`` of full row rank,
  ``H_res = X'(0) X⁺`` (pseudo-inverse), and ``X'(0) − H_res X`` measures whether the output is
  a linear mix of the streams at all;
* a constant branch ``F ≡ c`` gives ``X'(c) − X'(0) = h_post cᵀ``, so
  ``h_post = (X'(c) − X'(0)) c / |c|²`` (c is drawn at X's magnitude, so the difference does
  not cancel to rounding noise at extreme scales);
* the branch sees ``x_in = h_preᵀ X`` (convention ``"x_in"``), so ``h_pre = (X⁺)ᵀ x_in``;
* the identity branch gives ``X'(id) − X'(0) = h_post x_inᵀ``, a consistency check of the two.

All probe arithmetic is float64 on the CPU. Source: HC arXiv:2409.19606 Eq. 3–5, mHC
arXiv:2512.24880 Eq. 3, in the row form ``X' = H_res X + h_post zᵀ`` (spec theorem
``layout.paper_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from hcspec.conformance import strategies
from hcspec.conformance.protocol import Branch, Conventions, HyperConnectionImpl


class ProbeError(Exception):
    """The implementation cannot be probed as called (e.g. it never called the branch, or
    returned something that is not a ``[B, T, n, d]`` tensor); the message says what."""


@dataclass(frozen=True)
class ProbedWeights:
    """Weights read through the branch, float64 on the CPU.

    Attributes:
        h_pre: ``[B, T, n]``, or ``None`` when the declared branch input is a norm of
            ``x_in`` (then ``h_pre`` is only identifiable up to scale).
        h_post: ``[B, T, n]``.
        H_res: ``[B, T, n, n]``.
        branch_input: what the branch received with ``F ≡ 0`` ``[B, T, d]``.
        outputs: the outputs ``X'`` for the zero, constant and identity branches.
        residuals: scaled errors of the probe identities — ``"mix"`` (``X'(0) − H_res X``),
            ``"write"`` (``X'(c) − X'(0) − h_post cᵀ``), ``"read"`` (``x_in − h_preᵀ X``),
            ``"identity"`` (``X'(id) − X'(0) − h_post x_inᵀ``).
        sensitivity: per probed weight (``"h_pre"``, ``"h_post"``, ``"H_res"``, same shape as
            it), how far it moves at most, to first order, when every entry of the outputs and
            the branch input it is read from moves by its own magnitude times ``u``, divided by
            ``u``: ``|X'(0)| |X⁺|`` for H_res, ``(|X'(c)| + |X'(0)|) |c| / cᵀc`` for h_post,
            ``|x_in| |X⁺|`` for h_pre. Times the unit roundoff of the dtype the target rounds
            them to, it is how much rounding alone can move the probe (large where X is
            ill-conditioned, d close to n).
    """

    h_pre: torch.Tensor | None
    h_post: torch.Tensor
    H_res: torch.Tensor
    branch_input: torch.Tensor
    outputs: dict[str, torch.Tensor]
    residuals: dict[str, float]
    sensitivity: dict[str, torch.Tensor] = field(default_factory=dict)


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(device="cpu", dtype=torch.float64)


def _scaled(diff: torch.Tensor, scale: torch.Tensor) -> float:
    if diff.numel() == 0:
        return 0.0
    if not torch.isfinite(diff).all():
        return float("inf")
    return float(diff.abs().max()) / max(1.0, float(scale.abs().max()))


def forward_on_copy(impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch) -> torch.Tensor:
    """``impl.forward(x.clone(), branch)``, unchecked: the impl receives a copy of the kit's
    state, so a forward that modifies its input in place cannot change the tensor the kit
    computes its expectations from. Such a forward is diagnosed once, by
    ``state.input_unchanged`` (which passes the state itself), instead of surfacing as law,
    independence or determinism failures whose messages point elsewhere. The copy is an
    autograd ``clone``: gradients w.r.t. ``x`` flow through it unchanged."""
    return impl.forward(x.clone(), branch)


def call(
    impl: HyperConnectionImpl, x: torch.Tensor, branch: strategies.CountingBranch,
    *, copy: bool = True,
) -> torch.Tensor:
    """``impl.forward(x, branch)`` with the output checked to be a ``[B, T, n, d]`` tensor; on
    a copy of ``x`` (:func:`forward_on_copy`) unless ``copy=False``.

    Raises:
        ProbeError: the output is not a tensor of ``x``'s shape (message: expected vs got), or
            the branch was not called.
    """
    out = forward_on_copy(impl, x, branch) if copy else impl.forward(x, branch)
    if not isinstance(out, torch.Tensor):
        raise ProbeError(f"forward returned {type(out).__name__}, expected a tensor")
    if out.shape != x.shape:
        raise ProbeError(
            f"forward returned shape {list(out.shape)}, expected {list(x.shape)} (= input)"
        )
    if branch.calls == 0:
        raise ProbeError("forward never called the branch")
    return out


def probe(
    impl: HyperConnectionImpl, x: torch.Tensor, conventions: Conventions, seed: int = 0,
) -> ProbedWeights:
    """Probe ``impl`` at ``x [B, T, n, d]`` (needs ``d > n`` and each token's ``X`` of full row
    rank, which Gaussian states have with probability 1).

    Raises:
        ProbeError: see :func:`call`; also ``d ≤ n`` (H_res not identifiable).
    """
    n, d = x.shape[-2:]
    if d <= n:
        raise ProbeError(f"probing H_res needs d > n, got n={n}, d={d}")
    dtype, device = x.dtype, str(x.device)
    with torch.no_grad():
        zero = strategies.CountingBranch(strategies.make_branch("zero", d, dtype, device))
        out0 = _f64(call(impl, x, zero))
        # c at the state's magnitude: X'(c) − X'(0) must not cancel to rounding noise
        magnitude = max(float(x.detach().abs().max()), float(torch.finfo(dtype).tiny))
        unit = strategies.make_branch("constant", d, dtype, device, seed=seed)

        def const_fn(t: torch.Tensor) -> torch.Tensor:
            return unit(t) * magnitude

        const = strategies.CountingBranch(const_fn)
        out_c = _f64(call(impl, x, const))
        ident = strategies.CountingBranch(strategies.make_branch("identity", d, dtype, device))
        out_id = _f64(call(impl, x, ident))
    X = _f64(x)
    X_pinv = torch.linalg.pinv(X)  # [B, T, d, n]
    H_res = out0 @ X_pinv
    c = _f64(const_fn(torch.zeros(d, dtype=dtype, device=device)))  # the constant F returns
    h_post = ((out_c - out0) @ c) / float(c @ c)
    x_in = _f64(zero.inputs[0])
    x_in_id = _f64(ident.inputs[0])
    scale = torch.cat([X.flatten(), out0.flatten()])
    residuals = {
        "mix": _scaled(out0 - H_res @ X, scale),
        "write": _scaled(out_c - out0 - h_post.unsqueeze(-1) * c,
                         torch.cat([scale, out_c.flatten()])),
        "identity": _scaled(
            out_id - out0 - h_post.unsqueeze(-1) * x_in_id.unsqueeze(-2),
            torch.cat([scale, out_id.flatten()]),
        ),
    }
    sensitivity = {"H_res": out0.abs() @ X_pinv.abs(),
                   "h_post": ((out_c.abs() + out0.abs()) @ c.abs()) / float(c @ c)}
    h_pre: torch.Tensor | None = None
    if conventions.branch_input == "x_in":
        h_pre = (x_in.unsqueeze(-2) @ X_pinv).squeeze(-2)
        residuals["read"] = _scaled(
            x_in - (h_pre.unsqueeze(-2) @ X).squeeze(-2), torch.cat([X.flatten(), x_in.flatten()])
        )
        sensitivity["h_pre"] = (x_in.abs().unsqueeze(-2) @ X_pinv.abs()).squeeze(-2)
    return ProbedWeights(
        h_pre=h_pre, h_post=h_post, H_res=H_res, branch_input=x_in,
        outputs={"zero": out0, "constant": out_c, "identity": out_id},
        residuals=residuals, sensitivity=sensitivity,
    )
