# The stages of benchmarks/device_check.sh, sourced by it (not run on their own). Each stage_NAME
# function sets `state` (ok, FAIL, partial, not run) and `note`, runs its commands through
# `bounded` (or `bounded_to` and `wait_bounded`) within the stage's deadline, and writes its
# output to "$stage_log". It may read and set the script's globals: gpu_count, gpu_name, archs,
# sms, torch_cuda, header, ext_ok, build, kbuild, work, out_dir, repo, here, jobs, rehearse,
# per_test_s. With --rehearse (rehearse=1) each GPU command is replaced by its CPU counterpart
# (the emulated kernels, CPU ranks, the doctor without a GPU) and everything else is the same.
# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the globals above, state and note are the script's

rehearse_build="${DEVICE_CHECK_REHEARSE_BUILD:-${repo:-.}/build/cmake}"
((${rehearse:-0})) && kbuild="$rehearse_build"

stage_gpu() {
  if ((rehearse)); then
    gpu_count=1 gpu_name="none (rehearsal)" sms=132
    header="$header, $(hostname), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo -), ${jobs} cores"
    state=ok note="rehearsal on CPU: every GPU command replaced by its CPU counterpart; the 1-GPU plan, ${sms} SMs assumed"
    return
  fi
  local line torch_line
  line="$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
  # version, CUDA, GPUs, SMs of GPU 0, its name
  torch_line="$(timeout $((stage_deadline - SECONDS)) python3 -c 'import torch
a = torch.cuda.is_available()
p = torch.cuda.get_device_properties(0) if a else None
print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), p.multi_processor_count if p else 0, p.name if p else "")' 2>>"$stage_log" | tail -n1)"
  gpu_count="$(awk '{print $3}' <<<"$torch_line")"
  [[ "$gpu_count" =~ ^[0-9]+$ ]] || gpu_count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
  local n
  n="$(awk '{print $4}' <<<"$torch_line")"
  [[ "$n" =~ ^[0-9]+$ ]] && ((n > 0)) && sms=$n
  torch_cuda="$(awk '{print $2}' <<<"$torch_line")"
  gpu_name="$(cut -d, -f1 <<<"$line")"
  [[ -z "$gpu_name" ]] && gpu_name="$(cut -d' ' -f5- <<<"$torch_line")"
  if [[ -z "$archs" ]]; then
    archs="$(cut -d, -f2 <<<"$line" | tr -d '. ')"
  fi
  local driver mps="no MPS daemon"
  driver="$(cut -d, -f3 <<<"$line" | tr -d ' ')"
  if ((gpu_count >= 1)); then
    if use_stale_mps; then
      mps="MPS daemon of an earlier run, used ($CUDA_MPS_PIPE_DIRECTORY)"
    elif [[ -n "$mps_stale" ]]; then
      mps="$mps_stale"
      start_mps && mps="$mps; MPS daemon started"
    else
      start_mps
      case $? in
        0) mps="MPS daemon started" ;;
        2) mps="an MPS daemon the check did not start, used through its default pipe folder" ;;
      esac
    fi
  fi
  header="$(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo -), budget ${budget_s} s: ${gpu_count} x ${gpu_name:-no GPU}, ${sms} SMs, driver ${driver:--}, sm ${archs:--}, torch ${torch_line%% *}, ${jobs} cores, ${mps}"
  echo "$header" >>"$stage_log"
  if ((gpu_count < 1)); then
    state=FAIL note="NO GPU: nvidia-smi lists none and torch sees none; nothing was built or run"
    return
  fi
  state=ok note="$gpu_count x $gpu_name, $sms SMs, sm $archs, $mps (ranks sharing a GPU are time-sliced without one)"
}

