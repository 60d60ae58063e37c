"""Where the ranks come from: the launcher's (torchrun) or local ones this process starts.

Exit status: rank.py's (0 done; 1 a --check failed; 2 bad usage; 3 a rank failed, crashed or
timed out; 130 interrupted).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing import connection

from .. import _procs
from . import options, peers
from .rank import EXIT_CHECK_FAILED, EXIT_RANK_FAILED, EXIT_USAGE, FAILURE_GRACE_S, run_rank

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
POLL_S = 0.2


def launched_by(environ) -> bool:
    """torchrun (and torch.distributed.launch, SLURM wrappers that mimic it) set all three."""
    return all(name in environ for name in LAUNCHER_VARS)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = options.parse_args(argv)
    except SystemExit as stop:  # argparse: --help (0) or a usage error (2)
        return int(stop.code or 0)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        sys.stderr.write(
            "xccl bench: --plot needs matplotlib, which is not installed "
            "(pip install matplotlib), or leave out --plot\n"
        )
        return EXIT_USAGE
    why = peers.missing(args.references)
    if why:
        sys.stderr.write(f"xccl bench: {why}\n")
        return EXIT_USAGE
    try:
        if peers.under_mpirun(args, os.environ):
            return mpi_rank(args)
        if "mpi" in args.references:
            if launched_by(os.environ):
                sys.stderr.write(
                    "xccl bench: --reference mpi takes its ranks from MPI: run it without a "
                    "launcher (it starts --nranks ranks under mpirun) or under mpirun\n"
                )
                return EXIT_USAGE
            return spawn_mpirun(args)
        if args.netns_hosts:
            from . import netns

            return netns.main(args)
        if launched_by(os.environ):
            return run_rank(
                args,
                int(os.environ["RANK"]),
                int(os.environ["WORLD_SIZE"]),
                int(os.environ["LOCAL_RANK"]),
                "env://",
                launched=True,
            )
        return spawn_local(args)
    except KeyboardInterrupt:
        return 130


def _prepare(args, rank: int, world: int) -> None:
    """What every self-started rank sets before its groups exist (local and mpirun ranks)."""
    if "OMP_NUM_THREADS" not in os.environ:
        # As torchrun and xccl's environment defaults do: ranks share the host's cores rather
        # than each starting a pool as large as the machine.
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    if "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/lo"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # all ranks are local: keep gloo on loopback
    if args.simulate_hosts > 1:
        # Before the group exists: xccl groups ranks into hosts by this id (docs/network.md).
        os.environ["XCCL_SHM_HOST_ID"] = f"simulated-host-{rank * args.simulate_hosts // world}"


def _child(args, rank: int, world: int, init_method: str) -> None:
    _prepare(args, rank, world)
    try:
        status = run_rank(args, rank, world, rank, init_method, launched=False)
    except KeyboardInterrupt:  # Ctrl-C reaches every rank; the parent reports it once
        status = 130
    sys.exit(status)


def mpi_rank(args) -> int:
    """One rank started by mpirun: its rank and local rank come from MPI, the control group's
    store address from rank 0 over MPI (init method "mpi", sides.mpi_store)."""
    from mpi4py import MPI  # initialises MPI

    world = MPI.COMM_WORLD
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    rank, size, local_rank = world.Get_rank(), world.Get_size(), local.Get_rank()
    local.Free()
    _prepare(args, rank, size)
    return run_rank(args, rank, size, local_rank, "mpi", launched=False)


def spawn_mpirun(args) -> int:
    """--reference mpi without a launcher: starts args.nranks ranks under mpirun (peers.py's
    options) and waits for them within args.time_limit. Exit status as the local ranks'."""
    command = peers.mpirun_command(args.nranks, sys.executable, args.argv)
    environ = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(command, env=environ)  # noqa: S603 - our own interpreter and argv
    try:
        code = proc.wait(timeout=args.time_limit)
    except subprocess.TimeoutExpired:
        sys.stderr.write(
            f"xccl bench: not finished within --time-limit {args.time_limit:.0f} s; "
            "stopping mpirun\n"
        )
        code = EXIT_RANK_FAILED
    finally:
        if proc.poll() is None:  # timed out or interrupted: mpirun ends its ranks on SIGTERM
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return code if code in (0, EXIT_CHECK_FAILED, EXIT_USAGE) else EXIT_RANK_FAILED


