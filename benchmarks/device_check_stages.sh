# The stages of benchmarks/device_check.sh, sourced by it (not run on their own). Each stage_NAME
# function sets `state` (ok, FAIL, partial, not run) and `note`, runs its commands through
# `bounded` (or `bounded_to` and `wait_bounded`) within the stage's deadline, and writes its
# output to "$stage_log". It may read and set the script's globals: gpu_count, gpu_name, archs,
# header, ext_ok, build, work, out_dir, repo, here, jobs.
# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the globals above, state and note are the script's

stage_gpu() {
  local line torch_line
  line="$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
  torch_line="$(timeout $((stage_deadline - SECONDS)) python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>>"$stage_log" | tail -n1)"
  gpu_count="$(awk '{print $3}' <<<"$torch_line")"
  [[ "$gpu_count" =~ ^[0-9]+$ ]] || gpu_count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
  gpu_name="$(cut -d, -f1 <<<"$line")"
  [[ -z "$gpu_name" ]] && gpu_name="$(cut -d' ' -f4- <<<"$torch_line")"
  if [[ -z "$archs" ]]; then
    archs="$(cut -d, -f2 <<<"$line" | tr -d '. ')"
  fi
  local driver mps="no MPS daemon"
  driver="$(cut -d, -f3 <<<"$line" | tr -d ' ')"
  pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1 && mps="MPS daemon running"
  ((gpu_count >= 1)) && [[ "$mps" == "no MPS daemon" ]] && start_mps && mps="MPS daemon started"
  header="$(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo -), budget ${budget_s} s: ${gpu_count} x ${gpu_name:-no GPU}, driver ${driver:--}, sm ${archs:--}, torch ${torch_line%% *}, ${jobs} cores, ${mps}"
  echo "$header" >>"$stage_log"
  if ((gpu_count < 1)); then
    state=FAIL note="NO GPU: nvidia-smi lists none and torch sees none; nothing was built or run"
    return
  fi
  state=ok note="$gpu_count x $gpu_name, sm $archs, $mps (ranks sharing a GPU are time-sliced without one)"
}

# Ranks sharing a GPU without MPS are time-sliced: a kernel spinning on a peer's flags waits out
# whole time slices (docs/gpu.md, "Ranks sharing a GPU"), and stages c and d share one GPU. So
# the check starts a daemon of its own (pipe and log folders in a short temporary folder, as the
# pipe's socket paths are bounded; exported to every later command, which is also where xccl
# looks for it; the log is copied into $work at the end), proves a CUDA context can be made
# through it, and stops it at the end (stop_mps, from finish). If the daemon is missing, does
# not start or serves no client, the check goes on without it and the summary says "no MPS".
# XCCL_CHECK_MPS=0 leaves MPS alone.
mps_started=0 mps_dir=""
start_mps() {
  [[ "${XCCL_CHECK_MPS:-1}" == 0 ]] && return 1
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || return 1
  mps_dir="$(mktemp -d /tmp/xccl-mps.XXXXXX)" || return 1
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
  if timeout 10 nvidia-cuda-mps-control -d >>"$stage_log" 2>&1 &&
     timeout $((stage_deadline - SECONDS > 5 ? stage_deadline - SECONDS : 5)) python3 -c \
       'import torch; torch.ones(1, device="cuda").sum().item()' >>"$stage_log" 2>&1; then
    mps_started=1
    echo "MPS: a daemon started for this check ($CUDA_MPS_PIPE_DIRECTORY)" >>"$stage_log"
    return 0
  fi
  echo "MPS: could not start a daemon or make a context through it; going on without" \
    >>"$stage_log"
  echo quit | timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1
  cp -r "$mps_dir/log" "$work/mps_log" 2>/dev/null
  rm -rf "$mps_dir"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 1
}
stop_mps() {
  ((mps_started)) || return 0
  echo quit | timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1
  cp -r "$mps_dir/log" "$work/mps_log" 2>/dev/null
  rm -rf "$mps_dir"
  mps_started=0
}

