#!/usr/bin/env bash
# The wheel a user builds works on its own: `python -m build --wheel --no-isolation` (against the
# installed torch, as the README's install does), installed into a fresh virtual environment that
# sees the same torch (--system-site-packages) but not the source tree, then the README's example
# run from that environment, importing the installed copy. The build reuses the CMake build folder
# of `pip install .` (setup.py's XCCL_BUILD_DIR, default build/cmake), so after scripts/test.sh's
# install only the sources that hold the tests' fault injection are compiled again: the wheel is
# built with XCCL_TEST_HOOKS=0, as a user's is, and must have no injection hook. Needs python3
# with `build` and `wheel`.
#
#   bash scripts/check_wheel.sh [PYTHON]     PYTHON: the interpreter with torch (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
python="${1:-python3}"
out="$repo/build/wheel"
venv="$repo/build/venv-wheel"

rm -rf "$out" "$venv"
XCCL_TEST_HOOKS=0 "$python" -m build --wheel --no-isolation --outdir "$out" . \
  > "$repo/build/wheel.log" 2>&1 || {
  tail -n 40 "$repo/build/wheel.log" >&2
  echo "check_wheel: python -m build --wheel --no-isolation failed (log: build/wheel.log)" >&2
  exit 1
}
wheels=("$out"/xccl-*.whl)
if [[ ${#wheels[@]} -ne 1 || ! -f "${wheels[0]}" ]]; then
  echo "check_wheel: expected one xccl wheel in build/wheel, found: ${wheels[*]}" >&2
  exit 1
fi
echo "check_wheel: built $(basename "${wheels[0]}")"

"$python" -m venv --system-site-packages "$venv"
# --no-deps: the wheel names no dependencies, and the torch it was built against is the one the
# environment sees from the system's site-packages. --ignore-installed: an xccl installed there
# (scripts/test.sh's) would otherwise count as already installed, and the wheel go untested.
"$venv/bin/python" -m pip install -q --no-deps --ignore-installed "${wheels[0]}"

# From outside the tree, so that nothing can be imported from the source folders.
outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
cd "$outside"
"$venv/bin/python" - "$venv" <<'EOF'
import os
import sys

import xccl
import xccl._C  # noqa: F401 - the backend extension loads against this torch

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(xccl.__file__)
if not where.startswith(venv + os.sep):
    sys.exit(f"check_wheel: xccl was imported from {where}, not from the wheel's {venv}")
print(f"check_wheel: xccl imported from the wheel in {venv}")
# A user's wheel carries no fault injection (csrc/algo/test_hooks.h): only test builds have it.
if hasattr(xccl._C, "_inject_wrong_result"):
    sys.exit("check_wheel: the wheel's xccl._C has _inject_wrong_result, a test-only hook")
print("check_wheel: no test hooks in the wheel")
EOF
# The README's example, started as the README starts it (torchrun is torch.distributed.run).
"$venv/bin/python" -m torch.distributed.run --nproc-per-node 4 "$repo/examples/train_ddp.py" \
  > "$repo/build/wheel_example.log" 2>&1 || {
  tail -n 40 "$repo/build/wheel_example.log" >&2
  echo "check_wheel: examples/train_ddp.py failed with the installed wheel" >&2
  exit 1
}
grep '^done:' "$repo/build/wheel_example.log"
