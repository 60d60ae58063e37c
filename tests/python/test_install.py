"""`pip install .` without flags: pip builds in an isolated environment that has no torch, so the
build stops at its first step with a message that says `--no-build-isolation` and why, instead of
failing deep in the CMake step (scripts/build_backend.py). The wheel built the README's way is
checked end to end by scripts/check_wheel.sh, a step of scripts/test.sh."""

import os
import shutil
import subprocess
import sys
import time

import pytest

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# pip installs setuptools and wheel into its isolated environment first (from its index or
# find-links): seconds with a cache, longer on a cold one.
PIP_BOUND_S = 300
# What pip may print when that download, not xccl's build, is what failed.
UNREACHABLE = ("Could not find a version that satisfies", "No matching distribution found")


def test_pip_install_with_build_isolation_stops_at_once_naming_the_flag(tmp_path):
    source = tmp_path / "src"
    # What setuptools reads before it compiles anything: a copy, so nothing is written into the
    # tree (an unguarded build gets as far as setup.py's CMake step, which needs torch).
    shutil.copytree(
        os.path.join(REPO, "python"), source / "python", ignore=shutil.ignore_patterns("*.so")
    )
    (source / "scripts").mkdir()
    for name in ("pyproject.toml", "setup.py", os.path.join("scripts", "build_backend.py")):
        shutil.copyfile(os.path.join(REPO, name), source / name)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    # One retry and a short socket timeout: an unreachable index is a skip within the bound.
    command = [sys.executable, "-m", "pip", "install", "--retries", "1", "--timeout", "20"]
    command += ["--no-deps", "--target", str(tmp_path / "target"), str(source)]
    started = time.monotonic()
    proc = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=PIP_BOUND_S, check=False
    )
    output = proc.stdout + proc.stderr
    if "Installing build dependencies: finished with status 'error'" in output and any(
        line in output for line in UNREACHABLE
    ):
        pytest.skip(f"pip could not fetch setuptools for its isolated build:\n{output[-2000:]}")
    assert proc.returncode != 0, output
    assert "Getting requirements to build wheel: finished with status 'error'" in output, output
    assert "torch cannot be imported by this build" in output, output
    assert "pip install --no-build-isolation ." in output, output
    assert "C++ ABI" in output, output  # the why
    assert not (tmp_path / "target").exists() or not os.listdir(tmp_path / "target")
    assert time.monotonic() - started < PIP_BOUND_S
