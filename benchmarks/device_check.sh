#!/usr/bin/env bash
# One-shot check on a machine with NVIDIA GPUs, no network, torch and the CUDA toolkit
# installed: build the kernels, the GPU tests, the kernel benchmark and the Python extension, run
# them, print a summary. Meant to finish well inside 8 minutes on an H200 (16 cores).
#
#   benchmarks/device_check.sh [--build-only] [--out DIR]
#
#   --build-only   configure and build only (the CMake targets and the extension, which is
#                  installed with pip), without looking for a GPU (to check this script on a
#                  machine without one).
#   --out DIR      where the log, the CSVs and the multi-GPU tables go (default: $OUT, else
#                  the build folder).
# Steps, most valuable first: GPU, configure, build (CMake), then the extension is built and
# installed (pip) in the background while the GoogleTests run (test_gpu_logic, test_gpu_kernels,
# test_cuda_ipc). Then, with one GPU: tests/python/test_gpu.py and test_gpu_hardening.py,
# benchmarks/gpu_overhead.py (xccl vs NCCL at world size 1) and the kernel benchmark (virtual
# ranks). With two or more GPUs (multi-GPU mode): benchmarks/gpu_bench.py (xccl vs NCCL on every
# GPU: all_reduce, all_gather_into_tensor, reduce_scatter_tensor from 8 B to 256 MiB on xccl's
# own plan, the kernel route and the vendor route, and small all_reduce replayed from CUDA
# graphs; markdown tables in DIR/gpu_bench/gpu_bench.md and in the summary), then the Python GPU
# tests that need several GPUs (ranks spread over the GPUs; the shared-GPU cases are what the
# one-GPU mode runs), then the one-GPU benchmarks if time is left (skipped, not failed, when it
# is not). Each step has its own timeout, cut to what is left of the time budget; a step the
# budget leaves no time for is a FAIL ("not run"). A failed configure or CMake build (e.g. no
# GoogleTest) costs only the GoogleTests and the kernel benchmark.
# Environment:
#   OUT                 if set (and no --out), the full log (device_check.log), the benchmark
#                       CSVs and the multi-GPU tables go there
#   XCCL_BUILD_DIR      build folder (default: build/device in the repository); the extension
#                       builds in its ext/ subfolder
#   XCCL_GTEST_SOURCE   a googletest source tree to build when CMake finds no installed GTest
#                       (default: third_party/googletest, then /usr/src/googletest)
#   XCCL_CUDA_ARCHS     override the detected architecture, e.g. "90"
#   XCCL_CHECK_BUDGET_S seconds the whole check may take (default 420; not in --build-only)
#
# Exit status: 0 all passed; 1 a step failed; 2 bad usage; 3 no GPU found (nothing was built or
# run).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${XCCL_BUILD_DIR:-$repo/build/device}"
build_only=0
out_dir="${OUT:-}"
while (($# > 0)); do
  case "$1" in
    --build-only) build_only=1 ;;
    --out)
      [[ $# -ge 2 && -n "$2" ]] || { echo "device_check: --out needs a folder" >&2; exit 2; }
      out_dir="$2"
      shift
      ;;
    -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
jobs="$(nproc 2>/dev/null || echo 4)"
budget_s="${XCCL_CHECK_BUDGET_S:-420}"

mkdir -p "$build"
logdir="${out_dir:-$build}"
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
  [[ -n "${overhead_lines:-}" ]] && printf '\n%s\n' "$overhead_lines"
  [[ -n "${bench_lines:-}" ]] && printf '\n%s\n' "$bench_lines"
  [[ -n "${gpu_bench_lines:-}" ]] && printf '\n%s\n' "$gpu_bench_lines"
  echo "log: $log"
}
step_start() { echo; echo "=== $1 ($(date +%H:%M:%S))"; t0=$SECONDS; }
# Seconds a step may run: WANT, or what is left of the budget when that is less.
step_limit() {  # step_limit WANT
  local left=$((budget_s - SECONDS))
  echo $(($1 < left ? $1 : left))
}
# True (and STEP recorded as not run) when LIMIT leaves STEP no useful time. Never let a limit of
# 0 reach timeout(1): 0 there means no limit at all. OPTIONAL steps (the one-GPU benchmarks in
# multi-GPU mode) are recorded as skipped, not failed.
out_of_time() {  # out_of_time STEP LIMIT [optional]
  (($2 >= 20)) && return 1
  if [[ "${3:-}" == optional ]]; then
    record "$1" skipped 0 "the ${budget_s}s budget went to the multi-GPU steps"
  else
    record "$1" FAIL 0 "not run: the ${budget_s}s budget is spent"
  fi
  return 0
}
# Starts STEP (TITLE on screen) when READY is 1 and LIMIT leaves it time, else records why it
# does not run (WHY when not READY; OPTIONAL as out_of_time's) and returns 1.
begin_step() {  # begin_step STEP READY WHY LIMIT TITLE [optional]
  if [[ $2 -ne 1 ]]; then
    record "$1" FAIL 0 "not run: $3"
    return 1
  fi
  out_of_time "$1" "$4" "${6:-}" && return 1
  step_start "$5"
}
# Records the outcome of the step begun last from its command's status RC: ok with OK_NOTE, timed
# out (timeout(1)'s 124, or 137 after its -k), else FAIL with "rc RC: WHY".
end_step() {  # end_step STEP RC LIMIT OK_NOTE WHY
  case $2 in
    0) record "$1" ok $((SECONDS - t0)) "$4" ;;
    124 | 137) record "$1" FAIL $((SECONDS - t0)) "timed out after ${3}s" ;;
    *) record "$1" FAIL $((SECONDS - t0)) "rc $2: $5" ;;
  esac
}

