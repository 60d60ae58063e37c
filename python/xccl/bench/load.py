"""`--load N`: N CPU-bound processes beside the ranks, as on a training host whose cores are busy
with data loaders and compiles.

Each size is measured twice in the same processes: quiet, with the load paused (SIGSTOP: a
stopped process takes no CPU), then loaded, with it running (SIGCONT). So every table row has a
quiet and a loaded column from the same run, and a drift in the machine hits both alike.

Who owns the load: under a launcher (or the local spawner) the rank with local rank 0 starts N
processes on its host; with --netns-hosts every namespace host shares this machine's cores, so
the parent starts them once and rank 0 only pauses and resumes them (their pids reach it in the
options, `load_pids`). The processes end with their owner: the kernel kills them when it exits
(PR_SET_PDEATHSIG), stopped or not, and they also check their parent now and then.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

# A bounded slice of pure Python work between parent checks (about 20 ms on current CPUs).
BURNER = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Load:
    """Pausable CPU-bound processes. `on()` and `off()` do nothing where this rank owns none."""

    def __init__(self, pids: list | None = None, owned: list | None = None):
        self.pids = list(pids or [])
        self._owned = list(owned or [])

    @classmethod
    def start(cls, count: int) -> Load:
        """Starts `count` processes, paused."""
        procs = []
        try:
            for _ in range(count):
                procs.append(
                    subprocess.Popen(  # noqa: S603 - our own interpreter, a fixed program
                        [sys.executable, "-c", BURNER],
                        stdin=subprocess.DEVNULL,
                        preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl
                    )
                )
        except BaseException:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise
        load = cls([proc.pid for proc in procs], procs)
        load.off()
        return load

    @classmethod
    def for_rank(cls, args, rank: int, local_rank: int) -> Load:
        """This rank's share of `--load`: the pids it was given (rank 0 of a --netns-hosts run),
        processes it starts (local rank 0), or nothing."""
        count = getattr(args, "load", 0) or 0
        given = getattr(args, "load_pids", None)
        if given is not None:
            return cls(given if rank == 0 else [])
        return cls.start(count) if count and local_rank == 0 else cls()

    def on(self) -> None:
        self._signal(signal.SIGCONT)

    def off(self) -> None:
        self._signal(signal.SIGSTOP)

    def close(self) -> None:
        """Ends the processes this object started (given pids belong to their starter)."""
        for proc in self._owned:
            proc.kill()
        for proc in self._owned:
            proc.wait()
        self._owned, self.pids = [], []

    def _signal(self, number: int) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                # Gone (killed from outside): the run goes on with less load; the table's
                # heading still says how many were asked for.
                pass

    def __enter__(self) -> Load:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
