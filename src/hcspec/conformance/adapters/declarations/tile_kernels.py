"""Declarations of the TileKernels targets (:mod:`hcspec.conformance.adapters.tile_kernels`) and
where the adapter finds the references' file (:func:`reference_path`; no import of the package
or of torch, so the availability check is as cheap as the declarations)."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "1.0.0"
"""The tile-kernels version (and file) this adapter was written and checked against."""

CHECKOUT_ENV: Final = "HC_TILE_KERNELS_CHECKOUT"
"""Environment variable naming a TileKernels checkout to load the references from."""

REFERENCE_FILE: Final = "tile_kernels/torch/mhc.py"
"""The references' path inside the distribution or a checkout."""


def reference_path() -> Path:
    """Where ``tile_kernels/torch/mhc.py`` is: under ``$HC_TILE_KERNELS_CHECKOUT`` when set,
    else in the installed ``tile-kernels`` distribution.

    Raises:
        ImportError: the variable names a directory without the file, or (unset) the
            distribution is not installed or lacks the file; the message says what to do.
    """
    checkout = os.environ.get(CHECKOUT_ENV)
    if checkout:
        path = Path(checkout) / REFERENCE_FILE
        if not path.is_file():
            raise ImportError(f"${CHECKOUT_ENV}={checkout}: no {REFERENCE_FILE} there (give the "
                              "root of a TileKernels checkout)")
        return path
    try:
        located = importlib.metadata.distribution("tile-kernels").locate_file(REFERENCE_FILE)
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(
            "tile-kernels is not installed: `pip install --no-deps tile-kernels==1.0.0` (the "
            f"references need only torch), or set ${CHECKOUT_ENV} to a TileKernels "
            "checkout") from None
    path = Path(str(located))
    if not path.is_file():
        raise ImportError(f"the installed tile-kernels has no {REFERENCE_FILE} ({path})")
    return path


def unavailable() -> str | None:
    """Why the reference file cannot be found here (the message of :func:`reference_path`'s
    ``ImportError``), or None when it can: the targets' ``available`` check."""
    try:
        reference_path()
    except ImportError as exc:
        return str(exc)
    return None


_ADAPTER: Final = "hcspec.conformance.adapters.tile_kernels"
_DESCRIPTION: Final = ("TileKernels torch references (tile_kernels/torch/mhc.py, loaded by path "
                       "without tilelang) composed as mhc_pre/mhc_post; float32 inside, "
                       "bfloat16 outputs")

LANE: Final = Lane(".ci/thirdparty", f"pip install --no-deps tile-kernels=={WRITTEN_FOR}",
                   note="Files only (no tilelang): the torch references are loaded by path.")
"""CI installs the package's files into .ci-venv-pkgs."""

POST_SIGMA: Final = Finding(
    "post-mult-1", "convention",
    "(declared h_post_multiplier=1) mhc_pre's default post_mult_value 1.0 gives H_post = σ in "
    "[0, 1]; the mHC paper's (and DeepSeek-V4's) 2σ is tile_kernels:mhc-post2",
    ("constraints.h_post_span",), "docs/findings/tile_kernels.md")

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "tile_kernels:mhc", f"{_ADAPTER}:make", f"{_DESCRIPTION}; mhc_pre's defaults "
        "(post_mult_value 1.0)", requires=None, distribution="tile-kernels",
        written_for=WRITTEN_FOR, available=f"{__name__}:unavailable", lane=LANE,
        findings=(POST_SIGMA,),
    ),
    BuiltinTarget(
        "tile_kernels:mhc-post2", f"{_ADAPTER}:make", f"{_DESCRIPTION}; post_mult_value 2.0 "
        "(as DeepSeek-V4)", requires=None, distribution="tile-kernels",
        options={"post_mult_value": 2.0}, written_for=WRITTEN_FOR,
        available=f"{__name__}:unavailable", lane=LANE,
    ),
)
"""The built-in targets of TileKernels (discovered by :mod:`hcspec.conformance.subjects.targets`).
``requires`` is None because the package itself is never imported (its import needs
``tilelang``); ``available`` (:func:`unavailable`) says the reference file is missing, so
``hc-conformance targets`` lists the targets as not importable and a run is refused with the
instructions."""
