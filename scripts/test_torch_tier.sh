#!/usr/bin/env bash
# The fast tier against another torch: `bash scripts/test_torch_tier.sh 2.13.0` makes a virtual
# environment of its own (build/venv-torch<version>), installs that torch, pytest and numpy in
# it, builds xccl against it (CPU parts only: scripts/test.sh builds the CUDA parts against the
# main torch) and runs the tests that exercise what differs between torch versions: registration
# (the name "xccl", every init method, entry-point order), the c10d bindings every collective,
# subgroup and p2p call goes through, DDP and DeviceMesh/FSDP2. The main torch's site-packages are
# never touched. Needs python3 with venv, CMake and a C++ compiler; pip must reach the torch asked
# for (a CPU build where the pip configuration offers one, else PyPI's). Measured for 2.13.0 from a
# fresh clone without a compiler cache on 2 cores: 4 min 18 s (venv and torch 41 s, build 2 min
# 19 s, 123 tests 73 s); 16 min with the cores shared by other builds.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:?usage: scripts/test_torch_tier.sh TORCH_VERSION (e.g. 2.13.0)}"
venv="build/venv-torch$version"
started=$SECONDS
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
python="$venv/bin/python"
# setuptools and wheel: `--no-build-isolation` builds with what the environment has.
"$python" -m pip install -q "torch==$version" numpy pytest setuptools wheel
installed="$("$python" -c 'import torch; print(torch.__version__)')"
echo "scripts/test_torch_tier.sh: torch $installed in $venv"
XCCL_GPU=OFF XCCL_BUILD_DIR="build/torch$version" \
  "$python" -m pip install --no-build-isolation --no-deps -q .
# Run from the repository root: the tests import the installed xccl, never python/ here.
"$python" -m pytest -q -p no:cacheprovider \
  tests/python/test_registration.py \
  tests/python/test_registration_order.py \
  tests/python/test_collectives_reduce.py \
  tests/python/test_collectives_movement.py \
  tests/python/test_collectives_groups.py \
  tests/python/test_p2p.py \
  tests/python/test_reconfigure.py \
  tests/python/test_window.py \
  tests/python/test_ddp.py \
  tests/python/test_device_mesh.py
echo "scripts/test_torch_tier.sh: torch $installed tier took $((SECONDS - started)) s"
