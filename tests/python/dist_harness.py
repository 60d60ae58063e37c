"""The one multi-process harness of the pytest suite.

`spawn(fn, world_size, *args)` starts `world_size` processes, each running
`fn(rank, world_size, *args)` with a default process group of backend "xccl" already
initialised (or none with `init=False`), and returns one `Outcome` per rank. `run(...)` does the
same and fails the test unless every rank returned normally; `run_checks(...)` additionally
expects each rank to return a list of failure descriptions (see `Checker`) and fails with all
of them at once, so one spawn can sweep a whole dtype x op x size matrix.

Ranks on one host run their collectives over shared memory; `transport="tcp"` forces the TCP
path, `transport="shm"` insists on shared memory and `transport="hierarchical"` simulates two
hosts (even ranks on one, odd ranks on the other, through XCCL_SHM_HOST_ID: all_reduce then runs
over shared memory per host and TCP between them; needs 3 or more ranks). Cases that need shared
memory are skipped when the whole run sets XCCL_SHM_DISABLE. Every rank checks that its default
group really uses the transport asked for. `transport_cases()` parametrizes a test over world
sizes on the default transport plus a few on the others, so one body covers all of them.

Processes are forked from a forkserver that imported torch and xccl once, so a spawn costs
process start-up and group creation, not a torch import. Every spawn is bounded in wall-clock
time; on expiry the harness SIGKILLs its ranks and reports which ones were still running. Ranks
meet through a TCPStore that the parent serves on a port the kernel picked (127.0.0.1 only),
and write their stdout/stderr to per-rank logs whose tails appear in failure messages.

Tests keep tensor work inside the ranks: once the pytest process has run a parallel torch op
(OpenMP), anything that later forks it (other tests do) hangs in the child.

What runs inside a rank is in rank_process.py (the process entry) and rank_checks.py (Checker);
their public names are importable from here too.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any, Callable

import torch.distributed as dist

# Re-exported: the tests import every harness name from here.
from rank_checks import Checker, result
from rank_process import HOST, PLACEMENTS, Launch, device_index, entry, group_transport  # noqa: F401

WORLD_SIZES = (1, 2, 3, 4)
# The environment that makes a one-host group use each transport (docs/shm.md); "hierarchical"
# also sets XCCL_SHM_HOST_ID per rank (rank_process.entry).
TRANSPORT_ENV = {"shm": {}, "tcp": {"XCCL_SHM_DISABLE": "1"}, "hierarchical": {}}
LOG_TAIL_CHARS = 3000
MAX_REPORTED_FAILURES = 40
_context = None


def _mp_context():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        # Imported once by the server; every rank is a fork of it. torch._dynamo and DTensor
        # (with sympy) are what DDP, functional collectives and torch.testing.assert_close
        # import on first use: ~10 s of CPU per rank otherwise.
        _context.set_forkserver_preload(
            [
                "torch",
                "torch.distributed",
                "torch._dynamo",
                "torch.distributed.tensor",
                "torch.testing",
                "pytest",
                "xccl",
                "dist_harness",
                "torch.nn.parallel",
                "torch.distributed.algorithms.ddp_comm_hooks",
            ]
        )
    return _context


def free_port() -> int:
    """A port that was free a moment ago, for init methods that must bind one themselves."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Outcome:
    rank: int
    exitcode: int | None  # None: killed by the harness after the wall-clock bound
    value: Any = None  # what fn returned
    error: str | None = None  # "Type: message" when fn raised
    error_type: str | None = None
    traceback: str = ""
    elapsed: float = 0.0  # seconds from the spawn to this rank's result (or its end)
    phases: dict = dataclasses.field(default_factory=dict)  # seconds from the spawn to each
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.exitcode == 0 and self.error is None

    def describe(self) -> str:
        if self.exitcode is None:
            head = "still running at the wall-clock bound (killed)"
        elif self.exitcode < 0:
            head = f"killed by signal {-self.exitcode}"
        elif self.error is not None:
            head = f"raised {self.error}\n{self.traceback}"
        elif self.exitcode != 0:
            head = f"exited with code {self.exitcode}"
        else:
            head = "ok"
        log = self.log[-LOG_TAIL_CHARS:].strip()
        return f"rank {self.rank}: {head}" + (f"\n  log tail:\n{log}" if log else "")


