#!/usr/bin/env bash
# Build the benchmark's third-party environments (once; `python -m benchmarks --venvs ...` only
# runs them). Run from the repository root with the README's .venv active (torch, hcspec).
#
# Each is a venv layered on the active one, as .ci/thirdparty and .ci/lanes build theirs: no pip
# of its own (the active pip installs into it with --python) and a .pth file that adds the
# active environment's site-packages folders (torch 2.13.0, hcspec) after the venv's own, so the
# benchmark's reference rows run on the same torch in every venv. Same pins as CI:
#   .venv-bench-pkgs  hyper-connections 0.4.11, x-transformers 2.31.10, nano-deepseek-v4 0.2.0,
#                     tile-kernels 1.0.0 (--no-deps: its torch references only, no tilelang),
#                     mhc-pytorch 0.2.3 (--no-deps --ignore-requires-python, import name `mhc`)
#   .venv-bench-tf523 transformers 5.23.0
#   .venv-bench-nemo  nemo-automodel 0.7.0 (--no-deps), transformers 5.18.0, pillow 13.0.0
#   .venv-bench-mlx   mlx[cpu] 0.32.4, mlx-lm 0.32.2
# Usage: bash benchmarks/build_venvs.sh [NAME ...]   (default: all four; NAME as above without
# the .venv-bench- prefix). A venv whose install fails is removed and reported; the others stay.
set -uo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
parents=$(python -c 'import sys; print(" ".join(p for p in sys.path if p.endswith("-packages")))')

layered() {  # layered DIR: a pip-less venv that sees the active environment's packages after its own
  local venv=$1 own dir
  rm -rf "$venv" && python -m venv --without-pip "$venv" || return 1
  own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for dir in $parents; do echo "import site; site.addsitedir('$dir')"; done \
    > "$own/zz_hcspec_parent_venv.pth"
}
pipv() { local venv=$1; shift; python -m pip --python "$venv/bin/python" install -q "$@"; }

build() {
  local name=$1 venv=.venv-bench-$1 start=$(date +%s)
  layered "$venv" || return 1
  case $name in
    pkgs) pipv "$venv" hyper-connections==0.4.11 x-transformers==2.31.10 nano-deepseek-v4==0.2.0 \
            && pipv "$venv" --no-deps tile-kernels==1.0.0 \
            && pipv "$venv" --no-deps --ignore-requires-python mhc-pytorch==0.2.3 ;;
    tf523) pipv "$venv" transformers==5.23.0 ;;
    nemo) pipv "$venv" --no-deps nemo-automodel==0.7.0 && pipv "$venv" transformers==5.18.0 \
            pillow==13.0.0 ;;
    mlx) pipv "$venv" "mlx[cpu]==0.32.4" mlx-lm==0.32.2 ;;
    *) echo "unknown venv $name" >&2; return 1 ;;
  esac || { echo "$name: install failed; removed $venv" >&2; rm -rf "$venv"; return 1; }
  if [ "$("$venv/bin/python" -c 'import torch; print(torch.__file__)')" != \
       "$(python -c 'import torch; print(torch.__file__)')" ]; then
    echo "$name: torch in $venv is not the active environment's; removed" >&2
    rm -rf "$venv"; return 1
  fi
  echo "$name: $venv built in $(( $(date +%s) - start )) s"
}

status=0
for name in "${@:-pkgs tf523 nemo mlx}"; do
  for one in $name; do build "$one" || status=1; done
done
exit $status
