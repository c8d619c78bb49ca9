"""Built-in targets for hcspec's own reference implementation (``reference:hc-static``,
``reference:hc-dynamic``, ``reference:mhc``, and ``reference:mhc-fast``, the fast path of mHC).

The reference modules follow the protocol directly (``module(x, branch)``, ``weights``,
``expand``, ``reduce``, ``parameters``, ``n``, ``d``, ``kind``; mHC also ``logits``, its
pre-activation logits, for the variant family) and carry their own declared
conventions (``HyperConnection.conventions``, a plain mapping: the branch receives ``x_in``
itself, ``reduce`` sums the streams; mHC's ``sinkhorn_iterations`` attribute gives its rounds),
so the factories of :mod:`hcspec.reference.targets` are the targets (declared in
:mod:`hcspec.conformance.adapters.declarations.reference`) without a
wrapper. The ``make_*`` names are those factories, kept for code that imports them from here.
"""

from __future__ import annotations

from typing import Final

from hcspec.conformance.protocol import Conventions
from hcspec.reference import targets as _factories
from hcspec.reference.connection import HyperConnection

REFERENCE_CONVENTIONS: Final = Conventions.from_mapping(HyperConnection.conventions)
"""The conventions every reference module declares (read from the class)."""

make_hc_static = _factories.hc_static
make_hc_dynamic = _factories.hc_dynamic
make_mhc = _factories.mhc
make_mhc_fast = _factories.mhc_fast
