#!/usr/bin/env bash
# Compile-checks the GPU side as HIP for AMD targets, without an AMD GPU or a ROCm install, so the
# one CUDA/HIP source (through common/gpu_runtime.h) keeps building for ROCm:
#   - csrc/kernels/*.cu for gfx90a (MI200) with hipcc: host and device code, linked code object;
#   - csrc/kernels/*.cu for gfx942 (MI300) with clang-19: device code to gfx942 machine code
#     (-S), then assembled; see below for why not linked;
#   - the host code calling the runtime (net/cuda_ipc/workspace.cc, the virtual-rank harness and
#     the GPU tests) as C++ against HIP's headers, as CMake's HIP build compiles it (hip::host);
#   - that no file but common/gpu_runtime.h (and kernels/partition.h's __host__ __device__
#     markers) tests the compiler macros __HIP__, __HIP_PLATFORM_AMD__ or __CUDACC__.
# The backend's GPU files (csrc/backend/gpu/gpu_path.cc, gpu/gpu_work.cc, process_group_gpu.cc and
# gpu/gpu_stream.h) need a ROCm torch's headers, which are not on PyPI: they are not compiled here,
# and the output says so.
#
#   scripts/check_hip.sh [--require] [-j N]
#
# Needs `hipcc` (Debian's package: ROCm 5.2, clang 15; it cannot target gfx942) and `clang++-19`
# (Debian's clang-19) on PATH, plus GoogleTest's headers; installs nothing. A missing
# compiler skips its part with a SKIPPED line (exit 0), or fails with --require. Exits non-zero
# when any file fails to compile.
#
# gfx942 is compiled with -nogpulib: Debian's ROCm 5.2 device libraries predate gfx942, and
# without them the HIP headers' __assert_fail leaves __ockl_* symbols that only the device
# libraries define, so a linked gfx942 code object cannot be made here. -S runs the whole AMDGPU
# back end (instruction selection, register allocation, gfx942's memory-model lowering of the
# system-scope atomics) and the assembler checks the encoding; only the final device link is left.
#
# Configuration header: the sources include "common/config.h", which CMake generates. Here it is
# generated into a temporary folder from csrc/common/config.h.in with every feature 0 except
# XCCL_WITH_CUDA=1 ("the GPU parts are built", CUDA or HIP). Whether a file is compiled as CUDA or
# HIP is decided by the compiler alone (common/gpu_runtime.h).
set -euo pipefail

require=0
jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --require) require=1 ;;
    -j) jobs="$2"; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "check_hip: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS
status=0

# The alias rule, first: it needs no compiler.
offenders="$(grep -rlE '\b(__HIP__|__HIP_PLATFORM_AMD__|__CUDACC__)\b' csrc tests \
               --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' |
             grep -vx -e csrc/common/gpu_runtime.h -e csrc/kernels/partition.h || true)"
if [[ -n "$offenders" ]]; then
  echo "check_hip: FAILED: only common/gpu_runtime.h may test the compiler macros" \
       "(__HIP__, __HIP_PLATFORM_AMD__, __CUDACC__):"
  sed 's/^/    /' <<<"$offenders"
  status=1
fi

missing=()
have() { command -v "$1" >/dev/null 2>&1 || { missing+=("$1"); return 1; }; }
have_hipcc=0; have hipcc && have_hipcc=1
have_clang=0; have clang++-19 && have_clang=1
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $require -eq 1 ]]; then
    echo "check_hip: FAILED: not found: ${missing[*]} (install Debian's hipcc and clang-19)" >&2
    exit 1
  fi
  echo "check_hip: SKIPPED the parts needing: ${missing[*]} (pass --require to make this an error)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/generated/common" "$work/obj"
sed -E -e 's/^#cmakedefine01 XCCL_WITH_CUDA$/#define XCCL_WITH_CUDA 1/' \
       -e 's/^#cmakedefine01 ([A-Za-z0-9_]+)$/#define \1 0/' \
       csrc/common/config.h.in >"$work/generated/common/config.h"

