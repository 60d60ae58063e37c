"""`python -m build --sdist` makes an sdist a build can start from.

The sdist is built from a copy of the files git knows (tracked, or new and not ignored: what a
fresh clone has; setuptools would otherwise also reuse the file list of an earlier build left in
python/xccl.egg-info), without isolation (the setuptools that builds the wheel, and no download),
its file list compared with those files, and CMake configured
from the unpacked sdist as setup.py configures it (the GPU parts off: their compiler detection
alone takes longer than the rest). Compiling it would take minutes; configuring proves that every
folder and source file CMakeLists.txt names is there, the C++ tests' included when GoogleTest is
installed (the option that configures them is on by default).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What a build needs, as tracked in git: every file under these folders, and these files.
NEEDED_FOLDERS = ("csrc", "cmake", "python", "tests/cpp", "tests/model", "docs", "examples")
NEEDED_FILES = ("CMakeLists.txt", "setup.py", "pyproject.toml", "README.md")
# pyproject.toml's build backend: a build from the sdist cannot start without it.
BACKEND = "scripts/build_backend.py"


def _tracked() -> list[str]:
    if shutil.which("git") is None or not os.path.exists(os.path.join(REPO, ".git")):
        pytest.skip("not a git checkout: no list of tracked files to compare the sdist with")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({p for p in out.split("\0") if p and os.path.isfile(os.path.join(REPO, p))})


def _build_sdist(tracked: list[str], tmp_path) -> str:
    pytest.importorskip("build", reason="the `build` package is not installed")
    checkout = tmp_path / "checkout"
    for path in tracked:
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(REPO, path), checkout / path)
    out = str(tmp_path / "dist")
    run = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, checkout],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"python -m build --sdist failed:\n{run.stdout[-3000:]}{run.stderr}"
    (made,) = [name for name in os.listdir(out) if name.endswith(".tar.gz")]
    return os.path.join(out, made)


def test_sdist_has_what_a_build_needs_and_configures(tmp_path):
    tracked = _tracked()
    sdist = _build_sdist(tracked, tmp_path)
    with tarfile.open(sdist) as archive:
        members = [m.name for m in archive.getmembers() if m.isfile()]
        top = {name.split("/", 1)[0] for name in members}
        assert len(top) == 1, f"one top folder expected in the sdist, found {sorted(top)}"
        (root,) = top
        inside = {name.split("/", 1)[1] for name in members}
        needed = [
            path
            for path in tracked
            if path in NEEDED_FILES
            or path == BACKEND
            or any(path.startswith(folder + "/") for folder in NEEDED_FOLDERS)
        ]
        assert any(p.startswith("csrc/") for p in needed), "git lists no csrc/ files: check REPO"
        missing = sorted(set(needed) - inside)
        assert not missing, f"{len(missing)} tracked files missing from the sdist: {missing[:20]}"
        stray = sorted(p for p in inside if "__pycache__" in p or p.endswith((".so", ".pyc")))
        assert not stray, f"build products in the sdist: {stray[:20]}"
        if hasattr(tarfile, "data_filter"):  # Python 3.12, 3.11.4 and later
            archive.extractall(tmp_path / "unpacked", filter="data")
        else:
            archive.extractall(tmp_path / "unpacked")

    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("the file list is checked; no cmake to configure the unpacked sdist with")
    import torch

    source = tmp_path / "unpacked" / root
    configure = subprocess.run(
        [
            cmake,
            "-S",
            str(source),
            "-B",
            str(tmp_path / "build"),
            f"-DXCCL_TORCH_ROOT={os.path.dirname(torch.__file__)}",
            f"-DXCCL_TORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            "-DXCCL_GPU=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert configure.returncode == 0, (
        f"CMake could not configure the unpacked sdist:\n{configure.stdout[-2000:]}"
        f"{configure.stderr[-3000:]}"
    )
    assert (tmp_path / "build" / "csrc" / "backend").is_dir(), "the backend was not configured"
