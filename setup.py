"""Builds xccl: CMake compiles csrc/ against the torch that is installed.

Install with `pip install --no-build-isolation .` so the build sees that torch (an isolated
build environment would fetch another one). Environment knobs:
  XCCL_BUILD_DIR   CMake build folder (default: build/cmake in the source tree)
  XCCL_GPU         AUTO (default), ON or OFF: the CUDA parts
  MAX_JOBS         parallel compile jobs (default: CPU count)
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        import torch

        build_dir = os.environ.get("XCCL_BUILD_DIR", os.path.join(ROOT, "build", "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        configure = [
            "cmake", "-S", ROOT, "-B", build_dir,
            f"-DXCCL_TORCH_ROOT={os.path.dirname(torch.__file__)}",
            f"-DXCCL_TORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-DXCCL_TORCH_CUDA={torch.version.cuda or ''}",
            f"-DXCCL_GPU={os.environ.get('XCCL_GPU', 'AUTO')}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "Makefile")):
            configure.append("-GNinja")
        subprocess.check_call(configure)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs])
        built = [f for f in os.listdir(os.path.join(build_dir, "csrc", "backend"))
                 if f.startswith("_C") and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"expected one built _C extension, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(build_dir, "csrc", "backend", built[0]), target)


setup(
    name="xccl",
    version="0.1.0",
    description="Collective-communication backend for torch.distributed (CPU, CUDA, ROCm)",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[CMakeExtension("xccl._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    entry_points={
        "console_scripts": ["xccl = xccl.cli:main", "xccl-bench = xccl.bench:main"],
        # Loaded at the end of `import torch` so backend="xccl" works without `import xccl`.
        "torch.backends": ["xccl = xccl._autoload:autoload"],
    },
    zip_safe=False,
)
