"""Dynamic membership (docs/p2p.md, "Dynamic membership"): torch's reconfigure API on a group
created with enable_reconfigure=True (form, shrink and grow in place, a newcomer process joining
by reconfigure, bad input refused with ValueError and the group still usable, old work failing
clearly, a member that never arrives named) and shrink_group() excluding a killed rank.

Ranks exchange handles through the job's TCPStore, which the test serves (the rendezvous that
torch leaves to the user); every step checks all_reduce, broadcast, get_rank and get_world_size.
"""

from __future__ import annotations

import os
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
CPU = torch.device("cpu")


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


def _tuning_asked(group=None) -> bool:
    """Whether the group's membership asked the package's tuning source (its GroupPolicy's)."""
    from xccl import _C

    backend = (group or dist.distributed_c10d._get_default_group())._get_backend(CPU)
    return not _C._tuning_in_force(backend)[1].startswith("no tuning source registered")


def _step(members: list, me) -> dict:
    """One membership's checks: all_reduce of (rank + 1), a broadcast from the last rank, and
    that the membership asked the group's policy for its tuning table."""
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
        "tuning_asked": _tuning_asked(),
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
        store.wait(["left", "formed 2"])
        _init(store, 0, 1)
        # uuid 2 is the job's already (the two-member membership): refused, nothing changed.
        try:
            dist._reconfigure(uuid=2, handles=[dist._get_reconfigure_handle()])
            steps["reused"] = "accepted"
        except ValueError as e:
            steps["reused"] = str(e)
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
        store.set("formed 2", "1")
    _reconfigure(store, "c", 3, [0, 1, 3], rank)
    steps["3b"] = _step([0, 1, 3], rank)
    # Handles are stable: what each member published for every reconfigure is the same.
    steps["handles"] = sorted(
        {store.get(f"{t}/{rank}").decode() for t in "abc" if store.check([f"{t}/{rank}"])}
    )
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
        if process < 2 or process == 3:
            assert len(steps.pop("handles")) == 1, steps  # one handle for every reconfigure
        for name, step in steps.items():
            if name in ("before", "reused"):
                continue
            assert step["rank"] == step["expected_rank"], (process, name, step)
            assert step["size"] == int(name[0]), (process, name, step)
            assert step["sum"] == step["expected_sum"], (process, name, step)
            assert step["broadcast"] == step["expected_broadcast"], (process, name, step)
            assert step["tuning_asked"], (process, name, step)
    assert set(results[2]) == {"before", "3"}
    assert set(results[3]) == {"reused", "3b"}
    assert "uuid 2 was already used in this job for another membership" in results[3]["reused"]


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


def _window_across_reconfigure(rank, world, port):
    """A window belongs to its membership: after a reconfigure the old one refuses every call
    (ValueError), deregisters locally, and a new window on the new membership works."""
    store = _store(port)
    _init(store, rank, world)
    _reconfigure(store, "a", 1, [0, 1], rank)
    cache = torch.zeros(8)
    old = dist._new_window(cache)
    if rank == 0:
        old.put(torch.full((8,), 3.0), 1, 0, False)
        old.signal(1, False)
    else:
        old.wait_signal(0, False)
    before = cache.tolist()
    _reconfigure(store, "b", 2, [1, 0], rank)  # the same members, ranks swapped
    refused = {}
    for name, call in {
        "put": lambda: old.put(torch.ones(8), 1 - dist.get_rank(), 0, False),
        "signal": lambda: old.signal(1 - dist.get_rank(), False),
        "map_remote_tensor": lambda: old.map_remote_tensor(1 - dist.get_rank()),
    }.items():
        try:
            call()
            refused[name] = "accepted"
        except ValueError as e:
            refused[name] = str(e)
    old.tensor_deregister()  # local: its membership is gone
    new = dist._new_window(cache)
    if dist.get_rank() == 0:
        new.put(torch.full((8,), 5.0), 1, 0, False)
        new.signal(1, False)
    else:
        new.wait_signal(0, False)
    after = cache.tolist()
    new.tensor_deregister()
    dist.destroy_process_group()
    return {"before": before, "refused": refused, "after": after, "new_rank": 1 - rank}


@pytest.mark.skipif(not hasattr(dist, "_new_window"), reason="this torch has no windows")
@needs_reconfigure
def test_a_window_ends_with_its_membership():
    server = _served_store()
    results = run(_window_across_reconfigure, 2, server.port, init=False, timeout=120)
    for process, result in enumerate(results):
        assert result["before"] == ([0.0] * 8 if process == 0 else [3.0] * 8), result
        for name, text in result["refused"].items():
            assert "reconfigured after this window was created" in text, (name, text)
        # After the swap process 0 is rank 1: it received the new window's put.
        assert result["after"] == ([5.0] * 8 if result["new_rank"] == 1 else [3.0] * 8), result


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
    # The survivors' group (ProcessGroupXccl::shrink) inherited the policy.
    asked = _tuning_asked(group)
    return {"size": group.size(), "rank": group.rank(), "sum": total.tolist(), "asked": asked}