# Ranks sharing a GPU without MPS are time-sliced: a kernel spinning on a peer's flags waits out
# whole time slices (docs/gpu.md, "Ranks sharing a GPU"), and stages c, d and f share one GPU. So
# the check starts a daemon of its own (pipe and log folders in a short temporary folder, as the
# pipe's socket paths are bounded; exported to every later command, which is also where xccl
# looks for it; the log is copied into $work at the end), proves a CUDA context can be made
# through it, and stops it at the end (stop_mps, from finish). If the daemon is missing, does
# not start or serves no client, the check goes on without it and the summary says "no MPS".
# A run killed outright leaves its daemon behind (finish never ran): use_stale_mps finds it by its
# pipe folder, and uses it (exported to every rank, so none bypasses it) when it still serves a
# context, else stops it. XCCL_CHECK_MPS=0 leaves MPS alone. (MPS_STALE_ROOT: a folder other than
# /tmp for the daemons' folders, for the CPU tests.)
mps_started=0 mps_dir="" mps_stale=""
mps_probe() {  # a CUDA context through the exported daemon
  timeout $((stage_deadline - SECONDS > 5 ? stage_deadline - SECONDS : 5)) python3 -c \
    'import torch; torch.ones(1, device="cuda").sum().item()' >>"$stage_log" 2>&1
}
use_stale_mps() {
  mps_stale=""
  [[ "${XCCL_CHECK_MPS:-1}" == 0 ]] && return 1
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || return 1
  local pipe folder
  for pipe in "${MPS_STALE_ROOT:-/tmp}"/xccl-mps.*/pipe; do
    [[ -e "$pipe/control" ]] || continue
    folder="${pipe%/pipe}"
    # A daemon answers on its control pipe; a folder whose daemon is gone is only removed.
    if ! echo get_server_list | CUDA_MPS_PIPE_DIRECTORY="$pipe" timeout 5 \
      nvidia-cuda-mps-control >>"$stage_log" 2>&1; then
      echo "MPS: $folder has no daemon behind it; removed" >>"$stage_log"
      rm -rf "$folder"
      continue
    fi
    export CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$folder/log"
    if mps_probe; then
      mps_started=1 mps_dir="$folder"  # ours: stopped at the end like a fresh one
      echo "MPS: the daemon an earlier run left ($pipe) serves a context: used" >>"$stage_log"
      return 0
    fi
    echo "MPS: the daemon an earlier run left ($pipe) serves no context: stopped" >>"$stage_log"
    echo quit | timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1
    rm -rf "$folder"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    mps_stale="a stale MPS daemon (serving no context) stopped"
  done
  return 1
}
start_mps() {
  [[ "${XCCL_CHECK_MPS:-1}" == 0 ]] && return 1
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || return 1
  # A daemon not started by this script (another pipe folder): leave it alone, say so.
  if pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1 && [[ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]]; then
    echo "MPS: a daemon this script did not start is running; ranks use its default pipe folder" >>"$stage_log"
    return 2
  fi
  mps_dir="$(mktemp -d "${MPS_STALE_ROOT:-/tmp}/xccl-mps.XXXXXX")" || return 1
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
  if timeout 10 nvidia-cuda-mps-control -d >>"$stage_log" 2>&1 && mps_probe; then
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
  if [[ -f "$build/_gtest/install/include/gtest/gtest.h" ]]; then
    gtest_prefix="$build/_gtest/install"  # built by an earlier run on this machine
    return 0
  fi
  for candidate in "$repo/third_party/googletest" /usr/src/googletest; do
    [[ -z "$src" && -f "$candidate/CMakeLists.txt" ]] && src="$candidate"
  done
  if [[ -z "$src" ]]; then
    echo "GoogleTest: none installed and no source tree (carry third_party/googletest)" >>"$stage_log"
    return 1
  fi
  echo "GoogleTest: building $src" >>"$stage_log"
  bounded cmake -S "$src" -B "$build/_gtest" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$build/_gtest/install" &&
    bounded cmake --build "$build/_gtest" -j "$jobs" &&
    bounded cmake --install "$build/_gtest" &&
    gtest_prefix="$build/_gtest/install"
}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

# -- the extension: built in the background from stage a on, waited for by stage ext ------------
ext_pid="" ext_log="" ext_t0=0
start_ext() {  # start_ext SECONDS
  ext_log="$work/ext_build.log"
  ext_t0=$SECONDS
  if ((rehearse)); then
    # The CPU counterpart: the extension scripts/test.sh installed, imported as the check does.
    timeout -k 5 "$1" env -C / python3 -c 'import xccl, xccl._C; print(xccl.__file__)' \
      >"$ext_log" 2>&1 &
    ext_pid=$!
    return
  fi
  local arch_env=()
  [[ -n "$archs" ]] && arch_env=("XCCL_CUDA_ARCHS=$archs")
  # pip runs setup.py, which configures $build against this torch and builds the extension with
  # all cores, at a lower priority than the torch-free tests beside it; no index (no network,
  # and --no-deps --no-build-isolation need none).
  timeout -k 5 "$1" nice -n 10 env XCCL_GPU=ON XCCL_BUILD_DIR="$build" MAX_JOBS="$jobs" \
    "${arch_env[@]}" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 \
    python3 -m pip install -v --no-build-isolation --no-deps --no-index "$repo" >"$ext_log" 2>&1 &
  ext_pid=$!
}
ext_installed() {  # from / so that only the installed package can answer
  (cd / && timeout 60 python3 -c 'import xccl, xccl._C; print(xccl.__file__)' 2>&1)
}

