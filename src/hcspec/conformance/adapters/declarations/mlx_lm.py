"""Declaration of the mlx-lm target (:mod:`hcspec.conformance.adapters.mlx_lm`): DeepSeek-V4.1's
mHC in MLX, through the framework bridge."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Lane

WRITTEN_FOR: Final = "0.32.2"
"""The mlx-lm version this adapter was written and checked against (with mlx[cpu] 0.32.4)."""

MODULE: Final = "mlx_lm.models.deepseek_v41"
"""The package module the adapter reads."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "mlx_lm:deepseek-v41", "hcspec.conformance.adapters.mlx_lm:make_deepseek_v41",
        "mlx-lm (MLX, through the framework bridge): deepseek_v41.HyperConnection composed as "
        "DecoderLayer does (H_res = combᵀ, 20 Sinkhorn rounds from the softmax), with the "
        "carried pre-mix in stack(L)",
        requires=MODULE, distribution="mlx-lm", written_for=WRITTEN_FOR,
        lane=Lane(".ci/lanes/mlx_lm", f'pip install "mlx[cpu]==0.32.4" mlx-lm=={WRITTEN_FOR}',
                  note="compile.fullgraph is not applicable: the bridge declares "
                       "conventions.untraceable, since TorchDynamo cannot trace a call into "
                       "MLX."),
    ),
)
"""The built-in target of mlx-lm (discovered by :mod:`hcspec.conformance.subjects.targets`)."""
