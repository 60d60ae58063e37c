"""Short scheduler slices for waiting threads (csrc/common/wait_slice.h, docs/shm.md "Waiting on
a busy host"): a rank's thread has XCCL_WAIT_SLICE_US while it sleeps in a collective and its own
slice again after; xccl's own threads keep the short one. Read from /proc/<pid>/task/<tid>/sched
(se.slice, Linux 6.12+ with scheduler statistics)."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks

DEFAULT_US = 100


def _slice_ns(pid: int, tid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/sched", encoding="ascii") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return int(line.split(":")[1])
    except OSError:
        pass
    return None


def _threads_with(pid: int, ns: int) -> int:
    return sum(_slice_ns(pid, int(tid)) == ns for tid in os.listdir(f"/proc/{pid}/task"))


def _slices(rank, world, wanted_ns):
    chk = Checker(rank)
    pids = [None] * world
    dist.all_gather_object(pids, os.getpid())
    main = os.getpid()  # the rank's main thread: its tid is the pid
    own = _slice_ns(main, main)
    x = torch.ones(1 << 16)
    dist.all_reduce(x)  # the group's threads and transports exist from here
    if rank == 1:
        time.sleep(0.5)  # rank 0 is asleep in the next all_reduce meanwhile
        chk.equal("rank 0's thread while it waits", _slice_ns(pids[0], pids[0]), wanted_ns or own)
    dist.all_reduce(x)
    chk.equal("all_reduce", x, torch.full((1 << 16,), float(world * world)))
    chk.equal("the caller's own slice afterwards", _slice_ns(main, main), own)
    short_threads = _threads_with(main, wanted_ns) if wanted_ns else _threads_with(main, 100_000)
    chk.true(
        "xccl's threads with the short slice",
        (short_threads > 0) == bool(wanted_ns),
        f"{short_threads} threads with {wanted_ns or 100_000} ns",
    )
    return result(chk)


@pytest.mark.skipif(
    _slice_ns(os.getpid(), os.getpid()) is None,
    reason="this kernel does not report scheduler slices (/proc/<pid>/sched se.slice)",
)
@pytest.mark.parametrize("transport", [None, "tcp"], ids=["shm", "tcp"])
@pytest.mark.parametrize("setting", [None, "250", "0"], ids=["default", "250us", "off"])
def test_a_sleeping_rank_has_the_short_slice_and_its_own_after(transport, setting):
    env = {} if setting is None else {"XCCL_WAIT_SLICE_US": setting}
    wanted_ns = (DEFAULT_US if setting is None else int(setting)) * 1000
    run_checks(_slices, 2, wanted_ns, env=env, transport=transport, min_checks=3)