# --- 1. GPU ------------------------------------------------------------------------------------
step_start "GPU"
gpu_name=""
gpu_count=0
multi_gpu=0
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
  # torch's count honours CUDA_VISIBLE_DEVICES; nvidia-smi's is the fallback.
  gpu_count="$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)"
  [[ "$gpu_count" =~ ^[0-9]+$ ]] || gpu_count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
  ((gpu_count >= 2)) && multi_gpu=1
  mode="one-GPU"
  ((multi_gpu)) && mode="multi-GPU"
  echo "GPU: $gpu_name ($gpu_count visible: $mode mode)"
  record gpu ok $((SECONDS - t0)) "$gpu_count x $gpu_name"
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

# The Python extension builds in the background from here on: pip runs setup.py (CMake in
# $build/ext, the CUDA parts on, this torch) and installs xccl._C. Each build compiles the five
# kernel TUs (csrc/kernels/*.cu), too few to fill 16 cores alone, so the two builds overlap, and the
# extension's finishing overlaps the GoogleTests, which hold the GPU, not the CPUs. No index: the
# machine has no network, and --no-deps --no-build-isolation need nothing from one. timeout(1)
# leads its own process group, which the EXIT trap ends if the script stops early.
ext_out="$build/ext_install.out"
ext_limit=0  # --build-only: no limit (a 2-core machine takes long)
# With a GPU: bounded, and never 0 (which timeout(1) reads as no limit).
[[ $build_only -eq 0 ]] && ext_limit="$(step_limit 400)" && ((ext_limit < 1)) && ext_limit=1
ext_t0=$SECONDS
ext_ok=0
echo "extension: pip install in the background from $(date +%H:%M:%S); log: $ext_out"
CUDACXX="$nvcc_path" XCCL_GPU=ON XCCL_CUDA_ARCHS="$archs" XCCL_BUILD_DIR="$build/ext" \
  MAX_JOBS="$jobs" PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore \
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
  timeout -k 10 "$ext_limit" python3 -m pip install --no-build-isolation --no-deps --no-index \
  -q "$repo" >"$ext_out" 2>&1 &
ext_pid=$!
trap '[[ -n "$ext_pid" ]] && kill -TERM -- "-$ext_pid" 2>/dev/null' EXIT
finish_extension() {  # waits for the pip install; records it; sets ext_ok
  step_start "extension"
  wait "$ext_pid"
  local rc=$? where
  ext_pid=""
  # From / so that nothing but the installed package can answer `import xccl`.
  if [[ $rc -eq 0 ]] && where="$(cd / && python3 -c 'import xccl; print(xccl.__file__)' 2>&1)"; then
    ext_ok=1
    echo "xccl installed: $where"
    record extension ok $((SECONDS - ext_t0)) "pip install, sm $archs (alongside other steps)"
  else
    # pip ends with its own traceback: show the build's errors first, then that end.
    grep -E 'FAILED:|error:|Error|interrupted|Killed' "$ext_out" | head -n 30
    tail -n 15 "$ext_out"
    [[ $rc -eq 0 ]] && echo "$where"
    local why="rc $rc"
    [[ $rc -eq 124 || $rc -eq 137 ]] && why="timed out after ${ext_limit}s"
    [[ $rc -eq 0 ]] && why="installed but import xccl fails"
    record extension FAIL $((SECONDS - ext_t0)) "$why; log: $ext_out"
  fi
}

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

