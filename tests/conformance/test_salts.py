"""Every random stream of the kit draws with its own salts."""

from __future__ import annotations

import pytest

from hcspec.conformance import salts
from hcspec.conformance.salts import Salt


def test_no_two_roles_share_a_salt() -> None:
    blocks = salts.all_salts()
    assert len(blocks) >= 15
    assert salts.overlaps() == []
    every = [s for block in blocks for s in block.salts()]
    assert len(every) == len(set(every))
    assert len({b.name for b in blocks}) == len(blocks)


def test_an_overlap_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(salts, "CLASH", Salt("clash with the perturbations", 1500), raising=False)
    assert salts.overlaps() == [("the case's perturbation of parameter i",
                                 "clash with the perturbations")]


def test_indices_stay_inside_their_block() -> None:
    assert salts.FD_PARAMETER_DIRECTION.at(0, 0) == 2000
    assert salts.FD_PARAMETER_DIRECTION.at(1, 0) == 2000 + salts.MAX_PARAMETERS
    assert salts.SPAN_PERTURBATION.at(2, 5) == 22_005
    with pytest.raises(IndexError, match="holds indices"):
        salts.PERTURBATION.at(salts.MAX_PARAMETERS)
    with pytest.raises(IndexError):
        salts.UPSTREAM_GRADIENT.at(0)


def test_the_kit_uses_no_bare_salt() -> None:
    """Every gaussian(...) call of the kit passes a named salt."""
    import inspect
    import re

    from hcspec.conformance import probes, strategies
    from hcspec.conformance.families import CATALOGUE
    from hcspec.conformance.machinery import building

    modules = {inspect.getmodule(p.check) for p in CATALOGUE} | {strategies, probes, building}
    for module in modules:
        source = inspect.getsource(module)  # type: ignore[arg-type]
        bare = re.findall(r"gaussian\((?:[^()]|\([^()]*\))*?seed,\s*\d", source)
        assert bare == [], (module, bare)
