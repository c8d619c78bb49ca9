"""HCTransformer: init equivalences (HC §2.2, Eq. 14), the √n output init, causality, dtypes."""

from __future__ import annotations

import pytest
import torch

from hcspec.reference import (
    DynamicHyperConnection,
    HCTransformer,
    ManifoldHyperConnection,
    StaticHyperConnection,
)
from hcspec.reference.transformer import CONNECTIONS

VOCAB, D, LAYERS, HEADS, N = 37, 16, 4, 2, 4


def _model(connection: str, *, seed: int = 0, **kw: object) -> HCTransformer:
    torch.manual_seed(seed)
    return HCTransformer(VOCAB, D, LAYERS, HEADS, N, connection, dtype=torch.float64, **kw)  # type: ignore[arg-type]


def _tokens(seed: int = 1, batch: int = 3, length: int = 12) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _copy_branch_weights(source: HCTransformer, target: HCTransformer) -> None:
    """Load every non-connection parameter of ``source`` into ``target``."""
    target_keys = set(target.state_dict())
    shared = {k: v for k, v in source.state_dict().items() if k in target_keys}
    assert set(shared) == target_keys, "residual must have no parameter the HC model lacks"
    target.load_state_dict(shared)


def test_static_init_equals_residual_with_the_same_branch_weights() -> None:
    # ε = 0: the final RMSNorm then removes the factor n of the stream sum exactly.
    hc = _model("hc-static", norm_eps=0.0)
    residual = _model("residual", seed=1, norm_eps=0.0)
    _copy_branch_weights(hc, residual)
    tokens = _tokens()
    torch.testing.assert_close(hc(tokens), residual(tokens), rtol=0, atol=1e-10)


def test_static_init_equals_residual_up_to_the_final_norm_epsilon() -> None:
    # With ε > 0, RMSNorm(n·h; ε) = RMSNorm(h; ε/n²): the only difference, and exactly that.
    hc = _model("hc-static", norm_eps=1e-3)
    residual = _model("residual", seed=1, norm_eps=1e-3)
    _copy_branch_weights(hc, residual)
    tokens = _tokens()
    assert (hc(tokens) - residual(tokens)).abs().max() > 1e-6  # ε matters at this scale
    residual.final_norm.eps = 1e-3 / N**2
    torch.testing.assert_close(hc(tokens), residual(tokens), rtol=0, atol=1e-10)


def test_dynamic_init_equals_static_init() -> None:
    static, dynamic = _model("hc-static"), _model("hc-dynamic")
    tokens = _tokens()
    torch.testing.assert_close(dynamic(tokens), static(tokens), rtol=0, atol=0)


def test_mhc_without_its_dynamic_part_equals_residual() -> None:
    # α = 0: H_pre = σ(0) = 1/2, H_post = 2σ(0) = 1, H_res = SK(b_res) row-stochastic, so the
    # replicated streams stay replicated and the branch reads (n/2)·h, which its RMSNorm
    # (ε = 0) undoes: the network is the residual one. Checks mHC's wiring in the stack.
    mhc = _model("mhc", norm_eps=0.0)
    for module in mhc.modules():
        if isinstance(module, ManifoldHyperConnection):
            with torch.no_grad():
                for alpha in (module.alpha_pre, module.alpha_post, module.alpha_res):
                    alpha.zero_()
    residual = _model("residual", seed=1, norm_eps=0.0)
    _copy_branch_weights(mhc, residual)
    tokens = _tokens()
    torch.testing.assert_close(mhc(tokens), residual(tokens), rtol=0, atol=1e-10)
    mhc_live = _model("mhc", norm_eps=0.0)
    assert (mhc_live(tokens) - residual(tokens)).abs().max() > 1e-8  # the α-term is live


