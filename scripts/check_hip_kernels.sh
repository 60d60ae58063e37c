#!/usr/bin/env bash
# Compile-checks every csrc/kernels/*.cu as HIP for an AMD target, so the one CUDA/HIP source
# (through kernels/gpu.h) keeps building for ROCm without an AMD GPU or a ROCm install; and the
# host code that calls the runtime through kernels/gpu_runtime.h (net/cuda_ipc/workspace.cc) as
# C++ against HIP's headers, as a ROCm build would compile it.
#
#   scripts/check_hip_kernels.sh [--require] [--offload-arch gfx90a] [-j N]
#
# Needs `hipcc` on PATH (CI installs Debian's `hipcc` package, ROCm 5.2, clang 15); this script
# installs nothing. Without hipcc it prints that the check was skipped and exits 0, or exits 1
# with --require. Exits non-zero when any file fails to compile.
#
# Configuration header: the sources include "common/config.h", which CMake generates. Here it is
# generated into a temporary folder from csrc/common/config.h.in with every feature 0 except
# XCCL_WITH_CUDA=1 ("the GPU device code is built"). There is no separate XCCL_WITH_HIP: whether a
# file is compiled as CUDA or HIP is decided by the compiler alone (kernels/gpu_runtime.h tests
# __HIP__ and __HIP_PLATFORM_AMD__, which hipcc defines).
set -euo pipefail

require=0
arch=gfx90a
jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --require) require=1 ;;
    --offload-arch) arch="$2"; shift ;;
    -j) jobs="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "check_hip_kernels: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v hipcc >/dev/null 2>&1; then
  if [[ $require -eq 1 ]]; then
    echo "check_hip_kernels: FAILED: hipcc not found (install the 'hipcc' package)" >&2
    exit 1
  fi
  echo "check_hip_kernels: SKIPPED: hipcc not found (pass --require to make this an error)"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/generated/common" "$work/obj"
sed -E -e 's/^#cmakedefine01 XCCL_WITH_CUDA$/#define XCCL_WITH_CUDA 1/' \
       -e 's/^#cmakedefine01 ([A-Za-z0-9_]+)$/#define \1 0/' \
       "$root/csrc/common/config.h.in" >"$work/generated/common/config.h"

# Debian's hipcc picks the NVIDIA platform when it finds nvcc; force AMD. --offload-arch alone
# keeps it from probing for a GPU.
export HIP_PLATFORM=amd
version="$(hipcc --version 2>/dev/null || true)"
echo "check_hip_kernels: $(grep -i 'HIP version' <<<"$version" | head -n1), target $arch"

mapfile -t sources < <(cd "$root" && ls csrc/kernels/*.cu csrc/net/cuda_ipc/workspace.cc)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "check_hip_kernels: FAILED: no sources found under csrc/kernels" >&2
  exit 1
fi

compile() {
  local source="$1" log="$work/obj/$(basename "$1").log" language=(-x hip)
  # Host code: plain C++ with the platform macro HIP's headers need, as a ROCm build (CMake's
  # hip::host) compiles it.
  [[ "$source" == *.cc ]] && language=(-x c++ -D__HIP_PLATFORM_AMD__=1)
  if hipcc "${language[@]}" --offload-arch="$arch" -std=c++17 -O2 -Wall -Werror=return-type \
       -I "$root/csrc" -I "$work/generated" -c "$root/$source" \
       -o "$work/obj/$(basename "$source").o" >"$log" 2>&1; then
    echo "  ok      $source"
    [[ -s "$log" ]] && sed 's/^/    /' "$log"  # warnings
    return 0
  else
    echo "  FAILED  $source"
    sed 's/^/    /' "$log"
    return 1
  fi
}
export -f compile
export root work arch

status=0
printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} bash -c 'compile "$@"' _ {} || status=1
if [[ $status -ne 0 ]]; then
  echo "check_hip_kernels: FAILED" >&2
  exit 1
fi
echo "check_hip_kernels: all ${#sources[@]} files compile for $arch"