# Debian's hipcc picks the NVIDIA platform when it finds nvcc; force AMD. --offload-arch alone
# keeps it from probing for a GPU.
export HIP_PLATFORM=amd
[[ $have_hipcc -eq 1 ]] &&
  echo "check_hip: hipcc $(hipcc --version 2>/dev/null | grep -i 'HIP version' | head -n1)"
[[ $have_clang -eq 1 ]] && echo "check_hip: $(clang++-19 --version | head -n1)"

# One line per job: "<kind> <source>". Kinds: gfx90a (hipcc, kernels), gfx942 (clang-19, kernels),
# host (C++ against HIP's headers).
list="$work/jobs"
: >"$list"
for source in csrc/kernels/*.cu; do
  [[ $have_hipcc -eq 1 ]] && echo "gfx90a $source" >>"$list"
  [[ $have_clang -eq 1 ]] && echo "gfx942 $source" >>"$list"
done
if [[ $have_hipcc -eq 1 ]]; then
  for source in csrc/net/cuda_ipc/workspace.cc tests/cpp/gpu/virtual_ranks.cc \
                tests/cpp/gpu/test_cuda_ipc.cc tests/cpp/gpu/test_kernels.cc \
                tests/cpp/gpu/kernel_bench.cc; do
    echo "host $source" >>"$list"
  done
fi

compile() {
  local kind="$1" source="$2"
  local out="$work/obj/$kind-$(basename "$source")"
  local includes=(-I csrc -I tests/cpp -I "$work/generated")
  local ok=1
  case "$kind" in
    gfx90a)
      # -ffp-contract=off as CMake builds the HIP kernels (csrc/kernels/CMakeLists.txt).
      hipcc -x hip --offload-arch=gfx90a -std=c++17 -O2 -ffp-contract=off -Wall \
            -Werror=return-type "${includes[@]}" -c "$source" -o "$out.o" >"$out.log" 2>&1 ||
        ok=0 ;;
    gfx942)
      { clang++-19 -x hip --offload-arch=gfx942 -nogpulib --offload-device-only -std=c++17 -O2 \
                   -ffp-contract=off -Wall -Werror=return-type "${includes[@]}" -S "$source" \
                   -o "$out.s" &&
        clang++-19 --target=amdgcn-amd-amdhsa -mcpu=gfx942 -c "$out.s" -o "$out.o"; } \
        >"$out.log" 2>&1 || ok=0 ;;
    host)
      # As CMake's HIP build compiles host code: the C++ compiler, with the platform macro that
      # hip::host adds.
      "${CXX:-c++}" -x c++ -D__HIP_PLATFORM_AMD__=1 -std=c++17 -O2 -Wall -Werror=return-type \
                    "${includes[@]}" -fsyntax-only "$source" >"$out.log" 2>&1 || ok=0 ;;
  esac
  if [[ $ok -eq 1 ]]; then
    printf '  ok      %-7s %s\n' "$kind" "$source"
    [[ -s "$out.log" ]] && sed 's/^/    /' "$out.log"  # warnings
    return 0
  fi
  printf '  FAILED  %-7s %s\n' "$kind" "$source"
  sed 's/^/    /' "$out.log"
  return 1
}
export -f compile
export work

count=$(wc -l <"$list")
if [[ $count -gt 0 ]]; then
  xargs -P "$jobs" -L 1 bash -c 'compile "$@"' _ <"$list" || status=1
fi
echo "  not compiled: csrc/backend/gpu/gpu_path.cc gpu/gpu_work.cc process_group_gpu.cc" \
     "gpu/gpu_stream.h" \
     "(they need a ROCm torch's headers; not on PyPI)"

if [[ $status -ne 0 ]]; then
  echo "check_hip: FAILED ($((SECONDS - started)) s)" >&2
  exit 1
fi
echo "check_hip: $count compiles passed ($((SECONDS - started)) s)"
