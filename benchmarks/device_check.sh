#!/usr/bin/env bash
# One-shot check on a machine with NVIDIA GPUs, torch and the CUDA toolkit, no network: one
# prepared command that builds xccl and runs its GPU checks in stages, most valuable first, inside
# one time budget (XCCL_CHECK_BUDGET_S, default 420 s), and writes a summary that survives a
# failed stage, a hung test or a cut-off run.
#
#   benchmarks/device_check.sh [--out DIR]        run the check
#   benchmarks/device_check.sh --plan [--gpus N]  print the stages, their budgets, the build's
#                                                 measured parts and the 15-minute window (no GPU,
#                                                 no build); ends with `total N s`
#   benchmarks/device_check.sh --only STAGE[,STAGE] [--out DIR]
#                                                 rerun those stages on a warm machine: the build
#                                                 folders of the last run are reused (what is not
#                                                 there is built first)
#   benchmarks/device_check.sh --resume [--out DIR]
#                                                 rerun every stage the last run did not pass
#   benchmarks/device_check.sh --rehearse [--out DIR]
#                                                 the whole script on a CPU machine: every GPU
#                                                 command replaced by its CPU counterpart
#   benchmarks/device_check.sh --build-only       the build stages alone, without a GPU
#
# Stages (benchmarks/device_check.py holds the table, the budgets and the drop rule;
# benchmarks/device_check_stages.sh the commands):
#   gpu      find the GPU(s), the driver and torch; an MPS daemon (one a killed run left is used
#            if it serves a context, else stopped; else one is started)
#   a build  the torch-free GPU tests (test_gpu_kernels, test_cuda_ipc, xccl_kernel_bench) from a
#            CMake folder of their own with every core; the extension's pip build starts beside it
#            at a lower priority, so kernel correctness is known even if the extension fails
#   b kernels  test_gpu_kernels (virtual ranks), then test_cuda_ipc, each test bounded
#   a ext    waits for the extension's build and imports it
#   c shared 2 and 4 ranks sharing the GPU with XCCL_GPU_ALGO=kernel: tests/python/test_gpu*.py,
#            each test bounded
#   f doctor `python -m xccl doctor --gpu`: every kernel case, then the stamp (doctor_gpu.txt)
#   d perf   benchmarks/gpu_bench.py's one-GPU modes (share2, share4, world1); then, with time
#            left, xccl_kernel_bench --quick
#   e multi  with two or more GPUs: gpu_bench.py across the GPUs (xccl vs NCCL) and the Python
#            GPU tests with ranks spread over the GPUs
# Each stage runs within its own limit: what is left of the budget less the budgets of the stages
# after it. Under a short budget the least valuable stage is shortened, then dropped, first.
# A test that outlives its bound is a FAIL naming it and what it waited for; tests a stage did
# not reach for lack of time are "not run" (the stage reads "partial"). Spinning groups share
# the GPU only when their blocks fit together, else they run one after another; the stage's
# note says which.
#
# Output (DIR: --out, else $OUT, else the build folder's device_check/): at most seven files,
#   summary.md        the stage table and the benchmark tables; rewritten as each stage starts
#                     and ends, and on exit or SIGTERM (a stage cut off reads "cut off")
#   device_check.log  every finished stage's output, in order (appended as each one ends)
#   running_stage.log the running stage's output as it comes (so a run killed outright still
#                     has it); appended to device_check.log and removed when the stage ends
#   logs.tar.gz       each stage's own log and raw results (JSON, CSV, test logs, the stamp),
#                     repacked after every stage
#   doctor_gpu.txt    the output of `python -m xccl doctor --gpu` and the stamp it wrote
#   bench.md          the one-GPU performance tables (stage d)
#   bench_multi.md    the tables across GPUs (stage e)
# Environment: XCCL_CHECK_BUDGET_S (seconds, default 420; the rehearsal's default is its own
# stages' sum); XCCL_BUILD_DIR (the extension's build folder, default build/device; the
# torch-free tests build in <it>_kernels); XCCL_CUDA_ARCHS (default: the GPU's compute
# capability); XCCL_GTEST_SOURCE (a googletest source tree to build when none is installed;
# default third_party/googletest, then /usr/src/googletest); XCCL_CHECK_STAGES_FILE (a bash file
# sourced after the stage functions, to replace some: the CPU tests run the script with fake
# stages this way); XCCL_CHECK_MPS (0 leaves MPS alone); DEVICE_CHECK_REHEARSE_BUILD (the
# rehearsal's CMake folder holding test_gpu_emulated, default build/cmake).
#
# Exit status: 0 every stage that ran passed; 1 a stage failed; 2 bad usage; 3 no GPU found;
# 4 nothing failed but some tests or stages were not run (time); 143 terminated.
# shellcheck disable=SC2317  # the stages and finish() are called through "stage_$name" and traps
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${XCCL_BUILD_DIR:-$repo/build/device}"
kbuild="${build}_kernels"  # the torch-free GPU tests' own CMake folder
out_dir="${OUT:-}"
mode=check
rehearse=0
only=""
resume=0
plan_gpus=""
while (($# > 0)); do
  case "$1" in
    --plan) mode=plan ;;
    --build-only) mode="build-only" ;;
    --rehearse) rehearse=1 ;;
    --resume) resume=1 ;;
    --only)
      [[ $# -ge 2 && "$2" =~ ^[a-z,]+$ ]] || { echo "device_check: --only needs stage names (a,b)" >&2; exit 2; }
      only="$2"
      shift
      ;;
    --gpus)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "device_check: --gpus needs a number" >&2; exit 2; }
      plan_gpus="$2"
      shift
      ;;
    --out)
      [[ $# -ge 2 && -n "$2" ]] || { echo "device_check: --out needs a folder" >&2; exit 2; }
      out_dir="$2"
      shift
      ;;
    -h | --help) sed -n '2,/^# shellcheck/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
planner() { python3 "$here/device_check.py" "$@"; }
plan_args=()
((rehearse)) && plan_args+=(--rehearse)
if [[ -n "${XCCL_CHECK_BUDGET_S:-}" ]]; then
  [[ "$XCCL_CHECK_BUDGET_S" =~ ^[0-9]+$ && $XCCL_CHECK_BUDGET_S -ge 1 ]] || {
    echo "device_check: XCCL_CHECK_BUDGET_S must be a positive number of seconds" >&2
    exit 2
  }
  plan_args+=(--budget "$XCCL_CHECK_BUDGET_S")
fi
budget_s="$(planner budget "${plan_args[@]}")" || exit 2

if [[ $mode == plan ]]; then
  if [[ -z "$plan_gpus" ]]; then
    plan_gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
    ((plan_gpus > 0)) || plan_gpus=1  # no GPU here: the plan of the one-GPU machine
  fi
  planner plan --gpus "$plan_gpus" "${plan_args[@]}"
  exit $?
fi

state_file="$build/device_check_state"  # each stage's last state, for --resume
if ((resume)); then
  [[ -z "$only" ]] || { echo "device_check: --resume and --only exclude each other" >&2; exit 2; }
  [[ -s "$state_file" ]] || { echo "device_check: nothing to resume (no $state_file)" >&2; exit 2; }
  only="$(awk '$1 != "gpu" && $2 != "ok" && $2 != "n/a" {printf "%s%s", sep, $1; sep=","}' "$state_file")"
  if [[ -z "$only" ]]; then
    echo "device_check: every stage of the last run passed; nothing to rerun"
    exit 0
  fi
  echo "device_check: --resume reruns: $only"
fi

out_dir="${out_dir:-$build/device_check}"
work="$build/device_check_work"  # per-stage logs and raw results, packed into logs.tar.gz
mkdir -p "$out_dir" "$build"
rm -rf "$work" && mkdir -p "$work"
rm -f "$out_dir"/{summary.md,device_check.log,logs.tar.gz,bench.md,bench_multi.md,running_stage.log,doctor_gpu.txt}
jobs="$(nproc 2>/dev/null || echo 4)"

# -- results and the summary -----------------------------------------------------------------
declare -a names=() titles=() budgets=() states=() times=() notes=() per_tests=()
final_status=""  # set by finish(): the summary's last line
current=-1  # index of the stage running now
children=()  # background commands of the running stage (process-group leaders: timeout(1))
gpu_count=0 gpu_name="" archs="${XCCL_CUDA_ARCHS:-}" header="" ext_ok=0 exit_status=0
sms=132 torch_cuda=""
stage_log="" stage_t0=0 stage_deadline=0 per_test_s=0

add_stage() {  # add_stage NAME TITLE BUDGET STATE [NOTE [PER_TEST_S]]
  names+=("$1") titles+=("$2") budgets+=("$3") states+=("$4") times+=("") notes+=("${5:-}")
  per_tests+=("${6:-0}")
}
index_of() {  # index_of NAME
  local i
  for i in "${!names[@]}"; do [[ "${names[$i]}" == "$1" ]] && { echo "$i"; return; }; done
  echo -1
}
write_summary() {
  local i tmp="$out_dir/.summary.md.tmp"
  {
    echo "# device_check summary"
    echo
    echo "${header:-$(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${budget_s} s}"
    echo
    echo "| stage | status | time | limit | note |"
    echo "|---|---|---:|---:|---|"
    for i in "${!names[@]}"; do
      printf '| %s | %s | %s | %s | %s |\n' "${titles[$i]}" "${states[$i]}" \
        "${times[$i]:+${times[$i]} s}" "${budgets[$i]:+${budgets[$i]} s}" "${notes[$i]//|/\\|}"
    done
    echo
    echo "Files: device_check.log (every stage's output, in order), logs.tar.gz (each stage's log"
    echo "and raw results), doctor_gpu.txt (the doctor's output and stamp), bench.md /"
    echo "bench_multi.md (the performance tables, also below)."
    local table
    for table in bench.md bench_multi.md; do
      if [[ -s "$out_dir/$table" ]]; then echo; echo "## $table"; echo; cat "$out_dir/$table"; fi
    done
    [[ -z "$final_status" ]] || { echo; echo "Exit status: $final_status"; }
  } >"$tmp"
  mv -f "$tmp" "$out_dir/summary.md"
}
pack_logs() {
  tar -czf "$out_dir/.logs.tar.gz.tmp" -C "$work" . 2>/dev/null &&
    mv -f "$out_dir/.logs.tar.gz.tmp" "$out_dir/logs.tar.gz"
}
# Each stage's last state, for --resume: a stage this run was not asked to run keeps the state
# the run before gave it; one that cannot run here (too few GPUs) reads n/a.
declare -A last_states=()
if [[ -s "$state_file" ]]; then
  while read -r n s; do last_states[$n]=$s; done <"$state_file"
fi
save_states() {
  local i s
  for i in "${!names[@]}"; do
    s="${states[$i]// /-}"
    [[ "${notes[$i]}" == "not asked for"* ]] && s="${last_states[${names[$i]}]:-n/a}"
    [[ "${notes[$i]}" == "needs 2 or more GPUs" ]] && s="n/a"
    echo "${names[$i]} $s"
  done >"$state_file.tmp" && mv -f "$state_file.tmp" "$state_file"
}
# The end, however it comes: the running stage is cut off, its commands are ended, the stages
# after it are "not run", and the summary and logs are written.
finish() {
  local rc=$1 why=$2 i pid
  trap - EXIT TERM INT HUP
  # Every background command of this shell, also one started a moment before the signal and not
  # yet in children: its group when timeout(1) has made one, else the process itself.
  for pid in "${children[@]}" $(jobs -p); do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  done
  if ((current >= 0)) && [[ "${states[$current]}" == running ]]; then
    states[current]="cut off"
    times[current]=$((SECONDS - stage_t0))
    notes[current]="$why; ${notes[$current]}"
  fi
  for i in "${!states[@]}"; do
    [[ "${states[$i]}" == planned ]] && states[i]="not run" && notes[i]="$why before it started"
  done
  ((current >= 0)) && close_stage_log "$current"
  declare -F stop_mps >/dev/null && stop_mps
  case $rc in
    0) final_status="0 (every stage that ran passed)" ;;
    1) final_status="1 (a stage failed)" ;;
    3) final_status="3 (no GPU)" ;;
    4) final_status="4 (nothing failed; some tests or stages were not run for lack of time)" ;;
    *) final_status="$rc ($why)" ;;
  esac
  write_summary
  save_states
  pack_logs
  cat "$out_dir/summary.md"
  echo "device_check: summary in $out_dir/summary.md (exit status $rc)"
  exit "$rc"
}
trap 'finish 143 "terminated (SIGTERM)"' TERM
trap 'finish 130 "interrupted"' INT HUP
trap 'finish $? "the script stopped"' EXIT

