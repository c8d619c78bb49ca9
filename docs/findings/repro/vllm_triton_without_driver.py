"""Our limitation (the engine's design), verified: vLLM 0.33.0 keeps Triton only when exactly
one GPU driver is active (vllm/triton_utils/importing.py); on a machine without one,
``triton.jit`` is vLLM's placeholder and its Triton mHC kernels cannot run, not even under
TRITON_INTERPRET=1. Its one exception is CUDA_VISIBLE_DEVICES set and empty (a launcher's
process), which the kit's vllm:mhc-triton adapter sets. Also: the PyPI wheel is the CUDA build,
without vllm._C, so the compiled CPU ops behind mhc_pre_cpu are absent. This script does not use
the kit. Run in the vLLM lane's venv (a few seconds):

    TRITON_INTERPRET=1 .ci-venv-vllm/bin/python docs/findings/repro/vllm_triton_without_driver.py
    TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES= .ci-venv-vllm/bin/python \
        docs/findings/repro/vllm_triton_without_driver.py
"""

import importlib

import torch
from vllm.triton_utils import HAS_TRITON

# the package's `from .triton import *` re-exports the name `triton` (Triton itself) over the
# submodule, so the submodule is taken from importlib
k = importlib.import_module("vllm.model_executor.kernels.mhc.triton")

print("vLLM HAS_TRITON:", HAS_TRITON, "| kernel type:", type(k._mhc_pre_mix_kernel).__name__)
if HAS_TRITON:
    gemm = torch.randn(2, 3, 24)
    sq = gemm.new_ones(2, 3)
    pre = k.mhc_pre_mix_triton(gemm, sq, torch.ones(3), torch.zeros(24), 4, 32, 1e-6, 1e-6)
    want = torch.sigmoid(gemm.sum(0)[:, :4] * torch.rsqrt(sq.sum(0, keepdim=True).t() / 32
                                                          + 1e-6)) + 1e-6
    print("pre gate max error vs torch:", (pre - want).abs().max().item())
try:
    importlib.import_module("vllm._C")
    print("vllm._C loads")
except ImportError as exc:
    print("vllm._C:", exc)