# --- 3. Build ----------------------------------------------------------------------------------
# A failed configure or build costs the GoogleTests and the kernel benchmark only: the extension
# builds on its own (above), and its Python tests and benchmark still run.
native_ok=0
if [[ $configure_ok -eq 1 ]]; then
  step_start "build"
  if cmake --build "$build" -j "$jobs" --target xccl_kernels test_gpu_logic test_gpu_kernels \
       test_cuda_ipc xccl_kernel_bench; then
    native_ok=1
    record build ok $((SECONDS - t0)) "kernels, gpu tests, kernel bench"
  else
    record build FAIL $((SECONDS - t0))
  fi
else
  record build FAIL 0 "not run: configure failed"
fi

if [[ $build_only -eq 1 ]]; then
  finish_extension
  record run skipped 0 "--build-only"
  print_summary
  exit $failed
fi

# --- 4. Tests ----------------------------------------------------------------------------------
# Run each test binary directly (one process, one CUDA context). A skip on a machine with a GPU
# means the test could not see it: that is a failure here.
run_tests() {  # run_tests NAME BINARY
  local limit
  limit="$(step_limit 300)"
  begin_step "$1" 1 "" "$limit" "$1" || return
  local out="$build/$1.out"
  timeout -k 10 "$limit" "$2" --gtest_color=no 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  local passed skipped
  passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)"
  skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)"
  if [[ $rc -eq 0 && -z "$skipped" ]]; then
    record "$1" ok $((SECONDS - t0)) "${passed:-0} passed"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && rc="$rc (timed out after ${limit}s)"
    record "$1" FAIL $((SECONDS - t0)) "rc $rc, ${passed:-0} passed, ${skipped:-0} skipped"
  fi
}
gpu_tests="$build/tests/cpp/gpu"
if [[ $native_ok -eq 1 ]]; then
  run_tests test_gpu_logic "$gpu_tests/test_gpu_logic"
  run_tests test_gpu_kernels "$gpu_tests/test_gpu_kernels"
  # CUDA IPC workspaces between fork()ed processes on the one GPU.
  run_tests test_cuda_ipc "$gpu_tests/test_cuda_ipc"
else
  record gtests FAIL 0 "not run: no build"
fi
finish_extension

# --- 5. Python GPU tests -----------------------------------------------------------------------
# tests/python/test_gpu.py and test_gpu_hardening.py against the installed extension (the
# harness forks its ranks from a forkserver; timeout(1) signals its whole process group). Skips
# count as failures, as above. In multi-GPU mode only the cases that need several GPUs run
# (`-k "not shared"` leaves out the ranks-share-cuda:0 parametrisations, which one GPU covers).
python_tests() {
  local limit out rc tally passed failed_n skipped errors note
  local select=()
  ((multi_gpu)) && select=(-k "not shared")
  limit="$(step_limit 240)"
  begin_step test_gpu.py "$ext_ok" "no extension" "$limit" test_gpu.py || return
  out="$build/test_gpu_py.out"
  (cd "$repo" && PYTHONPATH="$repo/tests/python${PYTHONPATH:+:$PYTHONPATH}" \
    timeout -k 10 "$limit" python3 -m pytest tests/python/test_gpu.py \
    tests/python/test_gpu_hardening.py "${select[@]}" -q -p no:cacheprovider) 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  # pytest's last line: "3 passed, 1 skipped in 41.2s" (any of passed/failed/skipped/error(s)).
  tally="$(tail -n 3 "$out" | grep -E '[0-9]+ (passed|failed|skipped|errors?)' | tail -n1)"
  count() { grep -oE "[0-9]+ $1" <<<"$tally" | grep -oE '^[0-9]+' || echo 0; }
  passed="$(count passed)" failed_n="$(count failed)" skipped="$(count skipped)"
  errors="$(count 'errors?')"
  note="$passed passed, $failed_n failed, $skipped skipped, $errors errors${select:+ (not shared)}"
  if [[ $rc -eq 0 && $passed -gt 0 && $skipped -eq 0 ]]; then
    record test_gpu.py ok $((SECONDS - t0)) "$note"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && rc="$rc (timed out after ${limit}s)"
    record test_gpu.py FAIL $((SECONDS - t0)) "rc $rc, $note"
  fi
}

