"""hcspec's specification layer: sympy statements and exact proofs of the HC/mHC math.

Pure sympy and numpy (never torch). See :mod:`hcspec.spec.registry` for the theorem registry,
:mod:`hcspec.spec.formulas` for the connection formulas, :mod:`hcspec.spec.numeric` for their
lambdified
numeric callables. Sources: HC arXiv:2409.19606, mHC arXiv:2512.24880.
"""

from hcspec.spec.registry import ProofFailure, ProofResult, Theorem, all_theorems, get, register

__all__ = ["ProofFailure", "ProofResult", "Theorem", "all_theorems", "get", "register"]