stage_build() {
  local rc have_gtest=0 i ext_s=0
  # The extension's build gets the budgets of this stage, stage b and its own stage.
  for i in "${!names[@]}"; do
    [[ ${names[$i]} =~ ^(build|kernels|ext)$ ]] && ext_s=$((ext_s + ${budgets[$i]:-0}))
  done
  if [[ $mode == build-only ]]; then ext_s=86400; fi
  start_ext "$ext_s"
  if ((rehearse)); then
    # The CPU counterpart of the torch-free GPU tests: the emulated kernels' GoogleTest.
    bounded cmake --build "$kbuild" --target test_gpu_emulated
    rc=$?
    [[ -x "$kbuild/tests/cpp/gpu/test_gpu_emulated" ]] && ((rc == 0)) &&
      { state=ok note="rehearsal: test_gpu_emulated built in $kbuild; the extension's stand-in started"; return; }
    state=FAIL note="rehearsal: test_gpu_emulated: $(timed_out "$rc" && echo timed out || echo "FAILED (rc $rc)")"
    return
  fi
  find_gtest && have_gtest=1
  if ((!have_gtest)); then
    state=FAIL note="no GoogleTest (carry third_party/googletest, benchmarks/README.md): stage b cannot run; the extension builds on"
    return
  fi
  local cuda="$torch_cuda"
  [[ -z "$cuda" || "$cuda" == None ]] &&
    cuda="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
  local arch=()
  [[ -n "$archs" ]] && arch=("-DXCCL_CUDA_ARCHS=$archs")
  # Torch-free: no XCCL_TORCH_ROOT, so nothing of torch is compiled or linked here.
  bounded cmake -S "$repo" -B "$kbuild" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DXCCL_GPU=ON -DXCCL_TORCH_CUDA="$cuda" "${arch[@]}" \
    -DCMAKE_PREFIX_PATH="${gtest_prefix}${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" &&
    bounded cmake --build "$kbuild" -j "$jobs" --target test_gpu_kernels test_cuda_ipc \
      xccl_kernel_bench
  rc=$?
  if ((rc == 0)); then
    state=ok note="torch-free GPU tests built in $kbuild; the extension builds beside (stage a ext)"
  else
    state=FAIL note="torch-free GPU tests: $(timed_out "$rc" && echo timed out || echo "FAILED (rc $rc)"); the extension builds on"
  fi
}

stage_ext() {
  local rc where
  if [[ -z "$ext_pid" ]]; then
    start_ext $((stage_deadline - SECONDS))  # a rerun (--only) of a stage that needs it
  fi
  while kill -0 "$ext_pid" 2>/dev/null && ((SECONDS < stage_deadline)); do sleep 1; done
  if kill -0 "$ext_pid" 2>/dev/null; then
    kill -TERM -- "-$ext_pid" 2>/dev/null || kill -TERM "$ext_pid" 2>/dev/null
  fi
  wait "$ext_pid"
  rc=$?
  ext_pid=""
  cat "$ext_log" >>"$stage_log"
  if ((rc == 0)) && where="$(ext_installed)"; then
    ext_ok=1
    state=ok note="extension installed ($(tail -n1 <<<"$where")) after $((SECONDS - ext_t0)) s of building"
  else
    state=FAIL note="extension: $(timed_out "$rc" && echo "timed out" || echo "FAILED (rc $rc)") after $((SECONDS - ext_t0)) s; stages c, d and f cannot run"
  fi
}

