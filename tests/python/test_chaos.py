"""Chaos: faults at every phase of a job while CPU-bound processes compete for the cores (two
per core, chaos_load.burners): a rank SIGKILLed during group creation, mid all_reduce, mid window
put, during reconfigure and during shutdown; the store's server killed after creation; a link
flapping every second across two namespace hosts. Each case has its own bound and checks that
no survivor waits past it, that every survivor's error names the cause (the dead rank, or the
store), that every result that arrives is exact, and that none of the job's processes left a
file in /dev/shm. test_faults.py covers the same deaths on an idle machine;
link_failover_runs.py repeats the link-down case by hand, N times.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from chaos_load import burners, shm_leftovers
from dist_harness import HOST, describe, kill_self, spawn

PG_TIMEOUT_S = 10.0
# Under two burners per core a survivor learns of a death a little later than on an idle
# machine (test_faults.py's 10 s), and never later than the group timeout plus this.
MARGIN_S = 10.0
SPAWN_BOUND_S = 120
BIG = 4_000_037  # floats: 16 MB, many chunks in flight when the victim dies
VICTIM = 1


def _ready(rank, world):
    return rank


@pytest.fixture(scope="module")
def forkserver():
    """The harness's forkserver imports torch once (tens of seconds of CPU under burners): done
    before any burner starts, so each case's bound measures the case."""
    assert spawn(_ready, 1, init=False, timeout=SPAWN_BOUND_S)[0].ok


@pytest.fixture
def load(forkserver):
    with burners():
        yield


def _attempt(op) -> dict:
    """Runs op; what it raised (None when it returned), its message and how long it took."""
    began = time.monotonic()
    try:
        op()
    except Exception as e:  # noqa: BLE001 - the point of the tests
        return {"raised": type(e).__name__, "message": str(e), "after": time.monotonic() - began}
    return {"raised": None, "message": "", "after": time.monotonic() - began}


def _names_rank(message: str, rank: int) -> bool:
    return re.search(rf"\brank(?:s|\(s\))? \[?[\d, ]*\b{rank}\b", message) is not None


def _publish_pid(store, rank: int) -> None:
    store.set(f"chaos/pid/{rank}", str(os.getpid()))


def _pids(store, world: int) -> list:
    return [int(store.get(f"chaos/pid/{r}")) for r in range(world)]


def _killed_in_a_group(fn, transport: str) -> list:
    """Runs fn on 3 ranks of a group over `transport` (timeout PG_TIMEOUT_S) where VICTIM kills
    itself; checks the deaths as _check_survivors does and returns what the survivors returned."""
    outcomes = spawn(fn, 3, pg_timeout=PG_TIMEOUT_S, timeout=SPAWN_BOUND_S, transport=transport)
    return _check_survivors(outcomes, VICTIM)


def _check_survivors(outcomes, victim: int) -> list:
    """The victim died of SIGKILL and every survivor returned (within the spawn's bound: each
    case checks how long its own waits took); returns what the survivors returned."""
    assert outcomes[victim].exitcode == -signal.SIGKILL, describe(outcomes)
    survivors = [o for o in outcomes if o.rank != victim]
    assert all(o.ok for o in survivors), describe(survivors)
    return [o.value for o in survivors]


def _assert_failed_naming(result: dict, rank: int, context) -> None:
    assert result["raised"] in ("DistBackendError", "RuntimeError"), context
    assert result["after"] < PG_TIMEOUT_S + MARGIN_S, context
    assert _names_rank(result["message"], rank), context


def _assert_no_leftovers(pids) -> None:
    left = shm_leftovers(pids)
    assert not left, f"left in /dev/shm by the job's processes {pids}: {left}"


# --- a rank dies while the group is being created --------------------------------------------


def _dies_at_creation(rank, world, port, transport):
    if transport == "tcp":
        os.environ["XCCL_SHM_DISABLE"] = "1"
    store = dist.TCPStore(HOST, port, is_master=False, timeout=timedelta(seconds=60))
    _publish_pid(store, rank)
    if rank == VICTIM:
        kill_self()
    created = _attempt(
        lambda: dist.init_process_group(
            "xccl",
            store=store,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=PG_TIMEOUT_S),
        )
    )
    return {"created": created, "pids": _pids(store, world)}


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_rank_killed_during_group_creation(load, transport):
    server = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False)
    outcomes = spawn(
        _dies_at_creation, 3, server.port, transport, init=False, timeout=SPAWN_BOUND_S
    )
    results = _check_survivors(outcomes, VICTIM)
    for r in results:
        _assert_failed_naming(r["created"], VICTIM, r)
    _assert_no_leftovers(results[0]["pids"])


