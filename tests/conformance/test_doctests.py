"""The examples in the public modules' docstrings run and give what they show."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from hcspec.conformance import salts, seeding, strategies
from hcspec.conformance.machinery import errors
from hcspec.conformance.protocol import probing


@pytest.mark.parametrize("module", [strategies, probing, salts, seeding, errors],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module.__name__} has no docstring example"
    assert result.failed == 0
