"""Builds xccl: CMake compiles csrc/ against the torch that is installed.

Install with `pip install --no-build-isolation .` so the build sees that torch (an isolated
build environment has none; there scripts/build_backend.py stops the build at once, saying so).
Environment knobs:
  XCCL_BUILD_DIR   CMake build folder (default: build/cmake in the source tree)
  XCCL_GPU         AUTO (default), ON or OFF: the GPU parts, CUDA for a CUDA torch, HIP for a
                   ROCm torch
  XCCL_CUDA_ARCHS  GPU architectures of the CUDA kernels as a CMake list ("80-real;90");
                   default: chosen from the installed torch's (see cuda_archs below)
  XCCL_HIP_ARCHS   AMD targets of the HIP kernels as a CMake list ("gfx90a;gfx942");
                   default: chosen from the installed torch's (see hip_archs below)
  XCCL_TEST_HOOKS  1 builds the fault-injection hooks the tests use (xccl._C._inject_wrong_result;
                   scripts/test.sh sets it); default 0, what a user's install and wheel get
  MAX_JOBS         parallel compile jobs (default: CPU count)
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))

# The kernels' system-scope acquire/release (ld.acquire.sys, st.release.sys in
# csrc/kernels/primitives.cuh) need sm_70.
MIN_CUDA_ARCH = 70
# Machine code for A100 and H100/H200 whenever torch has it; sm_80 code also runs on sm_86/87/89.
ALWAYS_REAL_CUDA_ARCHS = (80, 90)


def cuda_archs(torch) -> "str | None":
    """XCCL_CUDA_ARCHS for CMake: the environment's, else a choice among torch's architectures.

    Each architecture is a full device compile of csrc/kernels (cicc, plus ptxas for machine
    code), and that compile dominates the CUDA build. Machine code only for ALWAYS_REAL_CUDA_ARCHS
    (else for torch's oldest usable one), and PTX for the newest of those: the driver JIT-compiles
    it (once, then caches it) on every later GPU, which covers the B200 (sm_100), RTX 50 (sm_120)
    and GPUs not made yet. PTX for the newest architecture torch lists instead (compute_120)
    would leave the B200 without code, and compute_100 PTX costs one more cicc pass for nothing
    compute_90 PTX lacks. Not covered: sm_75 (T4), which torch 2.14 lists.
    Measured with torch 2.14.1+cu130 and nvcc 13.0 with -j2 on 2 cores that other builds shared:
    the device code for "80-real;90" took 6.1 CPU-minutes (6m23s wall; ~3 min on idle cores),
    compute_100 PTX would add 2.3, every further machine-code architecture about 3. Torch's whole
    list (sm_75 to sm_120) would cost ~18 CPU-minutes, more than CI's time limit allows.
    """
    archs = os.environ.get("XCCL_CUDA_ARCHS")
    if archs:
        return archs
    if not torch.version.cuda:
        return None
    listed = {
        int(m.group(1))
        for a in torch.cuda.get_arch_list()
        if (m := re.fullmatch(r"(?:sm|compute)_(\d+)[af]?", a))
    }
    usable = sorted(a for a in listed if a >= MIN_CUDA_ARCH)
    if not usable:
        return None  # gpu.cmake's default
    real = [a for a in usable if a in ALWAYS_REAL_CUDA_ARCHS] or usable[:1]
    # "80-real;90": machine code for both, PTX for sm_90 and later.
    return ";".join([f"{a}-real" for a in real[:-1]] + [str(real[-1])])


# The AMD targets the kernels are written for: CDNA GPUs with xGMI and fine-grained/uncached memory
# (MI200 gfx90a, MI300 gfx942). Consumer GPUs (gfx11xx) are left to the vendor route.
HIP_ARCHS = ("gfx90a", "gfx942")


def hip_archs(torch) -> "str | None":
    """XCCL_HIP_ARCHS for CMake: the environment's, else HIP_ARCHS that torch itself was built for.

    torch's list is what its own kernels run on; a target it lacks would be compile time for
    nothing, and an old ROCm compiler (before 5.7) cannot target gfx942 at all. None (gpu.cmake's
    default, both) when torch lists neither, or lists nothing because it sees no GPU.
    """
    archs = os.environ.get("XCCL_HIP_ARCHS")
    if archs:
        return archs
    if not torch.version.hip:
        return None
    listed = {a.split(":")[0] for a in torch.cuda.get_arch_list()}  # "gfx90a:xnack-" -> "gfx90a"
    chosen = [a for a in HIP_ARCHS if a in listed]
    return ";".join(chosen) or None  # None: gpu.cmake's default


def hipify_v2(torch) -> bool:
    """Whether a ROCm torch's headers keep the c10::cuda names (csrc/backend/gpu/gpu_stream.h)."""
    try:
        from torch.utils.hipify import __version__ as version
    except ImportError:
        return False
    return int(version.split(".")[0]) >= 2


def test_hooks() -> str:
    """XCCL_TEST_HOOKS for CMake, ON or OFF, given on every configure so that a build folder an
    earlier test build configured ON builds a user's copy without the hooks again. The values
    are the registry's booleans (csrc/common/env.cc)."""
    value = os.environ.get("XCCL_TEST_HOOKS", "0").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return "ON"
    if value in ("", "0", "false", "no", "off"):
        return "OFF"
    raise SystemExit(f"setup.py: XCCL_TEST_HOOKS={value!r} is not a boolean (1/0, on/off)")


class CMakeExtension(Extension):
    """A Python extension that CMake builds: `target` in the build folder's `folder`."""

    def __init__(self, name: str, target: str, folder: str) -> None:
        super().__init__(name, sources=[])
        self.target, self.folder = target, folder


class CMakeBuild(build_ext):
    _configured = None  # the build folder, once CMake has configured it in this run

    def configure(self) -> str:
        import torch

        build_dir = os.environ.get("XCCL_BUILD_DIR", os.path.join(ROOT, "build", "cmake"))
        if self._configured == build_dir:
            return build_dir
        os.makedirs(build_dir, exist_ok=True)
        configure = [
            "cmake",
            "-S",
            ROOT,
            "-B",
            build_dir,
            f"-DXCCL_TORCH_ROOT={os.path.dirname(torch.__file__)}",
            f"-DXCCL_TORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-DXCCL_TORCH_CUDA={torch.version.cuda or ''}",
            f"-DXCCL_TORCH_HIP={getattr(torch.version, 'hip', None) or ''}",
            f"-DXCCL_GPU={os.environ.get('XCCL_GPU', 'AUTO')}",
            f"-DXCCL_TEST_HOOKS={test_hooks()}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        archs = cuda_archs(torch)
        if archs:
            configure.append(f"-DXCCL_CUDA_ARCHS={archs}")
        if getattr(torch.version, "hip", None):
            configure.append(f"-DXCCL_TORCH_HIPIFY_V2={int(hipify_v2(torch))}")
            archs = hip_archs(torch)
            if archs:
                configure.append(f"-DXCCL_HIP_ARCHS={archs}")
        if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "Makefile")):
            configure.append("-GNinja")
        subprocess.check_call(configure)
        CMakeBuild._configured = build_dir
        return build_dir

    def build_extension(self, ext: Extension) -> None:
        build_dir = self.configure()
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", ext.target, "-j", jobs])
        folder = os.path.join(build_dir, ext.folder)
        built = [f for f in os.listdir(folder) if f.startswith(ext.target) and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"expected one built {ext.target} extension, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(folder, built[0]), target)


setup(
    name="xccl",
    version="0.1.0",
    description="Collective-communication backend for torch.distributed (CPU, CUDA, ROCm)",
    package_dir={"": "python"},
    packages=find_packages("python"),
    py_modules=["xccl_autoload"],
    ext_modules=[
        # _native first: it is small, and xccl imports it before torch (csrc/pyext/module.cc).
        CMakeExtension("xccl._native", "_native", os.path.join("csrc", "pyext")),
        CMakeExtension("xccl._C", "_C", os.path.join("csrc", "backend")),
    ],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    entry_points={
        "console_scripts": ["xccl = xccl.cli:main", "xccl-bench = xccl.bench:main"],
        # Loaded at the end of `import torch` so backend="xccl" works without `import xccl`.
        "torch.backends": ["xccl = xccl_autoload:autoload"],
    },
    zip_safe=False,
)
