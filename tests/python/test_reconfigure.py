"""Dynamic membership (docs/p2p.md, "Dynamic membership"): torch's reconfigure API on a group
created with enable_reconfigure=True (form, shrink and grow in place, a newcomer process joining
by reconfigure, bad input refused with ValueError and the group still usable, old work failing
clearly, a member that never arrives named) and shrink_group() excluding a killed rank.

Ranks exchange handles through the job's TCPStore, which the test serves (the rendezvous that
torch leaves to the user); every step checks all_reduce, broadcast, get_rank and get_world_size.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import HOST, describe, kill_self, run, spawn

HAS_RECONFIGURE = hasattr(dist, "_reconfigure")
HAS_SHRINK = hasattr(dist, "shrink_group")
needs_reconfigure = pytest.mark.skipif(
    not HAS_RECONFIGURE, reason="this torch has no torch.distributed._reconfigure"
)
PG_TIMEOUT = timedelta(seconds=30)


def _store(port: int):
    return dist.TCPStore(HOST, port, is_master=False, timeout=timedelta(seconds=60))


def _init(store, rank: int, size: int) -> None:
    dist.init_process_group(
        "xccl",
        store=store,
        rank=rank,
        world_size=size,
        timeout=PG_TIMEOUT,
        enable_reconfigure=True,
    )


def _exchange(store, tag: str, members: list, me) -> list:
    """Every member's handle, in the order of `members` (each publishes its own)."""
    store.set(f"{tag}/{me}", dist._get_reconfigure_handle())
    return [store.get(f"{tag}/{m}").decode() for m in members]


def _step(members: list, me) -> dict:
    """One membership's checks: all_reduce of (rank + 1), a broadcast from the last rank."""
    rank, size = dist.get_rank(), dist.get_world_size()
    total = torch.full((5,), float(rank + 1))
    dist.all_reduce(total)
    value = torch.full((3,), float(rank * 10))
    dist.broadcast(value, src=size - 1)
    return {
        "rank": rank,
        "size": size,
        "expected_rank": members.index(me),
        "sum": total.tolist(),
        "expected_sum": [size * (size + 1) / 2] * 5,
        "broadcast": value.tolist(),
        "expected_broadcast": [float((size - 1) * 10)] * 3,
    }


def _reconfigure(store, tag: str, uuid: int, members: list, me, timeout=None) -> float:
    handles = _exchange(store, tag, members, me)
    began = time.perf_counter()
    dist._reconfigure(uuid=uuid, handles=handles, timeout=timeout).wait()
    return time.perf_counter() - began


def _form_shrink_grow(rank, world, port):
    """Processes 0-2 form a group of 3, process 2 leaves, 0-1 go on as 2, then process 3 (a
    newcomer that joins the job's store as a world of one) grows it back to 3."""
    store = _store(port)
    newcomer = rank == 3
    steps = {}
    if newcomer:
        store.wait(["left"])
        _init(store, 0, 1)
    else:
        _init(store, rank, 3)
        try:
            dist.all_reduce(torch.ones(1))
        except Exception as e:  # noqa: BLE001 - the point
            steps["before"] = f"{type(e).__name__}: {e}"
        _reconfigure(store, "a", 1, [0, 1, 2], rank)
        steps["3"] = _step([0, 1, 2], rank)
        if rank == 2:
            dist.destroy_process_group()
            store.set("left", "1")
            return steps
        _reconfigure(store, "b", 2, [0, 1], rank)
        steps["2"] = _step([0, 1], rank)
    _reconfigure(store, "c", 3, [0, 1, 3], rank)
    steps["3b"] = _step([0, 1, 3], rank)
    dist.destroy_process_group()
    return steps


def _served_store():
    return dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False)


@needs_reconfigure
def test_form_shrink_and_grow_with_a_newcomer():
    server = _served_store()
    results = run(_form_shrink_grow, 4, server.port, init=False, timeout=120)
    for process, steps in enumerate(results):
        if process < 3:
            assert "torch.distributed._reconfigure first" in steps["before"], steps["before"]
        for name, step in steps.items():
            if name == "before":
                continue
            assert step["rank"] == step["expected_rank"], (process, name, step)
            assert step["size"] == int(name[0]), (process, name, step)
            assert step["sum"] == step["expected_sum"], (process, name, step)
            assert step["broadcast"] == step["expected_broadcast"], (process, name, step)
    assert set(results[2]) == {"before", "3"}
    assert set(results[3]) == {"3b"}


def _refusals(rank, world, port):
    """Each bad reconfigure raises ValueError and leaves the membership usable."""
    store = _store(port)
    _init(store, rank, world)
    members = list(range(world))
    _reconfigure(store, "a", 1, members, rank)
    handles = _exchange(store, "a", members, rank)
    mine = handles[rank]
    job = mine.split(":")[2]
    bad = {
        "not mine": [h for h in handles if h != mine],
        "duplicate": handles + [handles[0]],
        "malformed": handles + ["gloo:1:2:1:127.0.0.1:29556"],
        "other job": handles + [f"xccl:1:{'0' * 16 if job != '0' * 16 else '1' * 16}:1-ff:h"],
        "reused uuid": handles,
    }
    refused = {}
    for name, bad_handles in bad.items():
        try:
            dist._reconfigure(uuid=1 if name == "reused uuid" else 7, handles=bad_handles)
            refused[name] = "accepted"
        except ValueError as e:
            refused[name] = str(e)
        # Still the same membership: every rank takes part in the same collectives.
        refused[name + " then"] = _step(members, rank)
    return refused