@pytest.mark.skipif(not HAS_SHRINK, reason="this torch has no torch.distributed.shrink_group")
def test_shrink_group_excludes_a_killed_rank():
    outcomes = spawn(_shrink_after_death, 3, timeout=120)
    assert outcomes[2].exitcode == -9, describe(outcomes)
    for rank, outcome in enumerate(outcomes[:2]):
        assert outcome.ok, describe(outcomes)
        expected = {"size": 2, "rank": rank, "sum": [3.0] * 4, "asked": True}
        assert outcome.value == expected, outcome.value


def _shrink_abort(rank, world):
    """Rank 2 stays alive but never joins an all_reduce; SHRINK_ABORT ends that work at once."""
    from torch.distributed.distributed_c10d import SHRINK_ABORT, _get_default_store

    store = _get_default_store()
    if rank == world - 1:
        store.wait(["done"])
        return {}
    pending = dist.all_reduce(torch.ones(2), async_op=True)
    began = time.perf_counter()
    group = dist.shrink_group([world - 1], shrink_flags=SHRINK_ABORT)
    try:
        pending.wait()
        error = "completed"
    except Exception as e:  # noqa: BLE001 - the point
        error = str(e)
    total = torch.full((4,), float(rank + 1))
    dist.all_reduce(total, group=group)
    store.set("done", "1")
    return {"error": error, "took": time.perf_counter() - began, "sum": total.tolist()}


@pytest.mark.skipif(not HAS_SHRINK, reason="this torch has no torch.distributed.shrink_group")
def test_shrink_abort_ends_work_that_waits_for_an_excluded_rank():
    results = run(_shrink_abort, 3, timeout=120)
    for result in results[:2]:
        assert "abort() was called" in result["error"], result["error"]
        assert result["took"] < 20, result["took"]  # well before the 30 s group timeout
        assert result["sum"] == [3.0] * 4, result


def _timed(rank, world, port):
    """4 processes: form 4, shrink to 3 (the last one sits out), grow back to 4 (handles given
    as a set); returns each reconfigure's seconds on this process."""
    store = _store(port)
    _init(store, rank, world)
    times = {"form": _reconfigure(store, "a", 1, list(range(4)), rank)}
    steps = [_step(list(range(4)), rank)]
    if rank < 3:
        times["shrink"] = _reconfigure(store, "b", 2, [0, 1, 2], rank)
        steps.append(_step([0, 1, 2], rank))
    # Grown back with a set of handles: xccl assigns ranks in the handles' sorted order.
    handles = _exchange(store, "c", list(range(4)), rank)
    began = time.perf_counter()
    dist._reconfigure(uuid=3, handles=set(handles)).wait()
    times["grow"] = time.perf_counter() - began
    steps.append(_step(sorted(range(4), key=lambda m: handles[m]), rank))
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


@needs_reconfigure
@pytest.mark.parametrize("net", ["tcp", "ofi"])
def test_reconfigure_across_namespace_hosts(tmp_path, net):
    """Two ranks on one namespace host and one on another: the membership of three is hierarchical
    (shared memory per host, TCP between), the two on one host alone use one shared-memory
    segment, and growing back rebuilds the hierarchy."""
    cross_host = pytest.importorskip("test_cross_host")
    if cross_host._unavailable is not None:
        pytest.skip(str(cross_host._unavailable))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reconfigure_rank.py")
    with cross_host.hosts_module.Hosts(2) as hosts:
        procs = cross_host.start_ranks(hosts, [2, 1], {"XCCL_NET": net}, [], tmp_path, script)
        results = cross_host.finish_ranks(procs, tmp_path, time.monotonic() + 120)
    assert [r["host"] for r in results] == ["nshost0", "nshost0", "nshost1"]
    expected = {1: ("hierarchical", 3), 2: ("shm", 2), 3: ("hierarchical", 3)}
    for result in results:
        for step in result["steps"]:
            transport, size = expected[step["uuid"]]
            assert (step["transport"], step["size"]) == (transport, size), (result["rank"], step)
            assert step["rank"] == result["rank"], step
            # The lone rank on host 1 reaches its peers over XCCL_NET's engine alone.
            peers = "shm" if size == 2 else net if result["rank"] == 2 else f"shm+{net}"
            assert step["peer_transport"] == peers, (result["rank"], step)
            assert step["sum"] == [size * (size + 1) / 2] * 4, step
    assert [len(r["steps"]) for r in results] == [3, 3, 2]