def spawn_local(args) -> int:
    """Starts args.nranks ranks on this host and waits for them within args.time_limit."""
    with local_ranks(_child, args.nranks, (args,)) as procs:
        return _wait(procs, args.time_limit)


@contextlib.contextmanager
def local_ranks(target, nranks: int, args: tuple = (), prefix: str = "xccl-bench"):
    """Starts `nranks` processes running target(*args, rank, nranks, init_method) from
    _procs.rank_context(); they rendezvous through a file store in a private temporary folder
    (init_method "file://..."). Yields the processes; on leaving, ends those still running
    (every join bounded). Shared by the benchmark and `python -m xccl doctor`'s self-test."""
    context = _procs.rank_context()
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryDirectory(prefix=prefix + "-") as folder:
        init_method = "file://" + os.path.join(folder, "store")
        procs = [
            context.Process(
                target=target, args=(*args, rank, nranks, init_method), name=f"{prefix}-rank{rank}"
            )
            for rank in range(nranks)
        ]
        try:
            for proc in procs:
                proc.start()
            yield procs
        finally:
            _stop(procs)


def gather_reports(
    target, nranks: int, args: tuple, prefix: str, timeout_s: float
) -> tuple[list, str | None]:
    """Runs local_ranks(target, nranks, (*args, queue)) where each rank puts one report on the
    queue; returns (the reports in arrival order, None) or (those that came, why the rest did
    not: the time ran out, or every rank exited with reports missing). Shared by `python -m
    xccl doctor`'s self-test and its GPU check."""
    import queue

    reports = _procs.rank_context().Queue()
    deadline = time.monotonic() + timeout_s
    ranks, error = [], None
    with local_ranks(target, nranks, (*args, reports), prefix=prefix) as procs:
        while len(ranks) < nranks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                error = f"timed out after {timeout_s:.0f} s ({len(ranks)} of {nranks} ranks done)"
                break
            try:
                ranks.append(reports.get(timeout=min(remaining, 1.0)))
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and reports.empty():
                    error = "a rank exited without reporting (crashed?)"
                    break
        # Ranks that reported finish tearing down their groups; leaving ends the rest.
        for proc in procs:
            proc.join(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
    return ranks, error


def _wait(procs: list, time_limit: float) -> int:
    deadline = time.monotonic() + time_limit
    first_failure = None
    while any(proc.exitcode is None for proc in procs):
        now = time.monotonic()
        failed = [p for p in procs if p.exitcode not in (None, 0, EXIT_CHECK_FAILED)]
        if failed and first_failure is None:
            first_failure = now
        if first_failure is not None and now - first_failure > FAILURE_GRACE_S:
            sys.stderr.write("xccl bench: a rank failed; stopping the others\n")
            return EXIT_RANK_FAILED
        if now > deadline:
            sys.stderr.write(
                f"xccl bench: not finished within --time-limit {time_limit:.0f} s; "
                "stopping the ranks\n"
            )
            return EXIT_RANK_FAILED
        connection.wait([p.sentinel for p in procs if p.exitcode is None], timeout=POLL_S)
    codes = [proc.exitcode for proc in procs]
    if all(code == 0 for code in codes):
        return 0
    if all(code in (0, EXIT_CHECK_FAILED) for code in codes):
        return EXIT_CHECK_FAILED
    crashed = [
        f"rank {i} ({_describe(code)})"
        for i, code in enumerate(codes)
        if code not in (0, EXIT_CHECK_FAILED)
    ]
    sys.stderr.write(f"xccl bench: {', '.join(crashed)}\n")
    return EXIT_RANK_FAILED


def _describe(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _stop(procs: list) -> None:
    """Ends ranks still running (after a failure or timeout); every join is bounded."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
