#!/usr/bin/env bash
# Model check of the GPU kernels' flag/epoch protocol (block_barrier.pml, README.md): SPIN must
# verify the real protocol in every configuration below (no assertion violation, no invalid end
# state, search complete), and every mutant must fail, the barrier mutants by reading wrong data.
#
#   tests/model/run.sh [--full]     --full adds the slower configurations (about a minute more)
#
# Exit status: 0 all as expected, 1 a verification failed or a mutant passed, 77 skipped (no
# `spin` or no C compiler; ctest reports 77 as skipped). SPIN and CC select the programs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
model="$here/block_barrier.pml"
full=0
[[ "${1:-}" == "--full" ]] && full=1

spin="${SPIN:-$(command -v spin || true)}"
cc="${CC:-$(command -v cc || command -v gcc || command -v clang || true)}"
[[ -n "$cc" && "$cc" != */* ]] && cc="$(command -v "$cc" || true)"  # CC=gcc: a name on PATH
if [[ ! -x "$spin" || ! -x "$cc" ]]; then
  echo "SKIPPED: the flag-protocol model check needs spin (Debian package 'spin') and a C" \
       "compiler; found spin='${spin}' cc='${cc}'"
  exit 77
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
runs=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# build NAME CFLAGS SPIN_DEFINES...: generates and compiles pan in $work/NAME (CFLAGS: words).
build() {
  local name="$1" cflags
  read -ra cflags <<< "$2"
  shift 2
  mkdir -p "$work/$name"
  cp "$model" "$work/$name/"
  (cd "$work/$name" && "$spin" "$@" -a block_barrier.pml > spin.log 2>&1 &&
     "$cc" -w "${cflags[@]}" -DSAFETY -DNOBOUNDCHECK -o pan pan.c) || {
    echo "FAIL  $name: spin or cc failed"
    cat "$work/$name/spin.log"
    return 1
  }
}

# verify NAME PAN_FLAGS CFLAGS SPIN_DEFINES...: the real protocol; must end with errors: 0.
verify() {
  local name="$1" panflags extra="$3" start
  read -ra panflags <<< "$2"
  shift 3
  start="$(now)"
  runs=$((runs + 1))
  build "$name" "-O2 $extra" "$@" || { failures=$((failures + 1)); return; }
  (cd "$work/$name" && ./pan -m100000 "${panflags[@]}" > pan.out 2>&1) || true
  local out="$work/$name/pan.out"
  local summary states
  summary="$(grep -E 'State-vector .* errors:' "$out" || true)"
  states="$(grep -E '^ *[0-9]+ states, stored' "$out" | sed 's/^ *//' || true)"
  if grep -q 'errors: 0$' <<< "$summary" &&
     ! grep -qE 'max search depth too small|out of memory|Search not completed' "$out"; then
    echo "PASS  $name [$*]: $summary; $states; $(elapsed "$start") s with compile"
  else
    echo "FAIL  $name [$*]: the real protocol must verify"
    grep -E '^pan|errors|depth too small|out of memory' "$out" | head -5
    failures=$((failures + 1))
  fi
}

# mutant NAME EXPECTED_REGEX SPIN_DEFINES...: must report an error whose first line matches.
mutant() {
  local name="$1" expected="$2" start
  shift 2
  start="$(now)"
  runs=$((runs + 1))
  build "$name" "-O0" "$@" || { failures=$((failures + 1)); return; }
  (cd "$work/$name" && ./pan -m100000 -w20 > pan.out 2>&1) || true
  local first
  first="$(grep -m1 -E '^pan:1: ' "$work/$name/pan.out" || true)"
  if grep -qE 'errors: [1-9]' "$work/$name/pan.out" && grep -qE "$expected" <<< "$first"; then
    echo "CAUGHT  $name [$*]: $first ($(elapsed "$start") s)"
  else
    echo "FAIL  $name [$*]: the mutant was not caught as expected (/$expected/);" \
         "got: ${first:-no error}"
    failures=$((failures + 1))
  fi
}

# Kernel kinds (bits of KINDS), as in block_barrier.pml; some are used only as ${!k} below.
# shellcheck disable=SC2034
ONESHOT=1 RSCATTER=2 TWOSHOT=4 GATHER=8 ALLTOALL=16 BCAST=32 TWOSHOT_IP=64
ALL=127
# Two blocks: reduce-scatter and all-to-all read subsets of what one-shot and all-gather read,
# and the backend never runs two-shot in place; leaving them out keeps the state space small.
FOUR=$((ONESHOT | TWOSHOT | GATHER | BCAST))

echo "== the real protocol (2-bit counters wrap every 4 barriers)"
verify w2b1k4 "" "" -DW=2 -DB=1 -DK=4 -DKINDS=$ALL
verify w3b1k3 "" "" -DW=3 -DB=1 -DK=3 -DKINDS=$ALL
verify w2b1k3e3 "" "" -DW=2 -DB=1 -DK=3 -DKINDS=$ALL -DEBITS=3
verify w2b2k3 "-w22" "-DCOLLAPSE" -DW=2 -DB=2 -DK=3 -DKINDS=$FOUR
if ((full)); then
  verify w3b1k4 "" "-DCOLLAPSE" -DW=3 -DB=1 -DK=4 -DKINDS=$ALL
  verify w2b2k3all "-w24" "-DCOLLAPSE" -DW=2 -DB=2 -DK=3 -DKINDS=$ALL
  verify w3b2k2 "-w24" "-DCOLLAPSE" -DW=3 -DB=2 -DK=2 -DKINDS=$FOUR
fi

# Barrier mutants run with counters that do not wrap within the run (as 32 bits do not) and with
# only the data assertions, so they can fail only by a read of the wrong call's data; each one
# against every collective built on the kernel it breaks.
echo "== mutants: one barrier wait removed (each must read wrong data)"
data='assertion violated \(buf\['
base=(-DW=2 -DB=1 -DK=3 -DEBITS=8 -DDATA_ONLY)
for m in 1 2; do
  for k in ONESHOT RSCATTER; do
    mutant "m${m}_$k" "$data" "${base[@]}" -DMUTANT=$m -DKINDS=${!k}
  done
done
for m in 3 4 5; do
  for k in TWOSHOT TWOSHOT_IP; do
    mutant "m${m}_$k" "$data" "${base[@]}" -DMUTANT=$m -DKINDS=${!k}
  done
done
for m in 6 7; do
  for k in GATHER ALLTOALL BCAST; do
    mutant "m${m}_$k" "$data" "${base[@]}" -DMUTANT=$m -DKINDS=${!k}
  done
done

echo "== mutants: epochs, wrap-around and stream order"
mutant m8_unsigned "$data|invalid end state" -DW=2 -DB=1 -DK=3 -DDATA_ONLY -DMUTANT=8
mutant m9_no_persist "$data" "${base[@]}" -DMUTANT=9 -DKINDS=$ALL
mutant m10_copyin_early "$data" -DW=2 -DB=2 -DK=3 -DEBITS=8 -DDATA_ONLY -DMUTANT=10 \
  -DKINDS=$FOUR
mutant ebits1 "$data|invalid end state" -DW=2 -DB=1 -DK=3 -DDATA_ONLY -DEBITS=1

if ((failures)); then
  echo "model check: $failures of $runs runs not as expected"
  exit 1
fi
echo "model check: all $runs runs as expected"
