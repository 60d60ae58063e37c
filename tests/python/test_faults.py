"""Failures of a peer: a rank that never enters a collective (the others time out with a
message naming the op, its sequence number and the missing rank) and a rank killed with SIGKILL
(the others fail promptly, long before the timeout, naming the dead rank, and no shared-memory
segment is left in /dev/shm). The group is unusable afterwards (like NCCL) and says why; the
harness bounds every spawn. Each case runs on the default transport (shared memory on this one
host) and some also with TCP forced."""

from __future__ import annotations

import glob
import os
import re
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import describe, group_transport, kill_self, run, spawn

TIMEOUT_S = 3.0
# Reporting a timeout may take a little longer than the timeout (the store, a loaded machine).
TIMEOUT_MARGIN_S = 7.0
DEATH_BOUND_S = 10.0


def _fail(rank: int, op, started: float) -> dict:
    """Runs op (expected to raise) and describes how."""
    try:
        op()
    except Exception as e:  # noqa: BLE001 - the point of the test
        return {"raised": type(e).__name__, "message": str(e), "after": time.time() - started}
    return {"raised": None, "message": "", "after": time.time() - started}


def _cases_by_transport(names: str, **by_transport):
    """pytest.mark.parametrize over `names` plus "transport", from the rows given per transport
    (in that order): ids stay "<row values>-<transport>", e.g. "2-1-False-shm"."""
    rows = [(*row, transport) for transport, table in by_transport.items() for row in table]
    return pytest.mark.parametrize(names + ",transport", rows)


def _absent(rank, world, absent, async_op):
    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(1001)
    dist.all_reduce(x)  # collective #1: everyone, so all are connected and in step
    assert torch.equal(x, torch.full((1001,), float(world)))
    if rank == absent:
        # Stay away from collective #2 until every other rank has reported its failure.
        store.wait([f"failed/{r}" for r in range(world) if r != absent], timedelta(seconds=60))
        return {"absent": True}
    started = time.time()
    if async_op:
        work = dist.all_reduce(x, async_op=True)
        outcome = _fail(rank, work.wait, started)
    else:
        outcome = _fail(rank, lambda: dist.all_reduce(x), started)
    store.set(f"failed/{rank}", "1")
    # The group is now unusable, and says so at once instead of timing out again.
    started = time.time()
    outcome["next"] = _fail(rank, lambda: dist.all_reduce(torch.ones(3)), started)
    return outcome


@_cases_by_transport(
    "world_size,absent,async_op",
    shm=[(2, 1, False), (3, 2, False), (3, 0, True), (4, 1, False)],
    tcp=[(3, 2, False)],
    hierarchical=[(4, 2, False)],
)
def test_rank_that_never_enters_times_out(world_size, absent, async_op, transport):
    outcomes = spawn(
        _absent, world_size, absent, async_op, pg_timeout=TIMEOUT_S, timeout=90, transport=transport
    )
    assert all(o.ok for o in outcomes), describe(outcomes)
    for o in outcomes:
        if o.rank == absent:
            continue
        v = o.value
        context = f"rank {o.rank}: {v}"
        assert v["raised"] is not None, f"rank {o.rank}: all_reduce #2 did not fail"
        assert v["raised"] in ("DistBackendError", "RuntimeError"), context
        assert TIMEOUT_S - 0.5 <= v["after"] <= TIMEOUT_S + TIMEOUT_MARGIN_S, context
        message = v["message"]
        assert "allreduce" in message, context
        assert "#2" in message, context
        # torch's wording too, for code and tools that match it (ProcessGroupNCCL, Gloo).
        assert "Watchdog caught collective operation timeout" in message, context
        assert " Timed out waiting " in message, context
        # "... no data from rank(s) [2] ... Diagnosis: rank(s) 2 (last entered #1 ...)"
        assert re.search(rf"\brank(?:s|\(s\))? \[?[\d, ]*\b{absent}\b", message), context
        nxt = v["next"]
        assert nxt["raised"] is not None and nxt["after"] < 2.0, f"rank {o.rank}: {nxt}"
        assert "unusable" in nxt["message"], f"rank {o.rank}: {nxt}"


