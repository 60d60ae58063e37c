"""The examples users copy still run: each is started as a user would start it."""

import os
import subprocess
import sys
import time

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def run_example(name: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """examples/NAME in a fresh interpreter, importing the installed xccl (as test_bench does)."""
    xccl = pytest.importorskip("xccl")
    pytest.importorskip("xccl._C")
    environ = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(xccl.__file__)))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_kv_transfer_moves_pages_to_a_decode_worker_and_to_one_that_joins_later():
    import torch.distributed as dist

    if not (hasattr(dist, "_new_window") and hasattr(dist, "_reconfigure")):
        pytest.skip("this torch has no window or reconfigure API (torch >= 2.14 has both)")
    start = time.monotonic()
    proc = run_example("kv_transfer.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Every transfer was checked by its decode worker, the newcomer's (rank 2) included.
    for line in (
        "decode0 (rank 1): request 1, 5 pages OK",
        "decode0 (rank 1): request 2, 7 pages OK",
        "decode1 (rank 2): request 3, 4 pages OK",
        "kv_transfer: every page arrived intact",
    ):
        assert line in proc.stdout, proc.stdout + proc.stderr
    assert time.monotonic() - start < 120
