#!/usr/bin/env bash
# Compile-checks the GPU side as HIP for AMD targets, without an AMD GPU or a ROCm install, so the
# one CUDA/HIP source (through common/gpu_runtime.h) keeps building for ROCm:
#   - csrc/kernels/*.cu for gfx90a (MI200) with hipcc: host and device code, linked code object;
#   - csrc/kernels/*.cu for gfx942 (MI300) with clang-19: device code to gfx942 machine code
#     (-S), then assembled; see below for why not linked;
#   - the host code calling the runtime (net/regions/cuda_ipc/workspace.cc, the virtual-rank harness and
#     the GPU tests) as C++ against HIP's headers, as CMake's HIP build compiles it (hip::host);
#   - every backend GPU source (csrc/backend/gpu/*.cc, core/gpu_side.cc, process_group_sides.cc)
#     and each GPU header alone (backend/gpu/*.h, core/gpu_side.h, common/gpu_runtime.h: each
#     includes what it needs) as HIP host code with clang++-19, against a ROCm-shaped torch:
#     torch.utils.hipify of the installed CUDA torch run over its c10/cuda and ATen/cuda headers,
#     as PyTorch's ROCm build makes its own (c10/hip, ATen/hip), with USE_ROCM and the defines a
#     ROCm torch's cpp_extension passes; prints "backend GPU sources compiled as HIP: N of M";
#   - that no file but common/gpu_runtime.h (and kernels/partition.h's __host__ __device__
#     markers) tests the compiler macros __HIP__, __HIP_PLATFORM_AMD__ or __CUDACC__, and none
#     but common/gpu_runtime.h the runtime's version (HIP_VERSION*, CUDART_VERSION).
# What the backend part cannot prove: that a real ROCm torch's headers are these (only what
# hipify makes of a CUDA torch's headers; a ROCm build also generates and patches some, e.g.
# cmake_macros.h), its C++ ABI, its libraries or any behaviour (nothing is linked or run), the
# hipify v1 branch of backend/gpu/gpu_stream.h (the installed hipify is v2), or code for HIP 6+:
# Debian's HIP is 5.2 (the fallback branches are the ones compiled), and the few HIP 6 graph
# declarations torch's hipified headers call are declared here, for those headers only.
#
#   scripts/check_hip.sh [--require] [--backend-only] [-j N]
#
# Needs `hipcc` (Debian's package: ROCm 5.2, clang 15; it cannot target gfx942) and `clang++-19`
# (Debian's clang-19) on PATH, plus GoogleTest's headers, and for the backend part a CUDA build
# of torch importable by ${PYTHON:-python3}; installs nothing. A missing
# compiler skips its part with a SKIPPED line (exit 0), or fails with --require. Exits non-zero
# when any file fails to compile.
#
# The backend part costs about 4 minutes of CPU time (32 compiles that include torch's headers; 8
# minutes measured with --backend-only on 2 cores shared with other builds).
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
backend_only=0
jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --require) require=1 ;;
    -j) jobs="$2"; shift ;;
    --backend-only) backend_only=1 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
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
# Runtime versions too: what a HIP (or CUDA) version has is decided once, in common/gpu_runtime.h
# (kGpuGraphExternalEvents, ...).
offenders="$(grep -rlE '\b(HIP_VERSION[A-Z_]*|CUDART_VERSION|CUDA_VERSION)\b' csrc tests \
               --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' |
             grep -vx -e csrc/common/gpu_runtime.h || true)"
