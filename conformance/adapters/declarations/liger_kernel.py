"""Declaration of the Liger-Kernel target (:mod:`hcspec.conformance.adapters.liger_kernel`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.8.5"
"""The liger-kernel version this adapter was written and checked against."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "liger_kernel:mhc", "hcspec.conformance.adapters.liger_kernel:make",
        "liger-kernel: LigerMHC (mHC in Triton forward and backward kernels; float64 is the "
        "float32 path between casts, n a power of two)",
        requires="liger_kernel", distribution="liger_kernel", written_for=WRITTEN_FOR,
        detail="hcspec.conformance.adapters._triton:environment_note",
    ),
    BuiltinTarget(
        "liger_kernel:mhc-customop", "hcspec.conformance.adapters.liger_kernel_ops:make",
        "liger-kernel: LigerMHC's three autograd Functions registered by the adapter as "
        "torch.library custom ops (hcspec_liger::*, fake kernels, autograd, vmap), for the "
        "custom-op family",
        requires="liger_kernel", distribution="liger_kernel", written_for=WRITTEN_FOR,
        detail="hcspec.conformance.adapters._triton:environment_note",
    ),
)
"""The built-in targets of Liger-Kernel (discovered by :mod:`hcspec.conformance.targets`); its
``detail`` says where the Triton kernels will run in this process, and why."""