def _killed(rank, world, victim, in_flight):
    store = dist.distributed_c10d._get_default_store()
    store.set(f"pid/{rank}", str(os.getpid()))
    x = torch.ones(1001)
    dist.all_reduce(x)  # collective #1 connects everyone
    big = torch.ones(1_000_003)
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    if rank == victim:
        if in_flight:
            dist.all_reduce(big, async_op=True)  # peers are mid-transfer with us when we die
        kill_self()
    started = time.time()
    outcome = _fail(rank, lambda: dist.all_reduce(big), started)
    outcome["correct"] = bool(torch.equal(big, torch.full_like(big, float(world))))
    outcome["next"] = _fail(rank, lambda: dist.all_reduce(torch.ones(3)), time.time())
    outcome["transport"] = group_transport()
    outcome["segment"] = backend.shm_segment
    outcome["pids"] = [int(store.get(f"pid/{r}")) for r in range(world)]
    return outcome


@_cases_by_transport(
    "world_size,victim,in_flight",
    shm=[(2, 1, False), (3, 0, True), (3, 1, False), (4, 2, True)],
    tcp=[(3, 1, True)],
    hierarchical=[(4, 1, True), (4, 0, False)],
)
def test_killed_rank_is_reported_promptly(world_size, victim, in_flight, transport):
    outcomes = spawn(
        _killed, world_size, victim, in_flight, pg_timeout=60.0, timeout=60, transport=transport
    )
    assert outcomes[victim].exitcode == -9, describe(outcomes)
    survivors = [o for o in outcomes if o.rank != victim]
    assert all(o.ok for o in survivors), describe(survivors)
    for o in survivors:
        v = o.value
        context = f"rank {o.rank}: {v}"
        failed = v
        if in_flight and v["raised"] is None:
            # The victim's whole part was in before the SIGKILL landed (its executor can finish
            # a collective before the next line of its main thread runs): the collective rightly
            # completed for everyone. It must be right, and the next one must fail as below.
            assert v["correct"], context
            failed = v["next"]
        assert failed["raised"] in ("DistBackendError", "RuntimeError"), context
        assert failed["after"] < DEATH_BOUND_S, context
        assert re.search(rf"\brank(?:s|\(s\))? \[?[\d, ]*\b{victim}\b", failed["message"]), context
        assert "allreduce" in failed["message"], context
        assert v["next"]["raised"] is not None, context
        assert v["transport"] == transport, context
    if transport != "tcp":
        # Every survivor knew its segment ("xccl-<creator's pid>-...": the group's, or its
        # host's); none of them, nor any other segment these ranks created, is in /dev/shm,
        # though a rank died holding one.
        names = {o.value["segment"] for o in survivors}
        assert len(names) == (1 if transport == "shm" else 2), describe(survivors)
        assert all(name.startswith("xccl-") for name in names), names
        pids = survivors[0].value["pids"]
        leftovers = [path for pid in pids for path in glob.glob(f"/dev/shm/xccl-{pid}-*")]
        assert not leftovers, f"segments left in /dev/shm: {leftovers}"


def _abort(rank, world):
    """abort() on one rank: its peers' pending collective fails promptly, naming it."""
    x = torch.ones(7)
    dist.all_reduce(x)
    started = time.time()
    if rank == 0:
        dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).abort()
        return _fail(rank, lambda: dist.all_reduce(x), started)
    return _fail(rank, lambda: dist.all_reduce(torch.ones(1_000_003)), started)


@pytest.mark.parametrize("world_size,transport", [(2, "shm"), (3, "shm"), (2, "tcp")])
def test_abort_fails_peers_promptly(world_size, transport):
    values = run(_abort, world_size, pg_timeout=60.0, timeout=60, transport=transport)
    for rank, v in enumerate(values):
        assert v["raised"] is not None and v["after"] < DEATH_BOUND_S, f"rank {rank}: {v}"
        if rank != 0:
            assert re.search(r"\brank 0\b", v["message"]), f"rank {rank}: {v}"


def _abort_own_wait(rank, world):
    """abort() from another thread ends this rank's own pending collective promptly, wherever
    it waits (shared memory or TCP): here for a peer that stays away."""
    import threading

    store = dist.distributed_c10d._get_default_store()
    dist.all_reduce(torch.ones(7))
    if rank == 1:
        store.wait(["aborted"], timedelta(seconds=60))
        return None
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    work = dist.all_reduce(torch.ones(1001), async_op=True)  # rank 1 never joins this one
    threading.Timer(0.5, backend.abort).start()
    outcome = _fail(rank, work.wait, time.time() + 0.5)
    store.set("aborted", "1")
    return outcome


@pytest.mark.parametrize("transport", ("shm", "tcp"))
def test_abort_ends_this_ranks_own_wait(transport):
    values = run(_abort_own_wait, 2, pg_timeout=60.0, timeout=60, transport=transport)
    v = values[0]
    assert v["raised"] is not None, v
    assert v["after"] < 2.0, v  # seconds after abort(), not the 60 s timeout
    assert "abort" in v["message"], v