def transport_cases(tcp_worlds=(3,), hierarchical_worlds=(), worlds=WORLD_SIZES) -> list:
    """pytest.param((world_size, transport)) cases: every world size on the default transport
    (ids "1", "2", ... as before), then `tcp_worlds` again with TCP forced (ids "3-tcp") and
    `hierarchical_worlds` on two simulated hosts (ids "4-hierarchical")."""
    import pytest

    return (
        [pytest.param(w, None, id=str(w)) for w in worlds]
        + [pytest.param(w, "tcp", id=f"{w}-tcp") for w in tcp_worlds]
        + [pytest.param(w, "hierarchical", id=f"{w}-hierarchical") for w in hierarchical_worlds]
    )


def default_transport() -> str:
    """The transport one-host groups get in this run: "tcp" when the whole run sets
    XCCL_SHM_DISABLE (e.g. `XCCL_SHM_DISABLE=1 pytest`), else "shm"."""
    value = os.environ.get("XCCL_SHM_DISABLE", "").strip().lower()
    return "tcp" if value in ("1", "true", "yes", "on") else "shm"


def spawn(
    fn: Callable,
    world_size: int,
    *args,
    timeout: float = 120.0,
    init: bool = True,
    pg_timeout: float = 60.0,
    pg_options: dict | None = None,
    env: dict | None = None,
    transport: str | None = None,
    placement: str | None = None,
) -> list[Outcome]:
    """Runs fn(rank, world_size, *args) on `world_size` fresh processes; never hangs.

    `timeout` bounds the whole spawn (wall clock); `pg_timeout` is the default group's timeout
    (seconds). `pg_options` is a dict of xccl.Options attributes (e.g. {"algorithm": "ring"}),
    built into an Options in the rank. `env` is applied in each rank before anything else runs.
    `transport` ("shm", "tcp", "hierarchical" or None for the default) selects and checks the
    group's transport (module docstring). `placement` ("shared", "spread" or None) picks each
    rank's CUDA device before anything else runs in it (`device_index`).
    """
    if transport in ("shm", "hierarchical") and default_transport() == "tcp":
        import pytest

        pytest.skip("XCCL_SHM_DISABLE is set for this run: no shared-memory case")
    env = {**TRANSPORT_ENV[transport or "shm"], **(env or {})}
    context = _mp_context()
    workdir = tempfile.mkdtemp(prefix="xccl-test-")
    store = None
    if init:
        store = dist.TCPStore(
            HOST,
            0,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=pg_timeout + 30),
        )
    started = time.time()
    launch = Launch(
        fn,
        world_size,
        args,
        workdir,
        store.port if store else 0,
        init,
        pg_timeout,
        pg_options,
        env,
        started,
        transport,
        placement,
    )
    processes = []
    try:
        for rank in range(world_size):
            p = context.Process(target=entry, name=f"xccl-rank{rank}", args=(launch, rank))
            p.start()
            processes.append(p)
        deadline = started + timeout
        for p in processes:
            p.join(max(0.0, deadline - time.time()))
        outcomes = []
        for rank, p in enumerate(processes):
            timed_out = p.is_alive()
            if timed_out:
                try:
                    os.kill(p.pid, signal.SIGUSR1)  # its Python stacks into its log
                    time.sleep(1)
                except ProcessLookupError:
                    pass
                p.kill()
            p.join(10)
            outcome = Outcome(
                rank, None if timed_out else p.exitcode, elapsed=time.time() - started
            )
            path = os.path.join(workdir, f"rank{rank}.pkl")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    payload = pickle.load(f)
                outcome.value = payload.get("value")
                outcome.error = payload.get("error")
                outcome.error_type = payload.get("error_type")
                outcome.traceback = payload.get("traceback", "")
                outcome.elapsed = payload.get("elapsed", outcome.elapsed)
                outcome.phases = payload.get("phases", {})
            elif not timed_out and p.exitcode == 0:
                outcome.error = "exited without a result"
            log = os.path.join(workdir, f"rank{rank}.log")
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    outcome.log = f.read()
            outcomes.append(outcome)
        return outcomes
    finally:
        for p in processes:  # only reached with live ranks when the parent itself was interrupted
            if p.is_alive():
                p.kill()
                p.join(10)
        del store
        shutil.rmtree(workdir, ignore_errors=True)


