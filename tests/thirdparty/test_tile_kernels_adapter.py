"""The TileKernels adapter: loading the reference file by path, the orientation and dtype mapping
on a stand-in checkout (always runs), and the package's own references (skipped where the
``tile-kernels`` distribution is absent)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from hcspec.conformance.adapters import tile_kernels as adapter

try:
    importlib.metadata.distribution("tile-kernels")
    HAVE_PACKAGE = True
except importlib.metadata.PackageNotFoundError:
    HAVE_PACKAGE = False
needs_package = pytest.mark.skipif(not HAVE_PACKAGE, reason="tile-kernels is not installed")

# A stand-in for tile_kernels/torch/mhc.py written for this test: the same function names and
# shapes, with weights that do not depend on the state (pre = 0.25, post = multiplier · 0.5) and
# a fixed asymmetric comb; mhc_pre_apply_mix_ref rounds to bfloat16 as the contract says.
STANDIN = '''
import torch

def mhc_pre_norm_fn_ref(residual, fn, norm_weight, eps):
    return torch.zeros(*residual.shape[:2], fn.shape[0])

def mhc_pre_split_mixes_ref(mixes, scale, base, n, post_mult_value, pre_eps):
    a, b = mixes.shape[:2]
    pre = torch.full((a, b, n, 1), 0.25)
    post = torch.full((a, b, n, 1), 0.5 * post_mult_value)
    comb = torch.arange(n * n, dtype=torch.float32).reshape(n, n).expand(a, b, n, n)
    return pre, post, comb

def sinkhorn_normalize_ref(x, repeat=10, eps=1e-6):
    return x

def mhc_pre_apply_mix_ref(x, mix):
    return (x * mix).sum(-2).bfloat16()

def mhc_head_compute_mix_ref(input_mix, scale, base, eps):
    return torch.full(input_mix.shape, 0.5)
'''


@pytest.fixture
def standin_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / adapter.REFERENCE_FILE
    target.parent.mkdir(parents=True)
    target.write_text(STANDIN, encoding="utf-8")
    monkeypatch.setenv(adapter.CHECKOUT_ENV, str(tmp_path))
    return tmp_path


def test_checkout_is_loaded_by_path_and_comb_is_transposed(standin_checkout: Path) -> None:
    n, d = 3, 4
    impl = adapter.make(n, d, post_mult_value=2.0)
    assert "tile_kernels" not in sys.modules
    x = torch.randn(2, 5, n, d, dtype=torch.float64)
    _, h_post, H_res = impl.weights(x)
    comb = torch.arange(n * n, dtype=torch.float64).reshape(n, n)
    assert torch.equal(H_res[1, 2].double(), comb.T)  # mhc_post contracts comb's first axis
    assert torch.equal(h_post[0, 0].double(), torch.ones(n, dtype=torch.float64))
    branch = nn.Linear(d, d).double()
    out = impl.forward(x, branch)
    assert out.dtype == torch.bfloat16  # declared output_dtype
    collapsed = (0.25 * x).sum(2).bfloat16().double()  # the branch sees the rounded values
    want = comb.T @ x + branch(collapsed).unsqueeze(2)
    assert torch.allclose(out.double(), want.bfloat16().double(), atol=0, rtol=2 ** -7)
    assert impl.conventions.formula.h_post.multiplier == 2.0
    assert torch.equal(impl.reduce(x).double(), (0.5 * x).sum(2).bfloat16().double())


def test_the_reference_file_is_loaded_by_the_factory_not_by_forward(
        standin_checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the file inside forward is Python TorchDynamo cannot trace (compile.fullgraph
    failed on the adapter); forward must use the module the factory loaded, which is
    registered under a private name so that TorchDynamo can look it up."""
    n, d = 2, 3
    impl = adapter.make(n, d)
    path = standin_checkout / adapter.REFERENCE_FILE
    loaded = sys.modules[adapter.module_name(str(path))]
    assert Path(loaded.__file__ or "") == path

    def no_loading(*args: object) -> None:
        raise AssertionError("the reference file was loaded during forward")

    monkeypatch.setattr(adapter, "load_reference", no_loading)
    monkeypatch.setattr(adapter, "_load", no_loading)
    x = torch.randn(1, 2, n, d, dtype=torch.float64)
    assert impl.forward(x, nn.Identity()).shape == x.shape
    assert impl.reduce(x).shape == (1, 2, d)