@pytest.mark.parametrize(("mode", "factor"), [("divide", 0.5), ("multiply", 2.0), ("off", 1.0)])
def test_sqrt_n_output_init(mode: str, factor: float) -> None:
    hc = _model("hc-static", output_init=mode)
    residual = _model("residual")  # same seed, n = 1: nothing scaled
    hc_state, res_state = hc.state_dict(), residual.state_dict()
    for key, value in res_state.items():
        scaled = key.endswith(("attn.out.weight", "ffn.down.weight"))
        expected = value * factor if scaled else value
        assert torch.equal(hc_state[key], expected), key


def test_connection_layer_indices_and_types() -> None:
    for connection, cls in (
        ("hc-static", StaticHyperConnection),
        ("hc-dynamic", DynamicHyperConnection),
        ("mhc", ManifoldHyperConnection),
    ):
        model = _model(connection)
        conns = [m for m in model.modules() if isinstance(m, cls)]
        assert [c.layer_index for c in conns] == list(range(2 * LAYERS))
        assert all((c.n, c.d) == (N, D) for c in conns)
    assert _model("residual").n == 1


def test_parameter_counts_match_hc_formulas() -> None:
    base = sum(p.numel() for p in _model("residual").parameters())
    extra = {c: sum(p.numel() for p in _model(c).parameters()) - base for c in CONNECTIONS}
    sublayers = 2 * LAYERS
    assert extra["residual"] == 0
    assert extra["hc-static"] == sublayers * (N**2 + 2 * N)  # HC: SHC adds 2L(n² + 2n)
    assert extra["hc-dynamic"] == sublayers * ((N + 2) * D + N**2 + 2 * N + 2)
    assert extra["mhc"] == sublayers * (N * D * (N**2 + 2 * N) + N**2 + 2 * N + 3)


@pytest.mark.parametrize("connection", CONNECTIONS)
def test_causal_and_trainable(connection: str) -> None:
    model = _model(connection)
    tokens = _tokens()
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % VOCAB
    logits = model(tokens)
    assert logits.shape == (3, 12, VOCAB)
    torch.testing.assert_close(model(changed)[:, :7], logits[:, :7], rtol=0, atol=1e-12)
    assert (model(changed)[:, 7:] - logits[:, 7:]).abs().max() > 1e-6
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("connection", CONNECTIONS)
def test_bfloat16_close_to_float32(connection: str) -> None:
    torch.manual_seed(0)
    model32 = HCTransformer(VOCAB, D, 2, HEADS, N, connection)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model16 = HCTransformer(VOCAB, D, 2, HEADS, N, connection, dtype=torch.bfloat16)  # type: ignore[arg-type]
    tokens = _tokens()
    expected, got = model32(tokens), model16(tokens)
    assert got.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    scale = expected.abs().max().item()
    assert (got.float() - expected).abs().max().item() < 0.05 * scale


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="connection must be one of"):
        HCTransformer(VOCAB, D, 1, HEADS, N, "hc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output_init must be one of"):
        HCTransformer(VOCAB, D, 1, HEADS, N, "mhc", output_init="half")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d=16 must be divisible by n_heads=3"):
        HCTransformer(VOCAB, D, 1, 3, N, "mhc")
    with pytest.raises(ValueError, match="n must be a positive integer"):
        HCTransformer(VOCAB, D, 1, HEADS, 0, "hc-static")
    model = HCTransformer(VOCAB, D, 1, HEADS, N, "hc-static", max_seq_len=8)
    with pytest.raises(ValueError, match=r"integer token ids of shape \[B, T\], got \(\(2, 3, 4\)"):
        model(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="integer token ids"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_seq_len=8"):
        model(torch.zeros(2, 9, dtype=torch.long))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device available")
@pytest.mark.parametrize("connection", CONNECTIONS)
def test_cuda_matches_cpu(connection: str) -> None:
    cpu = _model(connection)
    gpu = HCTransformer(VOCAB, D, LAYERS, HEADS, N, connection, dtype=torch.float64,  # type: ignore[arg-type]
                        device="cuda")
    gpu.load_state_dict(cpu.state_dict())
    tokens = _tokens()
    got = gpu(tokens.cuda())
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), cpu(tokens), rtol=1e-9, atol=1e-9)