if [[ -n "$offenders" ]]; then
  echo "check_hip: FAILED: only common/gpu_runtime.h may test the runtime's version macros" \
       "(HIP_VERSION*, CUDART_VERSION, CUDA_VERSION):"
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
# host (C++ against HIP's headers), backend and header (below). --backend-only: the last two.
list="$work/jobs"
: >"$list"
if [[ $backend_only -eq 0 ]]; then
  for source in csrc/kernels/*.cu; do
    [[ $have_hipcc -eq 1 ]] && echo "gfx90a $source" >>"$list"
    [[ $have_clang -eq 1 ]] && echo "gfx942 $source" >>"$list"
  done
  if [[ $have_hipcc -eq 1 ]]; then
    for source in csrc/net/regions/cuda_ipc/workspace.cc tests/cpp/gpu/virtual_ranks.cc \
                  tests/cpp/gpu/test_cuda_ipc.cc tests/cpp/gpu/test_kernels.cc \
                  tests/cpp/gpu/kernel_bench.cc; do
      echo "host $source" >>"$list"
    done
  fi
fi

# The backend's GPU sources need torch's GPU headers as a ROCm torch ships them. No ROCm torch is
# installable here, so one is shaped the way PyTorch's ROCm build makes its own: torch's own
# hipify (torch.utils.hipify, of the installed CUDA torch) run over that torch's c10/cuda and
# ATen/cuda headers, giving c10/hip and ATen/hip, put before the CUDA torch's other headers.
# XCCL_TORCH_HIPIFY_V2 follows that hipify's version, as setup.py's does for a real ROCm torch.
# torch_features.h is generated with csrc/backend/CMakeLists.txt's own markers.
python="${PYTHON:-python3}"
torch_root="$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null ||
              true)"
rocm_torch=""
if [[ $have_clang -eq 1 && -n "$torch_root" &&
      -f "$torch_root/include/c10/cuda/CUDAStream.h" ]]; then
  rocm_torch="$work/rocm-torch"
  mkdir -p "$rocm_torch/cuda/c10" "$rocm_torch/cuda/ATen" "$work/generated/backend/backend"
  cp -r "$torch_root/include/c10/cuda" "$rocm_torch/cuda/c10/"
  cp -r "$torch_root/include/ATen/cuda" "$rocm_torch/cuda/ATen/"
  hipify_v2="$("$python" - "$rocm_torch" <<'PYEOF'
import contextlib, io, sys
from torch.utils.hipify import hipify_python
from torch.utils.hipify.version import __version__
root = sys.argv[1]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    hipify_python.hipify(project_directory=root + "/cuda", output_directory=root + "/include",
                         includes=[root + "/cuda/*"], show_progress=False)
print(int(int(__version__.split(".")[0]) >= 2))
PYEOF
)"
  # What a ROCm torch's tree has in their place: only the hipified headers.
  rm -rf "$rocm_torch/include/c10/cuda" "$rocm_torch/include/ATen/cuda"
  features="$work/generated/backend/backend/torch_features.h"
  cp csrc/backend/torch_features.h.in "$features"
  while read -r feature marker; do
    value=0
    grep -qF -- "$marker" "$torch_root/include/torch/csrc/distributed/c10d/Backend.hpp" && value=1
    sed -i "s/^#cmakedefine01 $feature\$/#define $feature $value/" "$features"
  done < <(sed -n 's/^xccl_torch_feature(\([A-Z0-9_]*\) "\(.*\)")$/\1 \2/p' \
               csrc/backend/CMakeLists.txt)
  if grep -q cmakedefine "$features"; then
    echo "check_hip: FAILED: torch_features.h.in has a feature CMakeLists.txt does not detect" >&2
    exit 1
  fi
  # Debian's HIP (5.2) predates what torch's hipified headers call (graph user objects, HIP 6).
  # Declared here, for torch's headers only: the backend's sources never name them.
  cat >"$work/hip6_for_torch.h" <<'HEOF'
#pragma once
#include <hip/hip_runtime_api.h>
#if HIP_VERSION_MAJOR < 6
typedef struct ihipUserObject_t* hipUserObject_t;
enum { hipUserObjectNoDestructorSync = 1, hipGraphUserObjectMove = 1 };
hipError_t hipUserObjectCreate(hipUserObject_t*, void*, hipHostFn_t, unsigned, unsigned);
hipError_t hipUserObjectRelease(hipUserObject_t, unsigned);
hipError_t hipGraphRetainUserObject(hipGraph_t, hipUserObject_t, unsigned, unsigned);
#endif
HEOF
  export rocm_torch torch_root hipify_v2
  # Every source built only with the GPU parts (the gpu room, core/gpu_side.cc,
  # process_group_sides.cc), and every header of the gpu room alone (each includes what it needs).
  for source in csrc/backend/gpu/*.cc csrc/backend/core/gpu_side.cc \
                csrc/backend/process_group_sides.cc; do
    echo "backend $source" >>"$list"
  done
  for header in csrc/backend/gpu/*.h csrc/backend/core/gpu_side.h csrc/common/gpu_runtime.h; do
    echo "header $header" >>"$list"
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
    backend|header)
      # As a ROCm torch's cpp_extension compiles host code (-D__HIP_PLATFORM_AMD__=1 -DUSE_ROCM=1)
      # and xccl's CMake the backend (csrc/backend/CMakeLists.txt: C++20, the extension's
      # defines). torch's headers are system headers: -Werror=undef is for xccl's own #if tests,
      # which must see the macro they test defined (XCCL_GPU_HIP: common/gpu_runtime.h first).
      local mode=(-fsyntax-only "$source")
      [[ $kind == header ]] &&
        mode=(-fsyntax-only -Wno-pragma-once-outside-header -Wno-unused-const-variable "$source")
      clang++-19 -x c++ -D__HIP_PLATFORM_AMD__=1 -DUSE_ROCM=1 -DHIPBLAS_V2 \
                 -DXCCL_TORCH_HIPIFY_V2="$hipify_v2" -DTORCH_API_INCLUDE_EXTENSION_H \
                 -DTORCH_EXTENSION_NAME=_C -std=c++20 -Wall -Wextra -Wno-unused-parameter \
                 -Werror=return-type -Werror=undef "${includes[@]}" \
                 -I "$work/generated/backend" -include "$work/hip6_for_torch.h" \
                 -isystem "$rocm_torch/include" -isystem "$torch_root/include" \
                 -isystem "$torch_root/include/torch/csrc/api/include" \
                 $("${PYTHON:-python3}-config" --includes 2>/dev/null || true) \
                 "${mode[@]}" >"$out.log" 2>&1 || ok=0 ;;
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
  xargs -P "$jobs" -L 1 bash -c 'compile "$@"' _ <"$list" | tee "$work/results" || status=1
fi
if [[ -n "$rocm_torch" ]]; then
  backend_total=$(grep -c '^backend ' "$list")
  backend_failed=$(grep -c '^  FAILED  backend ' "$work/results" || true)
  echo "backend GPU sources compiled as HIP: $((backend_total - backend_failed)) of $backend_total"
else
  echo "check_hip: SKIPPED the backend's GPU sources: they need clang++-19 and a CUDA build of" \
       "torch importable by ${PYTHON:-python3} (its headers are hipified)"
  [[ $require -eq 1 ]] && status=1
fi

if [[ $status -ne 0 ]]; then
  echo "check_hip: FAILED ($((SECONDS - started)) s)" >&2
  exit 1
fi
echo "check_hip: $count compiles passed ($((SECONDS - started)) s)"