def test_two_checkouts_in_one_process_are_two_modules(
        standin_checkout: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second checkout loaded after the first does not replace the first one's module in
    ``sys.modules`` (TorchDynamo would look the first impl's functions up in the second's)."""
    n, d = 2, 3
    first = adapter.make(n, d)
    other = tmp_path_factory.mktemp("other-checkout")
    (other / adapter.REFERENCE_FILE).parent.mkdir(parents=True)
    (other / adapter.REFERENCE_FILE).write_text(
        STANDIN.replace("torch.full((a, b, n, 1), 0.25)", "torch.full((a, b, n, 1), 0.75)"),
        encoding="utf-8")
    monkeypatch.setenv(adapter.CHECKOUT_ENV, str(other))
    second = adapter.make(n, d)
    names = [adapter.module_name(str(root / adapter.REFERENCE_FILE))
             for root in (standin_checkout, other)]
    assert names[0] != names[1]
    files = [Path(sys.modules[name].__file__ or "") for name in names]
    assert files == [standin_checkout / adapter.REFERENCE_FILE, other / adapter.REFERENCE_FILE]
    x = torch.randn(1, 2, n, d, dtype=torch.float64)
    assert torch.equal(first.weights(x)[0].double(), torch.full((1, 2, n), 0.25,
                                                                dtype=torch.float64))
    assert torch.equal(second.weights(x)[0].double(), torch.full((1, 2, n), 0.75,
                                                                 dtype=torch.float64))


def test_missing_checkout_says_what_to_do(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(adapter.CHECKOUT_ENV, str(tmp_path))
    with pytest.raises(ImportError, match=r"no tile_kernels/torch/mhc\.py there"):
        adapter.make(2, 3)


def test_targets_are_usable_only_where_the_reference_file_is(
        standin_checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hcspec.conformance.subjects import targets

    builtin = targets.BUILTIN["tile_kernels:mhc"]
    assert targets.package_problem(builtin) is None  # the stand-in checkout has the file
    empty = standin_checkout / "empty"
    empty.mkdir()
    monkeypatch.setenv(adapter.CHECKOUT_ENV, str(empty))  # a checkout without the file
    problem = targets.package_problem(builtin)
    assert problem is not None and "no tile_kernels/torch/mhc.py there" in problem
    row = next(r for r in targets.builtin_status() if r.target.name == "tile_kernels:mhc")
    assert not row.importable
    with pytest.raises(targets.TargetError, match="needs the package 'tile-kernels'"):
        targets.resolve("tile_kernels:mhc-post2")


def test_declared_conventions() -> None:
    one, two = adapter.conventions(1.0), adapter.conventions(2.0)
    assert (one.formula.h_post.multiplier, two.formula.h_post.multiplier) == (1.0, 2.0)
    assert one.output_dtype == torch.bfloat16 and one.compute_dtype == torch.float32
    sk = one.formula.sinkhorn
    assert (sk.start, sk.count, sk.iterations, sk.exact_axis) == (
        "softmax", "rounds_from_softmax", 10, "rows")


@needs_package
def test_composition_equals_mhc_post_ref(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(adapter.CHECKOUT_ENV, raising=False)
    ref = adapter.load_reference()
    assert "tile_kernels" not in sys.modules and "tilelang" not in sys.modules
    n, d = 4, 16
    impl = adapter.make(n, d, seed=2, post_mult_value=2.0)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(3, 7, n, d).bfloat16().double()  # a bfloat16 residual, as in the model
    branch = nn.Linear(d, d).double()
    module = impl.module
    mixes = ref.mhc_pre_norm_fn_ref(x, module.fn, None, adapter.NORM_EPS)
    pre, post, comb = ref.mhc_pre_split_mixes_ref(mixes, module.scale, module.base, n, 2.0,
                                                  adapter.PRE_EPS)
    comb = ref.sinkhorn_normalize_ref(comb, repeat=10, eps=adapter.SINKHORN_EPS)
    layer_input = ref.mhc_pre_apply_mix_ref(x, pre)
    want = ref.mhc_post_ref(branch(layer_input.double()), x, post, comb)
    got = impl.forward(x, branch)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
    _, h_post, H_res = impl.weights(x)
    assert torch.allclose(H_res.float(), comb.transpose(-1, -2).bfloat16().float())
    post_logits = mixes[..., n:2 * n] * module.scale[1] + module.base[n:2 * n]
    assert torch.allclose(h_post.float(), (2 * torch.sigmoid(post_logits)).bfloat16().float())
