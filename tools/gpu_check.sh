#!/usr/bin/env bash
# What CI cannot run: the kit's CUDA path, on a machine with a CUDA device, in one go.
#
#   tools/gpu_check.sh            # from the repository root, in an environment with hcspec
#                                 # installed (pip install -e '.[test]') on a CUDA build of torch;
#                                 # triton, liger-kernel and hyper-connections where available
#   OUT=/some/dir tools/gpu_check.sh   # logs and JSON reports there (default reports/gpu_check)
#
# Steps, each under its own time limit and all within GPU_CHECK_BUDGET seconds (default 540,
# so the whole script stays inside 10 minutes with its start-up):
#   1. device    `device.cuda_matches_cpu` on every reference target (ci profile);
#   2. reference `hc-conformance run reference:mhc --device cuda --profile quick` (every
#                property on CUDA);
#   3. liger     `hc-conformance run liger_kernel:mhc --device cuda --profile kernel`: LigerMHC's
#                Triton kernels compiled for the device (bfloat16 included, which the CPU
#                interpreter cannot check; float32 tl.dot in TF32), against
#                .ci/expected-failures/liger_kernel/mhc.txt (the interpreter's findings);
#   4. triton-sinkhorn `hc-conformance run hyper_connections:mhc-triton --device cuda
#                --profile kernel` (the package's Triton Sinkhorn kernel, compiled);
#   4b. engines  where SGLang 0.5.23 / vLLM 0.33.0 are installed (their lanes' venvs, built
#                on a CUDA torch): the engines' GPU-only mHC kernels, which CI's CPU lanes
#                cannot run: `sglang:mhc-tilelang` (hc_pre / hc_post on TileLang: mhc_pre,
#                mhc_post, mhc_fused_post_pre's pieces), `vllm:mhc-tilelang`
#                (mhc_pre_tilelang, mhc_post_tilelang), and the Triton targets compiled
#                (`sglang:mhc-triton`: the fused split-K + Sinkhorn, `sglang:mhc-triton-split`,
#                `vllm:mhc-triton`, `sglang:ihc`: HY-V4's hy4_ihc.py kernels, or its `hpc` ops
#                where hpc is installed), each `--profile kernel`. Not covered by any target
#                yet: SGLang's AITER and DeepGEMM routes (hc_mix_stats_sinkhorn_deepgemm, the
#                bf16x3 projection), the CuTe split-K mix (gemm/hc_mix_splitk.py, sm_100),
#                Qwen4-exp's CUDA routes (SGLang: fused_hc_mix, the JIT combine,
#                hc_combine_decode; vLLM: qwen4_exp/{nvidia,amd}/hyperconnection.py),
#                vLLM's AITER (aiter.py) and DeepSeek-V4.1's mega_mhc / CuTe DSL ops;
#   5. mutants   `python -m tools.mutation hardcoded_cpu hardcoded_cuda --device cuda
#                --profile quick`: the CUDA-only mutant must be killed by
#                device.cuda_matches_cpu;
#   6. bench     `python -m benchmarks --sections gpu` with LigerMHC as an extra subject: the
#                connection's cost on CUDA, float32 and bfloat16;
#   7. ggml      llama.cpp's ggml hyper-connection ops on its CUDA backend, only when `nvcc` is
#                on PATH and `nvidia-smi -L` lists a GPU (otherwise the script says which is
#                missing and skips): `python -m hcspec.conformance.native.build --cuda` (cached
#                by the sdist's hash, -DGGML_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=native; its own
#                limit GGML_CUDA_BUILD_S, default 1500 s, outside the budget: a first build of
#                ggml-cuda is long), then `python -m tools.ggml_backends --backend CUDA0` (the
#                step on CUDA vs the CPU backend and the float64 published oracle) and
#                `hc-conformance run llama_cpp:deepseek-v4 --profile ci` with
#                HC_GGML_BACKEND=CUDA0 and .ci/expected-failures/llama_cpp/deepseek-v4.txt.
#                This step runs also without a torch CUDA build (the ggml library is its own).
# A step whose package is missing, or that runs out of time, is reported as such; the script
# never stops at a failing step. summary.txt lists every step: exit code, seconds, last line.
# TRITON_INTERPRET must not be set (the point is the compiled kernels); the script unsets it.
# Exit status: 0 when every step that ran exited 0, 1 otherwise, 2 without a CUDA device for
# torch (after step 7, which needs none).
set -uo pipefail
cd "$(dirname "$0")/.."
unset TRITON_INTERPRET HC_CONFORMANCE_TARGET
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
OUT=${OUT:-reports/gpu_check}
BUDGET=${GPU_CHECK_BUDGET:-540}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
START=$(date +%s)
status=0

note() { echo "$*" | tee -a "$SUMMARY"; }

# ggml_cuda_problem: why ggml's CUDA backend cannot be built and run here, or nothing
ggml_cuda_problem() {
  if ! command -v nvcc > /dev/null; then echo "nvcc is not on PATH"; return; fi
  if ! command -v nvidia-smi > /dev/null; then echo "nvcc found, but no nvidia-smi"; return; fi
  if ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
    echo "nvcc found, but nvidia-smi -L lists no GPU"
  fi
}

