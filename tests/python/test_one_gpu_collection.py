"""On a machine with one GPU, the GPU test files collect nothing that would be skipped:
benchmarks/device_check.sh reads a skip on a GPU machine as a failure, so a case that cannot
apply there (the spread placement, the vendor route between GPUs) must not be collected at all
(conftest.py's gpus(n) mark; test_gpu.py's placement_cases). Collected here on the CPU with
torch faked to see one GPU (fake_one_gpu.py), the bodies not run: skip marks and empty parameter
sets show as they would on the GPU. Skips decided inside a body at run time (no NCCL in torch,
for test_vendor_route_at_world_size_one) are not seen here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU_FILES = sorted(p.name for p in HERE.glob("test_gpu*.py"))


def test_gpu_files_collect_no_skipped_item_on_one_gpu():
    assert "test_gpu_work.py" in GPU_FILES and "test_gpu.py" in GPU_FILES
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
        + ["-p", "fake_one_gpu", *GPU_FILES],
        cwd=HERE,
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", tail)}
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert counts.get("skipped", 0) == 0 and not skipped, "\n".join(skipped) or tail
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert counts.get("passed", 0) > 0, tail
