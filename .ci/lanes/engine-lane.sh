#!/usr/bin/env bash
# The serving engines' lanes of .ci/thirdparty (.ci/lanes/sglang, .ci/lanes/vllm source this file
# after setting: venv, prefix, label, build_packages (a function), cpu_targets, kernel_targets,
# kernel_only, tests).
#
# Called with the README's .venv active (torch 2.13.0, hcspec, pytest).
#   1. (build) $venv, a venv layered on .venv as the NeMo lane's (a .pth file adds .venv's
#      site-packages, and the one its torch comes from, after the venv's own; .venv's pip installs
#      into it with --python): the engine's wheel with --no-deps (its declared requirements pin
#      CUDA torch 2.14 and the whole serving stack) and the named modules its HC modules import at
#      run time (build_packages); fails if torch there is not .venv's;
#   2. (run) the engine's adapter tests ($tests) and the mutant tests of its Triton kernels, with
#      TRITON_INTERPRET=1;
#   3. (run) `hc-conformance run PREFIX:NAME --profile ci` for every CPU target and, under
#      TRITON_INTERPRET=1, `--profile kernel --only $kernel_only` for every Triton target, each
#      with .ci/expected-failures/PREFIX/NAME.txt; every built-in PREFIX target must have a file
#      (a target unavailable here, e.g. vllm:mhc-cpu on the CUDA wheel, has one saying so and is
#      listed, not run).
# Reports go to reports/thirdparty/PREFIX_*. Exit status: 1 if any step failed.
# Argument `build`: step 1 only; `run`: steps 2 and 3 in the venv built before; none: all.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 OMP_NUM_THREADS=1
phase=${1:-all}
status=0
start=$(date +%s)
mkdir -p reports/thirdparty

quiet_pip() {  # pip install into $venv, without the resolver's list of the wheel's unmet requirements
  local out
  out=$(python -m pip --python "$venv/bin/python" install -q "$@" 2>&1) \
    || { echo "$out" >&2; return 1; }
  echo "$out" | grep -vE 'is not installed|dependency (resolver|conflicts)|is ignored|requires|which is incompatible' || true
}

if [ "$phase" != run ]; then
  rm -rf "$venv" && python -m venv --without-pip "$venv"
  own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  python - > "$own/zz_hcspec_parent_venv.pth" <<'PY'
import os, sysconfig, torch
dirs = [sysconfig.get_paths()["purelib"], os.path.dirname(os.path.dirname(torch.__file__))]
print("\n".join(f"import site; site.addsitedir({d!r})" for d in dict.fromkeys(dirs)))
PY
  build_packages
fi
want=$(python -c 'import torch; print(torch.__version__, torch.__file__)')
got=$("$venv/bin/python" -c 'import torch; print(torch.__version__, torch.__file__)')
echo "torch in $venv: $got"
if [ "$got" != "$want" ]; then
  echo "error: torch in $venv is not the caller's ($want)" >&2
  status=1
fi
echo "venv: $(( $(date +%s) - start )) s"
[ "$phase" = build ] && exit "$status"

echo "--- $tests in $venv (TRITON_INTERPRET=1)"
# shellcheck disable=SC2086
TRITON_INTERPRET=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider $tests || status=1

missing=$("$venv/bin/python" - "$prefix" <<'PY'
import pathlib, sys
from hcspec.conformance.subjects.targets import BUILTIN
prefix = sys.argv[1]
have = {p.stem for p in pathlib.Path(".ci/expected-failures", prefix).glob("*.txt")}
print(" ".join(sorted(n for n in BUILTIN if n.startswith(prefix + ":")
                      and n.split(":", 1)[1] not in have)))
PY
)
if [ -n "$missing" ]; then
  echo "error: no .ci/expected-failures file for: $missing" >&2
  status=1
fi
run_target() {  # run_target NAME ARG...: one target, its summary line, and its failures
  local name=$1 log="reports/thirdparty/${prefix}_$1" t code
  shift
  t=$(date +%s)
  set +e
  "$venv/bin/python" -m hcspec.conformance run "$prefix:$name" --device cpu --no-progress \
    --expected-failures ".ci/expected-failures/$prefix/$name.txt" --json "$log.json" "$@" \
    > "$log.txt" 2>&1
  code=$?
  set -e
  echo "$prefix:$name: exit $code, $(( $(date +%s) - t )) s," \
    "$(grep '^summary' "$log.txt" || echo "summary: (none)")"
  if [ "$code" != 0 ]; then
    status=1
    grep -E '^(FAILED|ERROR|XPASS) |^  (minimal|reproduce|[a-zA-Z])' "$log.txt" | head -40 || true
    tail -5 "$log.txt"
  fi
}
for name in $cpu_targets; do run_target "$name" --profile ci; done
for name in $kernel_targets; do
  TRITON_INTERPRET=1 run_target "$name" --profile kernel --only "$kernel_only"
done
echo "$label lane: $(( $(date +%s) - start )) s, exit $status"
exit "$status"
