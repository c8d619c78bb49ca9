"""No step true by construction, no citation that is not the fact used (issue #38): a wrong
published scale and a wrong citation each fail prove, planted in a copy of spec/ by the spec
mutation tool (only the theorem concerned is proven); require_true never takes a literal True."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools import spec_mutation

SPEC = Path(__file__).resolve().parents[2] / "spec"


@pytest.mark.parametrize(("mutant", "theorem"), [
    ("published_dynamic_scale_swapped", "published.hc_dynamic_step"),
    ("citation_earlier_streams_as_ones", "duality.parallel"),
])
def test_a_planted_wrong_scale_or_citation_fails_prove(mutant: str, theorem: str) -> None:
    patch = {p.name: p for p in spec_mutation.CORPUS}[mutant]
    outcome = spec_mutation.run_patch(patch, timeout=300, only=(theorem,))
    assert (outcome.status, outcome.theorem) == ("killed", theorem), outcome


def test_the_unpatched_theorems_prove_in_the_same_harness() -> None:
    # the harness itself: an identity patch proves (so a kill above is the planted error's)
    patch = spec_mutation.Patch("identity", "theorems/published.py", "N = D = 2", "N = D = 2",
                                "none")
    outcome = spec_mutation.run_patch(patch, timeout=300, only=("published.hc_dynamic_step",
                                                                "duality.parallel"))
    assert outcome.status == "survived", outcome


def test_no_require_true_takes_a_literal_true() -> None:
    literal = []
    for path in sorted(SPEC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(
                    node.func, "id", getattr(node.func, "attr", None)) == "require_true":
                condition = node.args[1] if len(node.args) > 1 else None
                if isinstance(condition, ast.Constant) and condition.value is True:
                    literal.append(f"{path.name}:{node.lineno}")
    assert literal == []