def describe(outcomes: list[Outcome]) -> str:
    return "\n".join(o.describe() for o in outcomes)


def run(fn: Callable, world_size: int, *args, **kwargs) -> list[Any]:
    """spawn() that fails the calling test unless every rank returned; returns their values."""
    outcomes = spawn(fn, world_size, *args, **kwargs)
    if not all(o.ok for o in outcomes):
        raise AssertionError(
            f"{fn.__name__} at world size {world_size} failed:\n"
            + describe([o for o in outcomes if not o.ok])
        )
    return [o.value for o in outcomes]


def run_checks(
    fn: Callable, world_size: int, *args, min_checks: int = 1, name: str = "", **kwargs
) -> None:
    """run() where fn returns a Checker's (failures, checks); fails listing every failure.
    `name` is what the failure calls fn (its __name__ by default)."""
    values = run(fn, world_size, *args, **kwargs)
    failures = [f"rank {rank}: {f}" for rank, (fs, _) in enumerate(values) for f in fs]
    if failures:
        shown = failures[:MAX_REPORTED_FAILURES]
        more = len(failures) - len(shown)
        raise AssertionError(
            f"{name or fn.__name__} at world size {world_size}: {len(failures)} "
            f"failure(s):\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more else "")
        )
    for rank, (_, checks) in enumerate(values):
        assert checks >= min_checks, f"rank {rank} ran only {checks} checks"


def checks_test(cases=WORLD_SIZES, min_checks: int = 1, **kwargs):
    """Decorator: `test_x(chk, rank, world)` becomes a pytest test that runs it on every rank of
    one spawn per case, with a fresh Checker per rank, through run_checks (every rank's failures
    fail the test together; each rank must make `min_checks` checks). `cases`: world sizes, or
    transport_cases() (each case's transport is then forced and checked). `kwargs` go to spawn().
    """
    import pytest

    params = [c if hasattr(c, "values") else pytest.param(c, None, id=str(c)) for c in cases]

    def make(body: Callable):
        def test(world_size, transport):
            run_checks(
                _checks_body,
                world_size,
                body.__module__,
                body.__name__,
                min_checks=min_checks,
                name=body.__name__,
                transport=transport,
                **kwargs,
            )

        test.__name__ = test.__qualname__ = body.__name__
        test.__module__, test.__doc__ = body.__module__, body.__doc__
        test.body = body  # what the ranks run: they find it again through the module
        return pytest.mark.parametrize("world_size,transport", params)(test)

    return make


def _checks_body(rank: int, world_size: int, module: str, name: str):
    """A checks_test's per-rank entry: the test's body with a fresh Checker."""
    chk = Checker(rank)
    getattr(importlib.import_module(module), name).body(chk, rank, world_size)
    return result(chk)


def kill_self() -> None:
    """Dies at once, as a crashed rank would (no exception, no cleanup, no goodbye)."""
    os.kill(os.getpid(), signal.SIGKILL)


def torchrun(nproc: int, max_restarts: int, *args: str) -> list[str]:
    """The command `torchrun --standalone --nproc-per-node N --max-restarts R ARGS...`, through
    this interpreter (torchrun is torch.distributed.run)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return command + ["--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts), *args]


def run_job(command: list[str], env: dict, timeout: float, what: str = "the job") -> str:
    """Runs a launcher (torchrun, an elastic agent) in a session of its own and returns its
    output (stdout and stderr together). A job still running after `timeout` seconds is killed
    with all it started and fails the test, as does a non-zero exit; both show its last output."""
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the agent and its workers
        output, _ = process.communicate()
        raise AssertionError(f"{what} hung ({timeout:.0f} s):\n{output[-6000:]}") from None
    assert process.returncode == 0, f"{what} failed ({process.returncode}):\n{output[-6000:]}"
    return output
