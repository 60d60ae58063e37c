#!/usr/bin/env bash
# Builds one libFuzzer target with clang-19 and runs it for SECONDS.
#   scripts/fuzz.sh fuzz_tcp_frames 60
# Needs clang-19 and its fuzzer runtime (apt-get install -y clang-19 libclang-rt-19-dev).
# Findings (crash-*, leak-*, timeout-*) land in build/fuzz/findings/TARGET; the corpus grows in
# build/fuzz/corpus/TARGET.
set -euo pipefail
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/fuzz"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXCCL_GPU=OFF \
  -DXCCL_BUILD_TESTS=OFF -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DXCCL_FUZZ=ON >/dev/null
cmake --build "$build" --target "$target" -j2
mkdir -p "$build/corpus/$target" "$build/findings/$target"
python3 "$root/tests/fuzz/make_seeds.py" "$target" "$build/corpus/$target"
cd "$build/findings/$target"
exec "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$build/corpus/$target"