# --- a rank dies mid all_reduce ----------------------------------------------------------------


def _dies_mid_all_reduce(rank, world):
    store = dist.distributed_c10d._get_default_store()
    _publish_pid(store, rank)
    small = torch.arange(1001, dtype=torch.int64) + rank
    dist.all_reduce(small)  # everyone connected and in step
    exact = torch.equal(small, world * torch.arange(1001, dtype=torch.int64) + 3)
    big = torch.full((BIG,), rank + 1, dtype=torch.int32)
    if rank == VICTIM:
        dist.all_reduce(big, async_op=True)  # peers are mid-transfer with us when we die
        kill_self()
    outcome = _attempt(lambda: dist.all_reduce(big))
    # Either the collective completed (the victim's whole part was in before it died) and is
    # exact, or it failed; then the next one fails too, naming the victim.
    outcome["exact"] = bool(torch.equal(big, torch.full_like(big, 6)))
    outcome["next"] = _attempt(lambda: dist.all_reduce(torch.ones(3)))
    return {"first": exact, "outcome": outcome, "pids": _pids(store, world)}


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_rank_killed_mid_all_reduce(load, transport):
    results = _killed_in_a_group(_dies_mid_all_reduce, transport)
    for r in results:
        assert r["first"], r
        outcome = r["outcome"]
        failed = outcome if outcome["raised"] is not None else outcome["next"]
        if outcome["raised"] is None:
            assert outcome["exact"], r
        _assert_failed_naming(failed, VICTIM, r)
        _assert_failed_naming(outcome["next"], VICTIM, r)
    _assert_no_leftovers(results[0]["pids"])


# --- a rank dies mid window put ----------------------------------------------------------------


def _dies_mid_put(rank, world):
    store = dist.distributed_c10d._get_default_store()
    _publish_pid(store, rank)
    t = torch.zeros(BIG, dtype=torch.int32)
    win = dist._new_window(t)
    dist.barrier()
    if rank == VICTIM:
        # A large put into rank 0's window, still being copied or sent when we die.
        win.put(torch.full((BIG,), 7, dtype=torch.int32), 0, 0, True)
        kill_self()
    waited = _attempt(lambda: win.wait_signal(VICTIM, False))
    # Between the live ranks the window still works, exactly.
    other = 2 - rank  # ranks 0 and 2 survive
    mine = torch.arange(1000, dtype=torch.int32) * 3 + rank
    win.put(mine, other, BIG - 1000, False)
    win.signal(other, False)
    win.wait_signal(other, False)
    exact = torch.equal(t[BIG - 1000 :], torch.arange(1000, dtype=torch.int32) * 3 + other)
    return {"waited": waited, "exact": exact, "pids": _pids(store, world)}


@pytest.mark.skipif(not hasattr(dist, "_new_window"), reason="this torch has no windows")
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_rank_killed_mid_window_put(load, transport):
    results = _killed_in_a_group(_dies_mid_put, transport)
    for r in results:
        _assert_failed_naming(r["waited"], VICTIM, r)
        assert r["exact"], r
    _assert_no_leftovers(results[0]["pids"])


# --- a rank dies during reconfigure ------------------------------------------------------------


def _dies_during_reconfigure(rank, world, port):
    store = dist.TCPStore(HOST, port, is_master=False, timeout=timedelta(seconds=60))
    _publish_pid(store, rank)
    dist.init_process_group(
        "xccl",
        store=store,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=PG_TIMEOUT_S),
        enable_reconfigure=True,
    )

    def reconfigure(uuid, members, timeout=None):
        store.set(f"chaos/{uuid}/{rank}", dist._get_reconfigure_handle())
        handles = [store.get(f"chaos/{uuid}/{m}").decode() for m in members]
        return dist._reconfigure(uuid=uuid, handles=handles, timeout=timeout), handles

    work, _ = reconfigure(1, [0, 1, 2])
    work.wait()
    work, handles = reconfigure(2, [0, 1, 2], timedelta(seconds=PG_TIMEOUT_S))
    if rank == VICTIM:
        kill_self()  # the reconfigure under way on every rank, ours included
    changed = _attempt(work.wait)
    after = _attempt(lambda: dist.all_reduce(torch.ones(3)))
    # A fresh uuid without the victim recovers; its result is exact.
    reconfigure(3, [0, 2])[0].wait()
    total = torch.arange(10, dtype=torch.int64) + dist.get_rank()
    dist.all_reduce(total)
    exact = torch.equal(total, 2 * torch.arange(10, dtype=torch.int64) + 1)
    return {
        "changed": changed,
        "after": after,
        "dead": handles[VICTIM],
        "exact": exact,
        "pids": _pids(store, world),
    }


