"""The constructions theorems (spec/theorems/constructions.py): each proves, and each proof
fails on the planted false input it guards against."""

from __future__ import annotations

import pytest

from hcspec.spec.registry import ProofFailure, get
from hcspec.spec.theorems import constructions


@pytest.mark.parametrize("theorem_id", ["constructions.birkhoff_exact",
                                        "constructions.orthostochastic_exact",
                                        "constructions.orthostochastic_inexact"])
def test_proves(theorem_id: str) -> None:
    result = get(theorem_id).prove()
    assert result.ok, result.error
    assert len(result.steps) >= 3


def test_birkhoff_duplicated_set_still_exact() -> None:
    # mHC-lite with a duplicated set (4 distinct of 6 at n = 3) is still doubly stochastic:
    # the constraints alone cannot see it, which is why the kit steers towards each permutation
    dup = ((0, 1, 2), (0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (0, 2, 1))
    assert constructions._birkhoff_proof({3: dup})


def test_birkhoff_fails_on_a_non_permutation() -> None:
    # (0, 0) maps both rows to column 0: row sums 1, column sums 2 and 0
    with pytest.raises(ProofFailure):
        constructions._birkhoff_proof({2: ((0, 0), (1, 0))})


def test_orthostochastic_identity_is_the_diagonal() -> None:
    import sympy
    Q = sympy.Matrix([[1, 2], [3, 4]])
    S = Q.multiply_elementwise(Q)
    E = Q * Q.T - sympy.eye(2)
    assert [sum(S.row(i)) - 1 for i in range(2)] == [E[0, 0], E[1, 1]] == [4, 24]


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"construction": "lu"}, "formula.construction"),
    ({"permutations": ((0, 1),)}, "only a 'birkhoff'"),
    ({"construction": "birkhoff", "permutations": ((0, 1), (0, 0))}, "not a permutation"),
    ({"construction": "birkhoff", "permutations": ((0, 1), (0, 1, 2))}, "not a permutation"),
    ({"construction": "birkhoff", "permutations": ()}, "non-empty"),
    ({"construction": "orthostochastic", "newton_schulz_iterations": 0}, ">= 1"),
])
def test_record_rejects(kwargs: dict[str, object], words: str) -> None:
    from hcspec.spec.record import Formula
    with pytest.raises(ValueError, match=words):
        Formula(**kwargs)  # type: ignore[arg-type]


def test_record_permutation_set() -> None:
    from hcspec.spec.record import Formula, Gate, birkhoff_permutations
    f = Formula(construction="birkhoff")
    assert len(birkhoff_permutations(f, 4)) == 24
    assert birkhoff_permutations(f, 3)[1] == (0, 2, 1)
    g = Formula(construction="birkhoff", permutations=((1, 0), (0, 1)))
    assert birkhoff_permutations(g, 2) == ((1, 0), (0, 1))
    with pytest.raises(ValueError, match="n=3"):
        birkhoff_permutations(g, 3)
    assert Gate(activation="softmax").activation == "softmax"