if ! python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  note "no CUDA device (torch.cuda.is_available() is False): nothing to check here but step 7"
  GGML_ONLY=1
fi
python - <<'PY' 2>&1 | tee "$OUT/machine.txt" | tee -a "$SUMMARY"
import importlib.metadata as md, platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"device {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")
for dist in ("hcspec", "triton", "liger_kernel", "hyper-connections"):
    try:
        print(f"{dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist} not installed")
PY

has() { python -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('$1') else 1)"; }

# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in $OUT/NAME.log, limited to
# LIMIT_S seconds and to what is left of the budget.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( BUDGET - ($(date +%s) - START) ))
  if [ "$left" -lt 20 ]; then
    note "$name: skipped (budget of ${BUDGET} s spent)"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  local last
  last=$(grep -E '^(summary|result|killed)' "$OUT/$name.log" | tail -2 | tr '\n' ' ')
  [ "$code" = 124 ] && last="timed out after ${limit} s; $last"
  note "$name: exit $code, $(( $(date +%s) - t0 )) s, ${last:-see $name.log}"
  [ "$code" != 0 ] && status=1
}

ggml_cuda_steps() {  # step 7 (see the header)
  problem=$(ggml_cuda_problem)
  if [ -n "$problem" ]; then
    note "ggml: skipped ($problem)"
  else
    t0=$(date +%s)
    timeout --kill-after=10 "${GGML_CUDA_BUILD_S:-1500}" python -m hcspec.conformance.native.build \
      --cuda --jobs "$(nproc)" > "$OUT/ggml_build.log" 2>&1
    code=$?
    note "ggml_build: exit $code, $(( $(date +%s) - t0 )) s, $(tail -1 "$OUT/ggml_build.log")"
    if [ "$code" = 0 ]; then
      lib=$(python -m hcspec.conformance.native.build --cuda --print-dir)
      step ggml_backends 120 env HC_GGML_LIB="$lib" python -m tools.ggml_backends --backend CUDA0
      step ggml_kit 180 env HC_GGML_LIB="$lib" HC_GGML_BACKEND=CUDA0 hc-conformance run \
        llama_cpp:deepseek-v4 --profile ci --no-progress \
        --expected-failures .ci/expected-failures/llama_cpp/deepseek-v4.txt \
        --json "$OUT/llama_cpp_deepseek-v4_cuda.json"
    else
      status=1
    fi
  fi
}

if [ "${GGML_ONLY:-0}" = 1 ]; then  # no torch CUDA: step 7 alone (it needs no torch CUDA)
  ggml_cuda_steps
  exit 2
fi
for target in reference:hc-static reference:hc-dynamic reference:mhc reference:mhc-fast; do
  step "device_${target#reference:}" 45 hc-conformance run "$target" --device cuda --profile ci \
    --only device.cuda_matches_cpu --no-progress --json "$OUT/device_${target#reference:}.json"
done
step reference 120 hc-conformance run reference:mhc --device cuda --profile quick \
  --no-progress --json "$OUT/reference_mhc.json"
if has triton && has liger_kernel; then
  step liger 150 hc-conformance run liger_kernel:mhc --device cuda --profile kernel \
    --no-progress --expected-failures .ci/expected-failures/liger_kernel/mhc.txt \
    --json "$OUT/liger_kernel_mhc.json"
else
  note "liger: skipped (triton or liger-kernel not installed)"
fi
if has triton && has hyper_connections; then
  step triton_sinkhorn 120 hc-conformance run hyper_connections:mhc-triton --device cuda \
    --profile kernel --no-progress --json "$OUT/hyper_connections_mhc-triton.json"
else
  note "triton_sinkhorn: skipped (triton or hyper-connections not installed)"
fi
for engine in sglang vllm; do
  if has triton && has "$engine"; then
    for target in $(python -c "from hcspec.conformance.subjects.targets import BUILTIN
print(' '.join(n for n in BUILTIN if n.startswith('$engine:') and ('tilelang' in n or 'triton' in n or 'head' in n or 'ihc' in n)))"); do
      step "engine_${target//:/_}" 90 hc-conformance run "$target" --device cuda --profile kernel \
        --no-progress --json "$OUT/${target//:/_}.json"
    done
  else
    note "engines: $engine skipped (triton or $engine not installed)"
  fi
done
step mutants 90 python -m tools.mutation hardcoded_cpu hardcoded_cuda --device cuda \
  --profile quick --json "$OUT/mutants.json"
bench_targets=()
has liger_kernel && bench_targets=(--target hcspec.conformance.adapters.liger_kernel:make)
step bench 120 python -m benchmarks --sections gpu "${bench_targets[@]}" \
  --out "$OUT/benchmarks_gpu.md" --plots "$OUT" --json "$OUT/benchmarks_gpu.json"

ggml_cuda_steps
note "total $(( $(date +%s) - START )) s; logs and reports in $OUT"
exit "$status"