say() { echo "$*" | tee -a "$out_dir/device_check.log"; }
# The stage's log joins device_check.log (and the packed logs) once the stage is over.
close_stage_log() {  # close_stage_log INDEX
  [[ -f "$stage_log" ]] || return 0
  cat "$stage_log" >>"$out_dir/device_check.log"
  tail -n 20 "$stage_log"
  mv -f "$stage_log" "$work/$1.${names[$1]}.log"
}

# -- running commands within the stage's time --------------------------------------------------
# bounded CMD...: runs CMD within the running stage's deadline (timeout(1) leads its own process
# group, which it signals whole, and so does finish()); output to the stage's log.
bounded() {
  local left=$((stage_deadline - SECONDS)) rc
  ((left >= 1)) || return 124
  timeout -k 5 "$left" "$@" >>"$stage_log" 2>&1 &
  children+=("$!")
  wait "$!"
  rc=$?
  children=()
  return "$rc"
}
# bounded_to LOG CMD...: the same in the background, output to LOG only (parallel runs); the
# caller waits with wait_bounded.
bounded_to() {
  local log=$1 left=$((stage_deadline - SECONDS))
  shift
  ((left >= 1)) || { echo "not started: the stage's time is spent" >"$log"; return 124; }
  timeout -k 5 "$left" "$@" >"$log" 2>&1 &
  children+=("$!")
}
wait_bounded() {  # waits for every bounded_to command; returns the first non-zero status
  local pid rc worst=0
  for pid in "${children[@]}"; do
    wait "$pid"
    rc=$?
    ((worst == 0)) && worst=$rc
  done
  children=()
  return "$worst"
}
timed_out() { [[ $1 -eq 124 || $1 -eq 137 ]]; }