gtest_prefix=""
# GoogleTest: installed, else built from a source tree into the build folder (a few seconds).
find_gtest() {
  local d src="${XCCL_GTEST_SOURCE:-}" candidate
  for d in /usr/include /usr/local/include; do [[ -f "$d/gtest/gtest.h" ]] && return 0; done
  for candidate in "$repo/third_party/googletest" /usr/src/googletest; do
    [[ -z "$src" && -f "$candidate/CMakeLists.txt" ]] && src="$candidate"
  done
  if [[ -z "$src" ]]; then
    echo "GoogleTest: none installed and no source tree (set XCCL_GTEST_SOURCE)" >>"$stage_log"
    return 1
  fi
  echo "GoogleTest: building $src" >>"$stage_log"
  bounded cmake -S "$src" -B "$build/_gtest" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$build/_gtest/install" &&
    bounded cmake --build "$build/_gtest" -j "$jobs" &&
    bounded cmake --install "$build/_gtest" &&
    gtest_prefix="$build/_gtest/install"
}

stage_build() {
  local have_gtest=0 rc where
  find_gtest && have_gtest=1
  # pip runs setup.py, which configures $build against this torch and builds the extension with
  # all cores; no index (no network, and --no-deps --no-build-isolation need none).
  local arch_env=()
  [[ -n "$archs" ]] && arch_env=("XCCL_CUDA_ARCHS=$archs")
  bounded env XCCL_GPU=ON XCCL_BUILD_DIR="$build" MAX_JOBS="$jobs" "${arch_env[@]}" \
    CMAKE_PREFIX_PATH="${gtest_prefix}${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" \
    GTEST_ROOT="$gtest_prefix" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 \
    python3 -m pip install -v --no-build-isolation --no-deps --no-index "$repo"
  rc=$?
  # From / so that only the installed package can answer.
  if ((rc == 0)) && where="$(cd / && python3 -c 'import xccl, xccl._C; print(xccl.__file__)' 2>&1)"; then
    ext_ok=1
    note="extension installed ($where)"
  else
    timed_out "$rc" && note="extension: timed out" || note="extension: FAILED (rc $rc)"
    state=FAIL
    return
  fi
  # The same build folder: only the GoogleTest sources are left to compile.
  if [[ -d "$build/tests/cpp/gpu" ]]; then
    bounded cmake --build "$build" -j "$jobs" --target test_gpu_kernels test_cuda_ipc \
      xccl_kernel_bench
    rc=$?
    if ((rc != 0)); then
      state=FAIL note="$note; GoogleTests: $(timed_out "$rc" && echo timed out || echo "FAILED (rc $rc)")"
      return
    fi
    note="$note; GoogleTests built"
  else
    note="$note; GoogleTests not configured (GoogleTest $( ((have_gtest)) && echo found || echo missing)): stage b cannot run"
  fi
  state=ok
}

stage_kernels() {
  local bin="$build/tests/cpp/gpu" shards=4 i rc logs=() tally
  if [[ ! -x "$bin/test_gpu_kernels" ]]; then
    state="not run" note="test_gpu_kernels was not built (see the build stage)"
    return
  fi
  # Shards in parallel processes: the host-side reference and inputs, not the GPU, bound it.
  for ((i = 0; i < shards; i++)); do
    logs+=("$work/kernels.shard$i.log")
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i bounded_to "${logs[-1]}" \
      "$bin/test_gpu_kernels" --gtest_color=no
  done
  if [[ -x "$bin/test_cuda_ipc" ]]; then
    logs+=("$work/kernels.cuda_ipc.log")
    bounded_to "${logs[-1]}" "$bin/test_cuda_ipc" --gtest_color=no
  fi
  wait_bounded
  rc=$?
  cat "${logs[@]}" >>"$stage_log"
  tally="$(planner tally gtest "${logs[@]}")"
  verdict "$rc" "$tally"
}

# verdict RC TALLY: the stage's state from its commands' status and its tests' tally.
verdict() {
  local failed skipped not_run passed
  read -r passed _ failed _ skipped _ not_run _ <<<"${2//,/}"
  note="$2"
  if ((failed > 0)); then
    state=FAIL
  elif ((skipped > 0)); then
    state=FAIL note="$2: a skip on a GPU machine means a test could not use the GPU"
  elif ((not_run > 0)) || timed_out "$1"; then
    state=partial note="$2: the stage's time ran out"
  elif (($1 != 0 || passed == 0)); then
    state=FAIL note="$2 (rc $1)"
  else
    state=ok
  fi
}

