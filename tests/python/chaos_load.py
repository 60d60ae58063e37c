"""Load and leftovers for the chaos tests (test_chaos.py, link_failover_runs.py).

`burners()` runs CPU-bound processes beside a job (two per core by default: each rank then gets
a fraction of a core and is descheduled for whole time slices, as during a parallel compile) and
always ends them. `shm_leftovers(pids)` lists what processes with those pids left in /dev/shm
(xccl's names carry their creator's pid: "xccl-<pid>-...", "xccl-w<pid>-...", "xccl-p2p-<pid>-...").
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys

BURNERS_PER_CORE = 2
_BURN = "while True:\n    pass\n"


@contextlib.contextmanager
def burners(per_core: int = BURNERS_PER_CORE):
    """`per_core` CPU-bound processes per core while the block runs; killed and reaped on the
    way out, whatever happened in the block."""
    procs = []
    try:
        for _ in range(per_core * (os.cpu_count() or 1)):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _BURN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)


def shm_leftovers(pids) -> list:
    """Files in /dev/shm whose xccl name carries one of `pids` (nobody else's)."""
    wanted = {str(pid) for pid in pids}
    pattern = re.compile(r"^xccl-(?:p2p-|w)?(\d+)-")
    left = []
    for name in os.listdir("/dev/shm"):
        match = pattern.match(name)
        if match and match.group(1) in wanted:
            left.append(name)
    return sorted(left)
