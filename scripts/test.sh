#!/usr/bin/env bash
# The test command: checks the format (scripts/check_format.sh: clang-format, ruff), builds and
# installs xccl against the installed torch, then runs the GoogleTest tiers (ctest), the HIP
# compile check of the GPU side (scripts/check_hip.sh: needs hipcc and clang++-19, skips what a
# missing one would compile), the backend compiled against torch 2.11.0's headers
# (scripts/check_torch_headers.sh; pip must reach torch 2.11.0 once), the multi-process pytest
# suite (root: it also builds hosts from network namespaces) after the rehearsal of the GPU check
# (benchmarks/device_check.sh --rehearse: the whole script, each GPU command replaced by its CPU
# counterpart; under a minute and a half), a short run of each fuzz target
# (scripts/fuzz.sh) and the wheel check (scripts/check_wheel.sh: the wheel `python -m build`
# makes, installed into a fresh virtual environment, runs the README's example); then the fast
# tier against torch 2.13.0 (scripts/test_torch_tier.sh: a virtual environment of its own with
# that torch). Needs torch,
# pytest, cmake, a C++ compiler, GoogleTest, clang-format-19, ruff, libfabric, iproute2,
# python3's venv and `build` (.ci/run installs them, hipcc, clang-19 and its fuzzer runtime, on a
# fresh machine), and pip access to torch 2.13.0.
set -euo pipefail
cd "$(dirname "$0")/.."

# Format and lint first: seconds, and a finding fails before the long build.
bash scripts/check_format.sh
# XCCL_TEST_HOOKS=1: the tests' fault injection (xccl._C._inject_wrong_result) is built in; a
# user's install has none, and check_wheel.sh builds the wheel without it again.
XCCL_TEST_HOOKS=1 python3 -m pip install --no-build-isolation --no-deps -q .
# setup.py configured build/cmake; build the GoogleTest binaries there too.
cmake --build build/cmake -j "$(nproc)"
ctest --test-dir build/cmake --output-on-failure --timeout 600
bash scripts/check_hip.sh
# The backend against the torch of the GPU machine device checks run on (compile only; the wheel
# is fetched once into build/torch-wheels/; about 4 minutes on 2 cores).
bash scripts/check_torch_headers.sh 2.11.0
# The GPU check on CPU, end to end (benchmarks/README.md): its exit status must be 0, and
# tests/python/test_device_check.py reads its summary in build/rehearsal.
bash benchmarks/device_check.sh --rehearse --out build/rehearsal >build/rehearsal.log 2>&1 ||
  { tail -n 60 build/rehearsal.log >&2; exit 1; }
tail -n 16 build/rehearsal.log
python3 -m pytest tests/python -q -p no:cacheprovider
# The fuzz targets (the TCP wire reader and receive state, the ofi header path and key exchange,
# the shm ring, the parsers of store and user values) still build and find nothing in a short run
# (the long runs are by hand: scripts/fuzz.sh TARGET SECONDS).
for target in fuzz_tcp_frames fuzz_tcp_handshake fuzz_tcp_receive fuzz_ofi_header \
  fuzz_ofi_auth fuzz_shm_ring fuzz_store_values fuzz_user_values; do
  if ! bash scripts/fuzz.sh "$target" 20 > "build/$target.log" 2>&1; then
    tail -n 40 "build/$target.log" >&2
    exit 1
  fi
  grep '^Done' "build/$target.log"
done
# The wheel a user builds, installed on its own: after the install above it compiles nothing.
bash scripts/check_wheel.sh
# The oldest torch CI covers, built and tested in its own environment after the main one.
bash scripts/test_torch_tier.sh 2.13.0