@needs_reconfigure
def test_bad_reconfigure_input_is_refused_and_the_group_stays_usable():
    server = _served_store()
    results = run(_refusals, 2, server.port, init=False, timeout=120)
    expected = {
        "not mine": "is not among",
        "duplicate": "appears twice",
        "malformed": "is not an xccl handle",
        "other job": "comes from another job",
        "reused uuid": "uuid 1 was already used by this group",
    }
    for refused in results:
        for name, words in expected.items():
            assert words in refused[name], (name, refused[name])
            step = refused[name + " then"]
            assert step["sum"] == step["expected_sum"] and step["size"] == 2, (name, step)


def _old_work_fails(rank, world, port):
    """A receive posted on the old membership fails naming the reconfigure; the new one works."""
    store = _store(port)
    _init(store, rank, world)
    _reconfigure(store, "a", 1, [0, 1], rank)
    pending = dist.irecv(torch.zeros(4), src=1 - rank)  # nobody sends: it is in flight
    _reconfigure(store, "b", 2, [1, 0], rank)  # the same members, ranks swapped
    try:
        pending.wait()
        error = "completed"
    except Exception as e:  # noqa: BLE001 - the point
        error = f"{type(e).__name__}: {e}"
    return {"error": error, "step": _step([1, 0], rank)}


@needs_reconfigure
def test_work_of_the_old_membership_fails_clearly():
    server = _served_store()
    results = run(_old_work_fails, 2, server.port, init=False, timeout=120)
    for process, result in enumerate(results):
        assert "superseded by reconfigure uuid 2" in result["error"], result["error"]
        step = result["step"]
        assert step["rank"] == 1 - process and step["sum"] == step["expected_sum"], step
        assert step["broadcast"] == step["expected_broadcast"], step


def _member_dies(rank, world, port):
    """Rank 2 dies before reconfigure uuid 2: the others fail within its timeout naming it, stay
    failed, then succeed with a fresh uuid without it."""
    store = _store(port)
    _init(store, rank, world)
    _reconfigure(store, "a", 1, [0, 1, 2], rank)
    handles = _exchange(store, "a", [0, 1, 2], rank)
    if rank == 2:
        kill_self()
    began = time.perf_counter()
    try:
        dist._reconfigure(uuid=2, handles=handles, timeout=timedelta(seconds=3)).wait()
        error = "completed"
    except Exception as e:  # noqa: BLE001 - the point
        error = f"{type(e).__name__}: {e}"
    took = time.perf_counter() - began
    try:
        dist.all_reduce(torch.ones(1))
        after = "completed"
    except Exception as e:  # noqa: BLE001 - the point
        after = str(e)
    _reconfigure(store, "c", 3, [0, 1], rank)
    return {
        "error": error,
        "took": took,
        "after": after,
        "dead": handles[2],
        "step": _step([0, 1], rank),
    }


@needs_reconfigure
def test_a_member_that_dies_is_named_and_a_fresh_uuid_recovers():
    server = _served_store()
    outcomes = spawn(_member_dies, 3, server.port, init=False, timeout=120)
    assert outcomes[2].exitcode == -9, describe(outcomes)
    for outcome in outcomes[:2]:
        assert outcome.ok, describe(outcomes)
        result = outcome.value
        assert f"rank 2 (handle {result['dead']}) never arrived" in result["error"], result
        assert result["took"] < 3 + 7, result["took"]  # the timeout, plus a loaded machine
        assert "reconfigure uuid 2 failed" in result["after"], result["after"]
        step = result["step"]
        assert step["size"] == 2 and step["sum"] == step["expected_sum"], step


def _shrink_after_death(rank, world):
    dist.barrier()
    if rank == world - 1:
        kill_self()
    group = dist.shrink_group([world - 1])
    total = torch.full((4,), float(rank + 1))
    dist.all_reduce(total, group=group)
    return {"size": group.size(), "rank": group.rank(), "sum": total.tolist()}


@pytest.mark.skipif(not HAS_SHRINK, reason="this torch has no torch.distributed.shrink_group")
def test_shrink_group_excludes_a_killed_rank():
    outcomes = spawn(_shrink_after_death, 3, timeout=120)
    assert outcomes[2].exitcode == -9, describe(outcomes)
    for rank, outcome in enumerate(outcomes[:2]):
        assert outcome.ok, describe(outcomes)
        assert outcome.value == {"size": 2, "rank": rank, "sum": [3.0] * 4}, outcome.value


def _timed(rank, world, port):
    """4 processes: form 4, shrink to 3 (the last one sits out), grow back to 4; returns each
    reconfigure's seconds on this process."""
    store = _store(port)
    _init(store, rank, world)
    times = {"form": _reconfigure(store, "a", 1, list(range(4)), rank)}
    steps = [_step(list(range(4)), rank)]
    if rank < 3:
        times["shrink"] = _reconfigure(store, "b", 2, [0, 1, 2], rank)
        steps.append(_step([0, 1, 2], rank))
    times["grow"] = _reconfigure(store, "c", 3, [3, 0, 1, 2], rank)
    steps.append(_step([3, 0, 1, 2], rank))
    return {"times": times, "steps": steps}


@needs_reconfigure
def test_four_rank_reconfigure_time():
    server = _served_store()
    results = run(_timed, 4, server.port, init=False, timeout=120)
    for result in results:
        for step in result["steps"]:
            assert step["rank"] == step["expected_rank"], step
            assert step["sum"] == step["expected_sum"], step
    slowest = {
        name: max(r["times"][name] for r in results if name in r["times"])
        for name in ("form", "shrink", "grow")
    }
    print("4-rank reconfigure seconds (slowest member):", slowest)
    # The < 1 s target is a benchmark (docs/p2p.md); here only a loose bound on 2 shared cores.
    assert all(seconds < 20 for seconds in slowest.values()), slowest