@pytest.mark.skipif(not hasattr(dist, "_reconfigure"), reason="this torch has no reconfigure")
def test_rank_killed_during_reconfigure(load):
    server = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False)
    outcomes = spawn(_dies_during_reconfigure, 3, server.port, init=False, timeout=SPAWN_BOUND_S)
    results = _check_survivors(outcomes, VICTIM)
    for r in results:
        # The victim's handle did not arrive, or (it died after its part) the group's next
        # collective names it; either way nothing waits past the timeout.
        failed = r["changed"] if r["changed"]["raised"] is not None else r["after"]
        assert failed["raised"] is not None, r
        assert failed["after"] < PG_TIMEOUT_S + MARGIN_S, r
        assert _names_rank(failed["message"], VICTIM) or r["dead"] in failed["message"], r
        assert r["exact"], r
    _assert_no_leftovers(results[0]["pids"])


# --- a rank dies during shutdown ---------------------------------------------------------------


def _dies_during_shutdown(rank, world):
    store = dist.distributed_c10d._get_default_store()
    _publish_pid(store, rank)
    pids = _pids(store, world)
    total = torch.arange(1001, dtype=torch.int64) * (rank + 1)
    dist.all_reduce(total)
    exact = torch.equal(total, torch.arange(1001, dtype=torch.int64) * 6)
    # Everyone starts one more large collective and then shuts down; the victim dies while the
    # others are in destroy_process_group with that collective unfinished.
    pending = dist.all_reduce(torch.ones(BIG), async_op=True)
    if rank == VICTIM:
        kill_self()
    destroyed = _attempt(dist.destroy_process_group)
    finished = _attempt(pending.wait)
    return {"exact": exact, "destroyed": destroyed, "pending": finished, "pids": pids}


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_rank_killed_during_shutdown(load, transport):
    results = _killed_in_a_group(_dies_during_shutdown, transport)
    for r in results:
        assert r["exact"], r
        # Shutting down never raises nor waits for the dead rank past the group timeout.
        assert r["destroyed"]["raised"] is None, r
        assert r["destroyed"]["after"] < PG_TIMEOUT_S + MARGIN_S, r
        if r["pending"]["raised"] is not None:
            assert r["pending"]["after"] < PG_TIMEOUT_S + MARGIN_S, r
    _assert_no_leftovers(results[0]["pids"])


# --- the store's server is killed after the group exists ---------------------------------------

# The store's server in a process of its own (as torchrun's agent serves it), so that the test
# can kill it while every rank lives.
_STORE_SERVER = (
    "import signal, torch.distributed as d\n"
    f"s = d.TCPStore({HOST!r}, 0, is_master=True, wait_for_workers=False)\n"
    "print(s.port, flush=True)\n"
    "signal.pause()\n"
)


def _refused(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        pass
    return False


def _store_gone(rank, world, port, server_pid):
    store = dist.TCPStore(HOST, port, is_master=False, timeout=timedelta(seconds=PG_TIMEOUT_S))
    dist.init_process_group(
        "xccl", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=PG_TIMEOUT_S)
    )
    _publish_pid(store, rank)
    pids = _pids(store, world)
    dist.barrier()  # every rank read the pids before the store goes
    if rank == 0:
        os.kill(server_pid, signal.SIGKILL)
        gone_by = time.monotonic() + 10
        while not _refused(port) and time.monotonic() < gone_by:
            time.sleep(0.05)
    # Rank 0 joins only once the store is gone: this collective runs without it, exactly.
    total = torch.arange(1001, dtype=torch.int64) * (rank + 1)
    collective = _attempt(lambda: dist.all_reduce(total))
    collective["exact"] = bool(torch.equal(total, torch.arange(1001, dtype=torch.int64) * 6))
    # A new group needs the store: it fails in bounded time, saying so.
    grouped = _attempt(lambda: dist.new_group([0, 1, 2]))
    destroyed = _attempt(dist.destroy_process_group)
    return {"collective": collective, "new_group": grouped, "destroyed": destroyed, "pids": pids}