# A stage function sets `state` (ok, FAIL, partial, not run) and `note`; it may use bounded.
run_stage() {  # run_stage NAME
  local i later=0 j limit
  i="$(index_of "$1")"
  [[ "${states[$i]}" == planned ]] || return 0
  for ((j = i + 1; j < ${#names[@]}; j++)); do
    [[ "${states[$j]}" == planned ]] && later=$((later + budgets[j]))
  done
  # What is left less the later stages' budgets; never less than its own budget while the total
  # allows (when the required stages alone exceed a short budget, the later ones wait).
  limit=$((budget_s - SECONDS - later))
  if ((limit < budgets[i])); then
    limit=$((budgets[i] < budget_s - SECONDS ? budgets[i] : budget_s - SECONDS))
  fi
  [[ $mode == build-only ]] && limit=86400
  if ((limit < 15)); then
    states[i]="not run"
    notes[i]="the budget is spent (${limit} s left for it)"
    write_summary
    return 0
  fi
  current=$i
  stage_t0=$SECONDS
  stage_deadline=$((SECONDS + limit))
  stage_log="$out_dir/running_stage.log"
  per_test_s="${per_tests[$i]}"
  budgets[i]=$limit
  states[i]=running
  notes[i]="started $(date -u +%H:%M:%S)"
  write_summary
  say "===== ${titles[$i]}: up to ${limit} s ($(date -u +%H:%M:%S)) ====="
  : >"$stage_log"
  state=FAIL note=""
  "stage_$1"
  states[i]=$state
  notes[i]=$note
  times[i]=$((SECONDS - stage_t0))
  close_stage_log "$i"
  current=-1
  say "===== ${titles[$i]}: $state after ${times[$i]} s: $note"
  case $state in
    FAIL) exit_status=1 ;;
    partial) ((exit_status == 0)) && exit_status=4 ;;
  esac
  write_summary
  save_states
  pack_logs
}

# -- the stages (benchmarks/device_check_stages.sh) ---------------------------------------------
# shellcheck source=benchmarks/device_check_stages.sh
source "$here/device_check_stages.sh"

# Tests replace stages here (fake commands on a machine without a GPU).
if [[ -n "${XCCL_CHECK_STAGES_FILE:-}" ]]; then
  # shellcheck source=/dev/null
  source "$XCCL_CHECK_STAGES_FILE"
fi

# -- the run ---------------------------------------------------------------------------------------
if [[ $mode == build-only ]]; then
  add_stage build "a build" "" planned
  add_stage ext "a ext" "" planned
  header="$(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), --build-only"
  write_summary
  run_stage build
  run_stage ext
  exit "$exit_status"
fi

# The stages for this many GPUs and this budget (benchmarks/device_check.py): first the one-GPU
# plan, so that finding the GPU is held to its budget, then the plan for the GPUs it found.
load_plan() {  # load_plan GPUS: every stage after the first (already run) is replaced
  local name letter budget keep per_test first=$((${#names[@]} > 0 ? 1 : 0))
  names=("${names[@]:0:first}") titles=("${titles[@]:0:first}") budgets=("${budgets[@]:0:first}")
  states=("${states[@]:0:first}") times=("${times[@]:0:first}") notes=("${notes[@]:0:first}")
  per_tests=("${per_tests[@]:0:first}")
  while read -r name letter budget keep per_test; do
    ((first)) && [[ $name == gpu ]] && continue
    [[ $letter == - ]] && letter="" || letter="$letter "
    case $keep in
      keep) add_stage "$name" "$letter$name" "$budget" planned "" "$per_test" ;;
      dropped) add_stage "$name" "$letter$name" "" "not run" "dropped to fit the ${budget_s} s budget" ;;
      *) add_stage "$name" "$letter$name" "" "not run" "needs 2 or more GPUs" ;;
    esac
  done < <(planner plan --shell --gpus "$1" "${plan_args[@]}")
  write_summary
}

# --only / --resume: the stages asked for run; a stage they need runs too unless its work is
# still here from the last run (a warm machine), which reuse_stage checks; the rest wait.
apply_only() {
  [[ -n "$only" ]] || return 0
  local i name needed=" " n
  for name in ${only//,/ }; do
    [[ "$(index_of "$name")" -ge 0 ]] || { echo "device_check: no stage '$name' in this plan" >&2; exit 2; }
    for n in $(planner plan --needs "$name"); do needed+="$n "; done
  done
  for i in "${!names[@]}"; do
    name="${names[$i]}"
    ((i == 0)) && continue
    [[ "${states[$i]}" == planned ]] || continue
    if [[ ",$only," == *",$name,"* ]]; then
      continue
    elif [[ "$needed" == *" $name "* ]]; then
      if reuse_stage "$name"; then
        states[i]=ok notes[i]="reused from the last run's build (--only): $note"
      elif [[ $name == ext ]]; then
        budgets[i]="$(planner ext-build-s)"  # the whole build, not what is left after a and b
      fi
    else
      states[i]="not run" notes[i]="not asked for (--only $only)"
    fi
  done
  # The rerun's budget: what has run so far and the budgets of what runs now, so that a stage
  # asked for alone keeps to its own budget (the window's rerun), not the whole check's.
  local total=$SECONDS
  for i in "${!names[@]}"; do
    [[ "${states[$i]}" == planned ]] && total=$((total + budgets[i]))
  done
  budget_s=$total
  header="$header, budget of this rerun ${budget_s} s"
  write_summary
}

header="$(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${budget_s} s$( ((rehearse)) && echo ", REHEARSAL on CPU")"
load_plan 1
run_stage gpu
if [[ "${states[0]}" != ok ]]; then
  for i in "${!states[@]}"; do
    [[ "${states[$i]}" == planned ]] && states[i]="not run" && notes[i]="no GPU"
  done
  exit_status=3
  exit 3
fi
((gpu_count >= 2)) && load_plan "$gpu_count"
[[ -n "$only" ]] && header="$header, --only $only"
apply_only
for name in "${names[@]:1}"; do run_stage "$name"; done
exit "$exit_status"
