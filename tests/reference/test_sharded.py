"""The sharded reference (reference/sharded.py) against the unsharded modules, on 2 gloo ranks
forked here, without the conformance kit: per-token weights, forward and the number of
collectives each kind and split needs (the counts docs/reference.md states)."""

from __future__ import annotations

import datetime
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hcspec.reference import targets
from hcspec.reference.sharded import SPLITS, local_chunk, shard_connection, split_axis

WORLD = 2
KINDS = {"hc-static": targets.hc_static, "hc-dynamic": targets.hc_dynamic, "mhc": targets.mhc}
N, D, B, T = 3, 4, 2, 4
EXPECTED_ALL_REDUCES = {  # per forward, under the hidden split (none under the token split)
    "hc-static": 0, "hc-dynamic": 2, "mhc": 1,
}


def _module(kind: str) -> Any:
    module = KINDS[kind](N, D, layer_index=1, seed=7)
    with torch.no_grad():  # away from the init (dynamic HC's W = 0 there)
        generator = torch.Generator().manual_seed(3)
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return module


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(B, T, N, D, generator=generator, dtype=torch.float64)
    mixing = torch.randn(D, D, generator=generator, dtype=torch.float64)
    return x, mixing


def _branch(mixing: torch.Tensor) -> Any:
    def branch(h: torch.Tensor) -> torch.Tensor:  # mixes tokens (prefix sum) and d
        return torch.tanh(h.cumsum(dim=1)) @ mixing
    return branch


def _rank(rank: int, store: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    counts: Counter[str] = Counter()
    real = {"all_reduce": dist.all_reduce, "all_gather": dist.all_gather}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real[name](*args, **kwargs)
        return call

    results: dict[str, Any] = {}
    try:
        x, mixing = _inputs()
        for kind in KINDS:
            for split in SPLITS:
                sharded = shard_connection(_module(kind), split)
                x_local = local_chunk(x, split, rank, WORLD)
                counts.clear()
                dist.all_reduce = counting("all_reduce")  # type: ignore[assignment]
                dist.all_gather = counting("all_gather")  # type: ignore[assignment]
                try:
                    with torch.no_grad():
                        weights = sharded.weights(x_local)
                        weight_counts = dict(counts)
                        counts.clear()
                        out = sharded(x_local, _branch(mixing))
                finally:
                    dist.all_reduce, dist.all_gather = real["all_reduce"], real["all_gather"]
                results[f"{kind}/{split}"] = {"weights": weights, "out": out,
                                              "weight_counts": weight_counts,
                                              "counts": dict(counts)}
    finally:
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("sharded")
    context = mp.start_processes(_rank, args=(str(tmp / "store"), str(tmp)), nprocs=WORLD,
                                 join=False, start_method="fork")
    deadline = time.monotonic() + 120
    try:  # join returns as soon as one rank ends; True once all have
        finished = False
        while not finished and time.monotonic() < deadline:
            finished = context.join(timeout=1)
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()
    assert finished, "the ranks did not finish within 120 s"
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("split", SPLITS)
def test_sharded_equals_unsharded(ranks: list[dict[str, Any]], kind: str, split: str) -> None:
    x, mixing = _inputs()
    module = _module(kind)
    with torch.no_grad():
        want_weights = module.weights(x)
        want = module(x, _branch(mixing))
    got = torch.cat([r[f"{kind}/{split}"]["out"] for r in ranks], dim=split_axis(split))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-13)
    for rank, result in enumerate(ranks):
        h_pre, h_post, H_res = result[f"{kind}/{split}"]["weights"]
        tokens = slice(None) if split == "hidden" else slice(rank * T // WORLD,
                                                             (rank + 1) * T // WORLD)
        for got_w, want_w in zip((h_pre, h_post, H_res), want_weights, strict=True):
            torch.testing.assert_close(got_w, want_w[:, tokens], rtol=0, atol=1e-13)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("split", SPLITS)
def test_collectives_per_forward(ranks: list[dict[str, Any]], kind: str, split: str) -> None:
    for result in ranks:
        entry = result[f"{kind}/{split}"]
        reduces = EXPECTED_ALL_REDUCES[kind] if split == "hidden" else 0
        assert entry["weight_counts"].get("all_reduce", 0) == reduces
        assert entry["weight_counts"].get("all_gather", 0) == 0
        # the forward adds one all-gather of x_in for the branch, nothing else
        assert entry["counts"].get("all_reduce", 0) == reduces
        assert entry["counts"].get("all_gather", 0) == 1


def test_local_chunk_and_split_axis() -> None:
    x = torch.arange(2 * 4 * 3 * 6).reshape(2, 4, 3, 6)
    assert torch.equal(local_chunk(x, "tokens", 1, 2), x[:, 2:4])
    assert torch.equal(local_chunk(x, "hidden", 2, 3), x[..., 4:6])
    with pytest.raises(ValueError, match="d = 6 is not divisible by the world size 4"):
        local_chunk(x, "hidden", 0, 4)
    with pytest.raises(ValueError, match="T = 4 is not divisible by the world size 3"):
        local_chunk(x, "tokens", 0, 3)
    with pytest.raises(ValueError, match="rank must lie in"):
        local_chunk(x, "tokens", 2, 2)
    with pytest.raises(ValueError, match="split must be one of"):
        split_axis("batch")
