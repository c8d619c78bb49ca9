"""Mutant: mHC-lite (arXiv 2601.05732, ``H_res = Σ_k softmax(H̃_res)_k P_k``) whose permutation
set repeats two permutations in place of two others (4 distinct of 6 at n = 3: the last two
replaced by the first two), while it declares all n!.

Bug class: constructions (issue #40). ``H_res`` stays doubly stochastic exactly (spec
``constructions.birkhoff_exact`` holds for any set), so every constraint passes; at n = 3 it is
0.98 off the declared construction at the same logits, and two vertices of the Birkhoff
polytope can never be reached.
Caught by: variant.h_res (the declared construction applied to the target's own logits) and
constraints.h_res_vertices (two of the six permutations cannot be steered to).
"""

from __future__ import annotations

import itertools

import torch

from hcspec.reference.targets import mhc_lite

BUG_CLASS = "constructions: mHC-lite with a duplicated permutation set (issue #40)"
CAUGHT_BY = ("variant.h_res", "constraints.h_res_vertices")


def duplicated(n: int) -> tuple[tuple[int, ...], ...]:
    """All n! permutations with the last two replaced by the first two (n ≥ 3; fewer: the
    last replaced by the first, n = 1 unchanged)."""
    perms = list(itertools.permutations(range(n)))
    if len(perms) >= 4:
        perms[-1], perms[-2] = perms[0], perms[1]
    elif len(perms) >= 2:
        perms[-1] = perms[0]
    return tuple(perms)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return mhc_lite(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                    permutations=duplicated(n))
