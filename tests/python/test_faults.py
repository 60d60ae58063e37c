"""Failures of a peer: a rank that never enters a collective (the others time out with a
message naming the op, its sequence number and the missing rank) and a rank killed with SIGKILL
(the others fail promptly, long before the timeout, naming the dead rank). The group is
unusable afterwards (like NCCL) and says why; the harness bounds every spawn."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import describe, kill_self, run, spawn

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


@pytest.mark.parametrize("world_size,absent,async_op", [(2, 1, False), (3, 2, False),
                                                         (3, 0, True), (4, 1, False)])
def test_rank_that_never_enters_times_out(world_size, absent, async_op):
    outcomes = spawn(_absent, world_size, absent, async_op, pg_timeout=TIMEOUT_S, timeout=90)
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
        # "... no data from rank(s) [2] ... Diagnosis: rank(s) 2 (last entered #1 ...)"
        assert re.search(rf"\brank(?:s|\(s\))? \[?[\d, ]*\b{absent}\b", message), context
        nxt = v["next"]
        assert nxt["raised"] is not None and nxt["after"] < 2.0, f"rank {o.rank}: {nxt}"
        assert "unusable" in nxt["message"], f"rank {o.rank}: {nxt}"


def _killed(rank, world, victim, in_flight):
    x = torch.ones(1001)
    dist.all_reduce(x)  # collective #1 connects everyone
    big = torch.ones(1_000_003)
    if rank == victim:
        if in_flight:
            dist.all_reduce(big, async_op=True)  # peers are mid-transfer with us when we die
        kill_self()
    started = time.time()
    outcome = _fail(rank, lambda: dist.all_reduce(big), started)
    outcome["next"] = _fail(rank, lambda: dist.all_reduce(torch.ones(3)), time.time())
    return outcome


@pytest.mark.parametrize("world_size,victim,in_flight", [(2, 1, False), (3, 0, True),
                                                          (3, 1, False), (4, 2, True)])
def test_killed_rank_is_reported_promptly(world_size, victim, in_flight):
    outcomes = spawn(_killed, world_size, victim, in_flight, pg_timeout=60.0, timeout=60)
    assert outcomes[victim].exitcode == -9, describe(outcomes)
    survivors = [o for o in outcomes if o.rank != victim]
    assert all(o.ok for o in survivors), describe(survivors)
    for o in survivors:
        v = o.value
        context = f"rank {o.rank}: {v}"
        assert v["raised"] in ("DistBackendError", "RuntimeError"), context
        assert v["after"] < DEATH_BOUND_S, context
        assert re.search(rf"\brank(?:s|\(s\))? \[?[\d, ]*\b{victim}\b", v["message"]), context
        assert "allreduce" in v["message"], context
        assert v["next"]["raised"] is not None, context


def _abort(rank, world):
    """abort() on one rank: its peers' pending collective fails promptly, naming it."""
    x = torch.ones(7)
    dist.all_reduce(x)
    started = time.time()
    if rank == 0:
        dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).abort()
        return _fail(rank, lambda: dist.all_reduce(x), started)
    return _fail(rank, lambda: dist.all_reduce(torch.ones(1_000_003)), started)


@pytest.mark.parametrize("world_size", (2, 3))
def test_abort_fails_peers_promptly(world_size):
    values = run(_abort, world_size, pg_timeout=60.0, timeout=60)
    for rank, v in enumerate(values):
        assert v["raised"] is not None and v["after"] < DEATH_BOUND_S, f"rank {rank}: {v}"
        if rank != 0:
            assert re.search(r"\brank 0\b", v["message"]), f"rank {rank}: {v}"
