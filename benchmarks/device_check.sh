#!/usr/bin/env bash
# One-shot check on a machine with one NVIDIA GPU, no network, torch and the CUDA toolkit
# installed: build the kernels, the GPU tests and the kernel benchmark, run them, print a summary.
# Meant to finish well inside 8 minutes on an H200 (16 cores).
#
#   benchmarks/device_check.sh [--build-only]
#
#   --build-only   configure and build only, without looking for a GPU (to check this script on
#                  a machine without one).
# Environment:
#   OUT                 if set, the full log (device_check.log) and the benchmark CSV go there
#   XCCL_BUILD_DIR      build folder (default: build/device in the repository)
#   XCCL_GTEST_SOURCE   a googletest source tree to build when CMake finds no installed GTest
#                       (default: third_party/googletest, then /usr/src/googletest)
#   XCCL_CUDA_ARCHS     override the detected architecture, e.g. "90"
#
# Exit status: 0 all passed; 1 a step failed; 3 no GPU found (nothing was built or run).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${XCCL_BUILD_DIR:-$repo/build/device}"
build_only=0
[[ "${1:-}" == "--build-only" ]] && build_only=1
jobs="$(nproc 2>/dev/null || echo 4)"

mkdir -p "$build"
logdir="${OUT:-$build}"
mkdir -p "$logdir"
log="$logdir/device_check.log"
: >"$log"
exec > >(tee -a "$log") 2>&1

declare -a summary=()
failed=0
record() {  # record STEP STATUS SECONDS [NOTE]
  summary+=("$(printf '%-22s %-8s %6ss  %s' "$1" "$2" "$3" "${4:-}")")
  [[ "$2" == FAIL ]] && failed=1
}
print_summary() {
  echo
  echo "==================== device_check summary ===================="
  printf '%-22s %-8s %7s  %s\n' step status time note
  printf '%s\n' "${summary[@]}"
  [[ -n "${bench_lines:-}" ]] && printf '\n%s\n' "$bench_lines"
  echo "log: $log"
}
step_start() { echo; echo "=== $1 ($(date +%H:%M:%S))"; t0=$SECONDS; }

# --- 1. GPU ------------------------------------------------------------------------------------
step_start "GPU"
gpu_name=""
if [[ $build_only -eq 0 ]]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_name="$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
  fi
  if [[ -z "$gpu_name" ]]; then
    gpu_name="$(python3 -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>/dev/null)"
  fi
  if [[ -z "$gpu_name" ]]; then
    echo "device_check: NO GPU FOUND (nvidia-smi lists none and torch.cuda.is_available() is False)."
    echo "device_check: this script needs a machine with an NVIDIA GPU; nothing was built or run."
    record gpu FAIL $((SECONDS - t0)) "no GPU"
    print_summary
    exit 3
  fi
  echo "GPU: $gpu_name"
  record gpu ok $((SECONDS - t0)) "$gpu_name"
else
  echo "--build-only: not looking for a GPU"
fi

# --- 2. Configure ------------------------------------------------------------------------------
step_start "configure"
torch_cuda="$(python3 -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null)"
if [[ -z "$torch_cuda" ]]; then
  torch_cuda="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
  echo "warning: no CUDA torch found; using nvcc's version ($torch_cuda)"
fi
archs="${XCCL_CUDA_ARCHS:-}"
if [[ -z "$archs" && $build_only -eq 0 ]]; then
  archs="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')"
fi
archs="${archs:-80;90}"
nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
echo "torch CUDA $torch_cuda, nvcc $nvcc_path, architectures $archs, $jobs jobs"