# reuse_stage NAME: whether a stage's work is still here from the last run (--only); sets note.
reuse_stage() {
  case $1 in
    build)
      local bin="$kbuild/tests/cpp/gpu/test_gpu_kernels"
      ((rehearse)) && bin="$kbuild/tests/cpp/gpu/test_gpu_emulated"
      [[ -x "$bin" ]] && note="$bin" && return 0
      ;;
    ext)
      local where
      where="$(ext_installed)" && ext_ok=1 && note="$(tail -n1 <<<"$where")" && return 0
      ;;
  esac
  return 1
}

# verdict RC TALLY: the stage's state from its commands' status and its tests' tally.
verdict() {
  local failed skipped not_run passed
  read -r passed _ failed _ skipped _ not_run _ <<<"${2//,/}"
  note="$2"
  if [[ "$2" == *"HUNG "* ]]; then
    state=FAIL note="$2"
  elif ((failed > 0)); then
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

# gtest_worlds BINARY ARGS...: the group sizes its tests name (".../W4_..."), comma-separated.
gtest_worlds() {
  "$@" --gtest_list_tests 2>/dev/null | grep -o 'W[0-9]\+_' | tr -d 'W_' | sort -un | paste -sd,
}

stage_kernels() {
  local runs=() i rc=0 r one logs=() tally fit_line n why
  if ((rehearse)); then
    runs=("$kbuild/tests/cpp/gpu/test_gpu_emulated --gtest_filter=${DEVICE_CHECK_REHEARSE_FILTER:-*W2_*:*W3_*}")
  else
    runs=("$kbuild/tests/cpp/gpu/test_gpu_kernels" "$kbuild/tests/cpp/gpu/test_cuda_ipc")
  fi
  read -r one _ <<<"${runs[0]}"
  if [[ ! -x "$one" ]]; then
    state="not run" note="$(basename "$one") was not built (see the build stage)"
    return
  fi
  # Virtual-rank groups fill the GPU (gpu_plan's cap): shards only when two groups fit.
  # shellcheck disable=SC2086
  fit_line="$(planner fit --sms "$sms" --worlds "$(gtest_worlds ${runs[0]}),4")"
  read -r n why <<<"$fit_line"
  local shards=1
  ((n >= 2)) && shards=$((n < 4 ? n : 4))
  for i in "${!runs[@]}"; do
    [[ -x "${runs[$i]%% *}" ]] || continue
    logs+=("$work/kernels.$i.log")
    if ((shards > 1)); then
      local s
      for ((s = 0; s < shards; s++)); do
        logs+=("$work/kernels.$i.shard$s.log")
        # shellcheck disable=SC2086
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$s bounded_to "${logs[-1]}" \
          python3 "$here/device_check.py" watch --per-test "$per_test_s" \
          --deadline-s $((stage_deadline - SECONDS - 3)) -- ${runs[$i]} --gtest_color=no
      done
      wait_bounded
      r=$?
      ((rc == 0)) && rc=$r
    else
      # shellcheck disable=SC2086
      bounded_to "${logs[-1]}" python3 "$here/device_check.py" watch --per-test "$per_test_s" \
        --deadline-s $((stage_deadline - SECONDS - 3)) -- ${runs[$i]} --gtest_color=no
      wait_bounded
      r=$?
      ((rc == 0)) && rc=$r
    fi
  done
  cat "${logs[@]}" >>"$stage_log" 2>/dev/null
  tally="$(planner tally gtest "${logs[@]}")"
  verdict "$rc" "$tally"
  note="$note; $( ((shards > 1)) && echo "$shards shards at once" || echo "one binary after the other, one test at a time"): $why; ${per_test_s} s per test"
}

# gpu_pytest SELECT WORKERS PYTEST-ARGS...: pytest with the check's plugin
# (benchmarks/device_check_pytest.py: each test bounded by per_test_s inside the stage's
# deadline, the tests of SELECT), WORKERS pytest-xdist workers (0: none), the kernel route forced.
# A hang the plugin ended (exit status 70: the test ran in the pytest process itself, so the run
# ended with it) is followed by a run of the tests it had not reached, up to 3 times.
gpu_pytest() {
  local select=$1 workers=$2 xdist=() rc tries=0 done_file
  shift 2
  ((workers > 1)) && xdist=(-n "$workers")
  done_file="$(mktemp "$work/pytest_done.XXXXXX")"
  while :; do
    bounded env -C "$repo" XCCL_GPU_ALGO=kernel PYTHONUNBUFFERED=1 DEVICE_CHECK_SELECT="$select" \
      DEVICE_CHECK_TEST_S="$per_test_s" DEVICE_CHECK_DEADLINE=$(($(date +%s) + stage_deadline - SECONDS)) \
      DEVICE_CHECK_DONE_FILE="$done_file" PYTHONPATH="$repo/tests/python:$here${PYTHONPATH:+:$PYTHONPATH}" \
      python3 -m pytest -v -p no:cacheprovider -p device_check_pytest "${xdist[@]}" "$@"
    rc=$?
    ((rc == 70 && tries < 3 && stage_deadline - SECONDS >= 15)) || break
    tries=$((tries + 1))
    echo "device_check: CONTINUE the tests not reached before the hang" >>"$stage_log"
  done
  return "$rc"
}
gpu_test_files=(tests/python/test_gpu_matrix.py tests/python/test_gpu.py
  tests/python/test_gpu_hardening.py tests/python/test_gpu_work.py)
# The rehearsal's CPU counterpart: a 2-rank group of CPU ranks through the same harness, and the
# GPU files' test that runs anywhere.
rehearse_test_files=("tests/python/test_collectives_reduce.py::test_async_work_and_futures[2]"
  tests/python/test_gpu_work.py::test_gpu_side_never_reads_a_premul_factor_on_the_host)

# shared_tests EXTRA-PYTEST-ARGS...: the Python GPU tests; 2-rank groups two at a time where two
# fit the GPU and pytest-xdist is here, every other test one at a time. Sets `concurrency`.
concurrency=""
shared_tests() {
  local rc=0 n why files=("${gpu_test_files[@]}")
  ((rehearse)) && files=("${rehearse_test_files[@]}")
  read -r n why <<<"$(planner fit --sms "$sms" --worlds 2)"
  local rest_why
  rest_why="$(planner fit --sms "$sms" --worlds 3,4 | cut -d' ' -f2-)"
  ((n >= 2)) && why="two of them fit: $why"
  if ((n >= 2)) && python3 -c 'import xdist' 2>/dev/null; then
    local pass r
    for pass in pairs rest; do
      gpu_pytest "$pass" "$([[ $pass == pairs ]] && echo 2 || echo 0)" "${files[@]}" "$@"
      r=$?
      ((r != 0 && r != 5 && rc == 0)) && rc=$r  # 5: pytest found no test of this pass
    done
    concurrency="2-rank tests two at a time ($why), the others one at a time ($rest_why)"
  else
    gpu_pytest "" 0 "${files[@]}" "$@" || rc=$?
    concurrency="one test at a time: $rest_why$( ((n >= 2)) && echo " (2-rank pairs would fit two at a time, but pytest-xdist is missing)")"
  fi
  return "$rc"
}

stage_shared() {
  local rc select=()
  ((ext_ok)) || { state="not run" note="no extension (see stage a ext)"; return; }
  # With several GPUs the spread placements are stage e's.
  ((gpu_count >= 2)) && select=(-k "not spread")
  shared_tests "${select[@]}"
  rc=$?
  verdict "$rc" "$(planner tally pytest "$stage_log")"
  note="$note; $concurrency; ${per_test_s} s per test"
}

# f doctor: `python -m xccl doctor --gpu` with its stamp in a folder of the check's (the user's
# cache is not touched); its output and the stamp come back as doctor_gpu.txt.
stage_doctor() {
  local rc cache="$work/xccl_cache" stamp verify
  ((ext_ok)) || { state="not run" note="no extension (see stage a ext)"; return; }
  mkdir -p "$cache"
  bounded env -C / XCCL_CACHE_DIR="$cache" PYTHONUNBUFFERED=1 python3 -m xccl doctor --gpu
  rc=$?
  stamp="$cache/kernels-verified.json"
  verify="$(grep -E '^(PASS|WARN|FAIL) +gpu\.verify' "$stage_log" | tail -n1)"
  {
    echo "# python -m xccl doctor --gpu (exit status $rc)"
    sed -n '/^=====/!p' "$stage_log"
    echo
    if [[ -s "$stamp" ]]; then
      echo "# the stamp it wrote ($(basename "$stamp"))"
      head -c 65536 "$stamp"
      echo
    else
      echo "# no stamp written"
    fi
  } >"$out_dir/doctor_gpu.txt"
  if ((rehearse)); then
    # No GPU: the doctor's verdict is that there is nothing to verify, and no stamp.
    if [[ "$verify" == WARN*"no CUDA/HIP GPU"* && ! -s "$stamp" ]] && grep -q -- '-> exit' "$stage_log"; then
      state=ok note="rehearsal: the doctor ran to its end; $(tr -s ' ' <<<"$verify"); no stamp"
    else
      state=FAIL note="rehearsal: rc $rc; gpu.verify: ${verify:-no line}"
    fi
    return
  fi
  if timed_out "$rc"; then
    state=partial note="timed out; $(tr -s ' ' <<<"${verify:-no gpu.verify line}")"
  elif ((rc == 0)) && [[ "$verify" == PASS* && -s "$stamp" ]]; then
    state=ok note="$(tr -s ' ' <<<"$verify"); stamp in doctor_gpu.txt"
  else
    state=FAIL note="rc $rc; $(tr -s ' ' <<<"${verify:-no gpu.verify line}"); $([[ -s "$stamp" ]] && echo "stamp written" || echo "no stamp")"
  fi
}

stage_perf() {
  local rc
  ((ext_ok)) || { state="not run" note="no extension (see stage a ext)"; return; }
  mkdir -p "$work/perf"
  if ((rehearse)); then
    # CPU ranks through the same benchmark tool and table writer.
    bounded python3 -m xccl.bench --nranks 2 --ops all_reduce --max 512 --no-progress \
      --json "$work/perf/cpu.json" &&
      bounded python3 -m xccl.bench.markdown "$work/perf/cpu.json=rehearsal"
    rc=$?
    sed -n '/^|/p' "$stage_log" >"$out_dir/bench.md"
    if ((rc == 0)) && [[ -s "$out_dir/bench.md" ]]; then
      state=ok note="rehearsal: 2 CPU ranks, all_reduce 8 B-512 B; table in bench.md"
    else
      state=FAIL note="rehearsal: rc $rc (bench.md $([[ -s "$out_dir/bench.md" ]] && echo written || echo empty))"
    fi
    return
  fi
  # gpu_bench.py shares its time out itself (least valuable mode dropped first; its three
  # one-GPU modes need 55 s); it may overrun its limit by 10 s ending a run, and 5 s are kept for
  # its tables.
  bounded python3 "$here/gpu_bench.py" --out "$work/perf" --one-gpu \
    --time-limit $((stage_deadline - SECONDS - 15))
  rc=$?
  [[ -s "$work/perf/gpu_bench.md" ]] && cp "$work/perf/gpu_bench.md" "$out_dir/bench.md"
  # Time left: the kernels alone with virtual ranks (one process, so no time-slicing), against
  # the copy rate it measures itself; its table joins bench.md.
  local kbench="$kbuild/tests/cpp/gpu/xccl_kernel_bench" krc
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
    state=ok note="tables in bench.md$([[ -n "${krc:-}" ]] || echo "; no time left for xccl_kernel_bench")"
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
  ((ext_ok)) || { state="not run" note="no extension (see stage a ext)"; return; }
  # Two thirds of the time for the table across GPUs, the rest for the spread tests.
  local bench_s=$(((stage_deadline - SECONDS) * 2 / 3))
  bounded python3 "$here/gpu_bench.py" --out "$work/multi" --nranks "$gpu_count" \
    --time-limit $((bench_s - 15))
  rc=$?
  [[ -s "$work/multi/gpu_bench.md" ]] && cp "$work/multi/gpu_bench.md" "$out_dir/bench_multi.md"
  local bench_note="gpu_bench rc $rc"
  local start_line
  start_line=$(($(wc -l <"$stage_log") + 1))
  # One rank per GPU: no two ranks of a test share a GPU, and tests run one at a time.
  gpu_pytest "" 0 "${gpu_test_files[@]}" -k "not shared"
  local prc=$?
  verdict "$prc" "$(tail -n +"$start_line" "$stage_log" | planner tally pytest /dev/stdin)"
  note="$bench_note (bench_multi.md); spread tests: $note"
  ((rc != 0 && rc != 4)) && ! timed_out "$rc" && state=FAIL
}