def test_store_server_killed_after_creation(load):
    server = subprocess.Popen(
        [sys.executable, "-c", _STORE_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stdout.readline())
        outcomes = spawn(_store_gone, 3, port, server.pid, init=False, timeout=SPAWN_BOUND_S)
    finally:
        server.kill()
        server.wait(timeout=30)
    assert all(o.ok for o in outcomes), describe(outcomes)
    for o in outcomes:
        r = o.value
        assert r["collective"]["raised"] is None and r["collective"]["exact"], r
        grouped = r["new_group"]
        assert grouped["raised"] is not None, r
        assert grouped["after"] < PG_TIMEOUT_S + MARGIN_S, r
        # The store is the cause, not the live ranks that "did not publish".
        assert "the store is unreachable" in grouped["message"], r
        assert "did not publish" not in grouped["message"], r
        first_line = grouped["message"].splitlines()[0][:300]
        print(f"rank {o.rank}: new_group without the store: {first_line}")  # for the record (-s)
        assert r["destroyed"]["raised"] is None, r
        assert r["destroyed"]["after"] < PG_TIMEOUT_S, r
    _assert_no_leftovers(outcomes[0].value["pids"])


# --- a link flapping across namespace hosts ----------------------------------------------------

FLAP_SECONDS = 20
FLAP_PERIOD_S = 1.0
# Once, mid-flapping, rank 0 is stopped longer than XCCL_NET_LINK_TIMEOUT_MS (1 s): a rank
# descheduled on a loaded machine, whose peers time out every link to it, the good ones too.
PAUSE_AT_S, PAUSE_S = 10, 1.5


def _pause(proc, seconds: float) -> None:
    proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGCONT)


def test_link_flapping_every_second_loses_nothing(tmp_path):
    """2x2 ranks on two namespace hosts run 4 MiB all_reduces, each checked, while host 1's
    second link goes down and up every second for 20 s, and rank 0 is stopped for 1.5 s once:
    no error, every result exact. The burners start once every rank is in its loop (four torch
    imports under them would take most of a minute)."""
    cross = pytest.importorskip("test_cross_host")
    if cross.hosts_module.unavailable_reason() is not None:
        pytest.skip(cross.hosts_module.unavailable_reason())
    progress, stop = tmp_path / "progress", tmp_path / "stop"
    env = {"XCCL_NET": "tcp", **cross.MULTI_LINK}
    with cross.hosts_module.Hosts(2) as hosts:
        procs = cross.start_ranks(hosts, [2, 2], env, ["flap", str(progress), str(stop)], tmp_path)
        deadline = time.monotonic() + cross.CASE_TIMEOUT_S
        try:
            cross._wait_for_iteration(progress, 3, procs, deadline)  # every link up and used
            with burners():
                began, up, paused = time.monotonic(), True, False
                while time.monotonic() - began < FLAP_SECONDS:
                    if any(proc.poll() is not None for proc, _, _ in procs):
                        break  # a rank ended early: finish_ranks says why
                    up = not up
                    hosts.set_link(1, 1, up=up)
                    if not paused and time.monotonic() - began >= PAUSE_AT_S:
                        paused = True
                        _pause(procs[0][0], PAUSE_S)
                    else:
                        time.sleep(FLAP_PERIOD_S)
                flapped = int(progress.read_text())
        finally:
            hosts.set_link(1, 1, up=True)
            stop.write_text("1")
        results = cross.finish_ranks(procs, tmp_path, deadline)
    cross.assert_all_passed(results, [2, 2])
    checks = [r["checks"] for r in results]
    assert len(set(checks)) == 1 and checks[0] > flapped, (checks, flapped)
    longest = max(r["max_call_s"] for r in results)
    print(f"link flapping: {checks[0]} all_reduces, longest {longest:.3f} s")  # for the record
    assert longest < PG_TIMEOUT_S, f"the longest all_reduce took {longest:.2f} s"
    logs = "".join(r["stderr"] for r in results)
    assert cross.hosts_module.IFNAMES[1] in logs, f"no log names the failed link:\n{logs[-3000:]}"
    _assert_no_leftovers([proc.pid for proc, _, _ in procs])