configure() {
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DXCCL_GPU=ON \
    -DXCCL_TORCH_CUDA="$torch_cuda" -DCMAKE_CUDA_COMPILER="$nvcc_path" \
    -DXCCL_CUDA_ARCHS="$archs" "$@"
}
configure_ok=0
if configure; then configure_ok=1; fi
# No installed GoogleTest (the device image has none): build one from source into the build tree.
if [[ $configure_ok -eq 1 && ! -d "$build/tests/cpp/gpu" ]]; then
  gtest_src="${XCCL_GTEST_SOURCE:-}"
  for candidate in "$repo/third_party/googletest" /usr/src/googletest; do
    [[ -z "$gtest_src" && -f "$candidate/CMakeLists.txt" ]] && gtest_src="$candidate"
  done
  if [[ -n "$gtest_src" ]]; then
    echo "GoogleTest not installed: building it from $gtest_src"
    cmake -S "$gtest_src" -B "$build/_gtest" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$build/_gtest/install" &&
      cmake --build "$build/_gtest" -j "$jobs" && cmake --install "$build/_gtest" >/dev/null &&
      configure -DCMAKE_PREFIX_PATH="$build/_gtest/install" || configure_ok=0
  fi
  if [[ ! -d "$build/tests/cpp/gpu" ]]; then
    echo "device_check: GoogleTest not found; set XCCL_GTEST_SOURCE to a googletest source tree"
    configure_ok=0
  fi
fi
record configure "$([[ $configure_ok -eq 1 ]] && echo ok || echo FAIL)" $((SECONDS - t0)) \
  "CUDA $torch_cuda, sm $archs"
if [[ $configure_ok -ne 1 ]]; then print_summary; exit 1; fi

# --- 3. Build ----------------------------------------------------------------------------------
step_start "build"
if cmake --build "$build" -j "$jobs" --target xccl_kernels test_gpu_logic test_gpu_kernels \
     xccl_kernel_bench; then
  record build ok $((SECONDS - t0)) "kernels, gpu tests, kernel bench"
else
  record build FAIL $((SECONDS - t0))
  print_summary
  exit 1
fi

# === PLACEHOLDER (backend work): build the Python extension (pip install / setup.py with this
# === torch) and run the xccl-vs-NCCL world-size-1 comparison here, recording its own summary
# === rows with `record`.

if [[ $build_only -eq 1 ]]; then
  record run skipped 0 "--build-only"
  print_summary
  exit $failed
fi

# --- 4. Tests ----------------------------------------------------------------------------------
# Run each test binary directly (one process, one CUDA context). A skip on a machine with a GPU
# means the test could not see it: that is a failure here.
run_tests() {  # run_tests NAME BINARY
  step_start "$1"
  local out="$build/$1.out"
  timeout 300 "$2" --gtest_color=no 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  local passed skipped
  passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)"
  skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)"
  if [[ $rc -eq 0 && -z "$skipped" ]]; then
    record "$1" ok $((SECONDS - t0)) "${passed:-0} passed"
  else
    record "$1" FAIL $((SECONDS - t0)) "rc $rc, ${passed:-0} passed, ${skipped:-0} skipped"
  fi
}
gpu_tests="$build/tests/cpp/gpu"
run_tests test_gpu_logic "$gpu_tests/test_gpu_logic"
run_tests test_gpu_kernels "$gpu_tests/test_gpu_kernels"

# --- 5. Kernel benchmark -----------------------------------------------------------------------
step_start "kernel bench"
bench_out="$build/kernel_bench.out"
timeout 240 "$gpu_tests/xccl_kernel_bench" --csv "$logdir/kernel_bench.csv" 2>&1 | tee "$bench_out"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 0 ]]; then
  record kernel_bench ok $((SECONDS - t0)) "csv: $logdir/kernel_bench.csv"
  # The roofline and each kernel's largest-size row (world 8) for the summary.
  bench_lines="$(grep -m1 'HBM roofline' "$bench_out")"$'\n'"$(
    awk '$1 ~ /^[a-z_0-9]+$/ && $1 !~ /^[0-9]/ && $1 != "collective" && $2 == 8 { last[$1] = $0 }
         END { for (k in last) print last[k] }' "$bench_out" |
      sort)"
else
  record kernel_bench FAIL $((SECONDS - t0)) "rc $rc"
fi

print_summary
exit $failed