# --- 6. xccl vs NCCL on every GPU (multi-GPU mode) ---------------------------------------------
# benchmarks/gpu_bench.py: one `python -m xccl.bench` run per mode (own plan, graph replay,
# kernel route, vendor route) inside its own time limit, which it shares out; the markdown
# tables go to $logdir/gpu_bench/gpu_bench.md and into the summary.
gpu_bench() {
  local limit out rc dir="$logdir/gpu_bench"
  limit="$(step_limit 200)"
  begin_step gpu_bench "$ext_ok" "no extension" "$limit" "gpu_bench ($gpu_count GPUs)" || return
  out="$build/gpu_bench.out"
  # Its own limit leaves 15 s to write the tables after the last run.
  timeout -k 10 "$limit" python3 "$repo/benchmarks/gpu_bench.py" --out "$dir" \
    --nranks "$gpu_count" --time-limit $((limit > 45 ? limit - 15 : 30)) 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  gpu_bench_lines="$(sed -n '/^== gpu_bench/,$p' "$out")"
  end_step gpu_bench "$rc" "$limit" "tables: $dir/gpu_bench.md" "a run or a check failed (see $dir)"
}

# --- 7. xccl vs NCCL at world size 1 -----------------------------------------------------------
gpu_overhead() {
  local limit out rc
  limit="$(step_limit 120)"
  begin_step gpu_overhead "$ext_ok" "no extension" "$limit" gpu_overhead "$optional" || return
  out="$build/gpu_overhead.out"
  # Its own time limit (counted after torch's import) ends a hung run with the rows it has.
  timeout -k 10 "$limit" python3 "$repo/benchmarks/gpu_overhead.py" \
    --csv "$logdir/gpu_overhead.csv" --time-limit $((limit > 50 ? limit - 25 : 25)) 2>&1 |
    tee "$out"
  rc=${PIPESTATUS[0]}
  overhead_lines="$(sed -n '/^== gpu_overhead/,$p' "$out" | grep -v '^  FAIL ')"
  local why="a measurement failed (see the table)"
  ((rc == 3)) && why="torch sees no GPU"
  end_step gpu_overhead "$rc" "$limit" "csv: $logdir/gpu_overhead.csv" "$why"
}

# --- 8. Kernel benchmark (virtual ranks on one GPU) --------------------------------------------
kernel_bench() {
  local limit bench_out rc
  limit="$(step_limit 240)"
  begin_step kernel_bench "$native_ok" "no build" "$limit" "kernel bench" "$optional" || return
  bench_out="$build/kernel_bench.out"
  # Less than its full time left: the --quick sweep (every 64x in size instead of 8x).
  local quick=()
  ((limit < 240)) && quick=(--quick)
  timeout -k 10 "$limit" "$gpu_tests/xccl_kernel_bench" "${quick[@]}" \
    --csv "$logdir/kernel_bench.csv" 2>&1 | tee "$bench_out"
  rc=${PIPESTATUS[0]}
  if [[ $rc -eq 0 ]]; then
    record kernel_bench ok $((SECONDS - t0)) "${quick[*]:+--quick, }csv: $logdir/kernel_bench.csv"
    # The roofline and each kernel's largest-size row (world 8) for the summary.
    bench_lines="$(grep -m1 'HBM roofline' "$bench_out")"$'\n'"$(
      awk '$1 ~ /^[a-z_0-9]+$/ && $1 !~ /^[0-9]/ && $1 != "collective" && $2 == 8 { last[$1] = $0 }
           END { for (k in last) print last[k] }' "$bench_out" |
        sort)"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && rc="$rc (timed out after ${limit}s)"
    record kernel_bench FAIL $((SECONDS - t0)) "rc $rc"
  fi
}

# Multi-GPU mode: the table across GPUs first (what RESULTS.md records), then the tests that
# need several GPUs, then the one-GPU benchmarks with what is left (optional there).
optional=""
if ((multi_gpu)); then
  gpu_bench
  python_tests
  optional=optional
else
  python_tests
fi
gpu_overhead
kernel_bench
print_summary
exit $failed