# gpu_pytest PYTEST-ARGS...: tests/python/test_gpu*.py, the kernel route forced; the most
# valuable file first (the full matrix), pytest-xdist's workers where it is installed.
gpu_pytest() {
  local workers=()
  python3 -c 'import xdist' 2>/dev/null && workers=(-n 4)
  (cd "$repo" && XCCL_GPU_ALGO=kernel PYTHONUNBUFFERED=1 \
    PYTHONPATH="$repo/tests/python${PYTHONPATH:+:$PYTHONPATH}" \
    bounded python3 -m pytest -v -p no:cacheprovider "${workers[@]}" \
    tests/python/test_gpu_matrix.py tests/python/test_gpu.py tests/python/test_gpu_hardening.py \
    tests/python/test_gpu_work.py "$@")
}

stage_shared() {
  local rc select=()
  ((ext_ok)) || { state="not run" note="no extension (see the build stage)"; return; }
  # With several GPUs the spread placements are stage e's.
  ((gpu_count >= 2)) && select=(-k "not spread")
  gpu_pytest "${select[@]}"
  rc=$?
  verdict "$rc" "$(planner tally pytest "$stage_log")"
}

stage_perf() {
  local rc
  ((ext_ok)) || { state="not run" note="no extension (see the build stage)"; return; }
  # gpu_bench.py shares its time out itself (least valuable mode dropped first); it may overrun
  # its limit by 10 s ending a run, and 5 s are kept for its tables.
  bounded python3 "$here/gpu_bench.py" --out "$work/perf" --one-gpu \
    --time-limit $((stage_deadline - SECONDS - 15))
  rc=$?
  [[ -s "$work/perf/gpu_bench.md" ]] && cp "$work/perf/gpu_bench.md" "$out_dir/bench.md"
  # Time left: the kernels alone with virtual ranks (one process, so no time-slicing), against
  # the copy rate it measures itself; its table joins bench.md.
  local kbench="$build/tests/cpp/gpu/xccl_kernel_bench" krc
  if [[ -x "$kbench" ]] && ((stage_deadline - SECONDS >= 20)); then
    bounded "$kbench" --quick --worlds 2,4 --csv "$work/perf/kernel_bench.csv"
    krc=$?
    {
      echo
      echo "### kernels alone: 2 and 4 virtual ranks (xccl_kernel_bench --quick, exit status $krc)"
      echo
      echo '```'
      sed -n '/HBM roofline/,$p' "$stage_log"
      echo '```'
    } >>"$out_dir/bench.md"
  fi
  if ((rc == 0)); then
    state=ok note="tables in bench.md"
  elif ((rc == 4)); then
    state=partial note="a mode was left out for lack of time (bench.md says which)"
  elif timed_out "$rc"; then
    state=partial note="timed out; the runs that finished are in bench.md"
  else
    state=FAIL note="rc $rc: a run or a check failed (bench.md says which)"
  fi
}

stage_multi() {
  local rc
  ((ext_ok)) || { state="not run" note="no extension (see the build stage)"; return; }
  # Two thirds of the time for the table across GPUs, the rest for the spread tests.
  local bench_s=$(((stage_deadline - SECONDS) * 2 / 3))
  bounded python3 "$here/gpu_bench.py" --out "$work/multi" --nranks "$gpu_count" \
    --time-limit $((bench_s - 15))
  rc=$?
  [[ -s "$work/multi/gpu_bench.md" ]] && cp "$work/multi/gpu_bench.md" "$out_dir/bench_multi.md"
  local bench_note="gpu_bench rc $rc"
  local start_line
  start_line=$(($(wc -l <"$stage_log") + 1))
  gpu_pytest -k "not shared"
  local prc=$?
  verdict "$prc" "$(tail -n +"$start_line" "$stage_log" | planner tally pytest /dev/stdin)"
  note="$bench_note (bench_multi.md); spread tests: $note"
  ((rc != 0 && rc != 4)) && ! timed_out "$rc" && state=FAIL
}
