"""Object collectives, barrier, and subgroups (new_group, split_group) of backend "xccl",
over world sizes 1-4.

One spawn per test and world size (inputs, references: collective_cases.py).
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch
import torch.distributed as dist
from collective_cases import Op, expected_reduction, rank_input
from dist_harness import WORLD_SIZES, checks_test, group_transport, transport_cases


def _object(rank):
    return {"rank": rank, "payload": "x" * (rank * 1000 + 1), "list": list(range(rank))}


@checks_test(WORLD_SIZES, min_checks=4)
def test_object_collectives(chk, rank, world):
    gathered = [None] * world
    dist.all_gather_object(gathered, _object(rank))
    chk.equal("all_gather_object", gathered, [_object(r) for r in range(world)])
    for root in range(world):
        objects = [_object(root), ("root", root)] if rank == root else [None, None]
        dist.broadcast_object_list(objects, src=root)
        chk.equal(f"broadcast_object_list root={root}", objects, [_object(root), ("root", root)])
        out = [None] * world if rank == root else None
        dist.gather_object(_object(rank), out, dst=root)
        if rank == root:
            chk.equal(f"gather_object root={root}", out, [_object(r) for r in range(world)])
        received = [None]
        dist.scatter_object_list(
            received,
            [_object(10 * root + r) for r in range(world)] if rank == root else None,
            src=root,
        )
        chk.equal(f"scatter_object_list root={root}", received[0], _object(10 * root + rank))


@checks_test(transport_cases(tcp_worlds=(3,)), min_checks=6)
def test_barrier(chk, rank, world):
    store = dist.distributed_c10d._get_default_store()
    for round_ in range(5):
        # One rank arrives late each round (kept away on purpose); after the barrier every rank
        # must see every other rank's pre-barrier store write.
        if rank == round_ % world:
            time.sleep(0.3)
        store.set(f"barrier/{round_}/{rank}", "1")
        store.get(f"barrier/{round_}/{rank}")  # a round trip: the store has applied the set
        dist.barrier()
        keys = [f"barrier/{round_}/{r}" for r in range(world)]
        chk.true(f"barrier round {round_}", store.check(keys), "a rank passed the barrier early")
    work = dist.barrier(async_op=True)
    chk.true("async barrier completes", work.wait() and work.is_completed())


@checks_test(WORLD_SIZES, min_checks=8)
def test_new_group(chk, rank, world):
    groups = {
        "all": list(range(world)),
        "without rank 0": list(range(1, world)),
        "odd ranks": list(range(1, world, 2)),
        "first and last": sorted({0, world - 1}),
        "self": [rank],
    }
    made = {}
    for label, ranks in groups.items():
        if label == "self":  # every rank creates every singleton group, in the same order
            for r in range(world):
                g = dist.new_group([r], backend="xccl")
                if r == rank:
                    made[label] = (g, [r])
            continue
        if not ranks:
            continue
        made[label] = (dist.new_group(ranks, backend="xccl"), ranks)
    for label, (g, ranks) in made.items():
        what = f"new_group {label} {ranks}"
        if rank not in ranks:
            chk.true(
                what + ": non-member gets NON_GROUP_MEMBER",
                g is dist.GroupMember.NON_GROUP_MEMBER,
                repr(g),
            )
            t = torch.full((3,), 5.0)
            chk.true(
                what + ": collective on a non-member is a no-op",
                dist.all_reduce(t, group=g) is None and torch.equal(t, torch.full((3,), 5.0)),
            )
            continue
        chk.equal(what + " backend", dist.get_backend(g), "xccl")
        # Subgroups get their own segment wherever the default group has one.
        chk.equal(
            what + " transport", group_transport(g), group_transport() if len(ranks) > 1 else "tcp"
        )
        chk.equal(what + " size", dist.get_world_size(g), len(ranks))
        chk.equal(what + " group rank", dist.get_rank(g), ranks.index(rank))
        x = rank_input(torch.int64, 1001, rank)
        dist.all_reduce(x, group=g)
        chk.equal(
            what + " all_reduce",
            x,
            Op("SUM").reference([rank_input(torch.int64, 1001, r) for r in ranks], torch.int64),
        )
        src = ranks[-1]
        b = rank_input(torch.float32, 7, src) if rank == src else torch.zeros(7)
        dist.broadcast(b, src=src, group=g)
        chk.equal(what + f" broadcast from global rank {src}", b, rank_input(torch.float32, 7, src))
        out = torch.empty(5 * len(ranks), dtype=torch.int32)
        dist.all_gather_into_tensor(out, rank_input(torch.int32, 5, rank), group=g)
        chk.equal(
            what + " all_gather_into_tensor",
            out,
            torch.cat([rank_input(torch.int32, 5, r) for r in ranks]),
        )
    # The default group still works after (and between) subgroup traffic.
    x = rank_input(torch.float32, 7, rank)
    dist.all_reduce(x)
    chk.equal(
        "default group after subgroups", x, expected_reduction(Op("SUM"), torch.float32, 7, world)
    )
    # new_subgroups: contiguous groups of 2 (or 1), each reducing independently.
    size = 2 if world % 2 == 0 else 1
    mine, _ = dist.new_subgroups(group_size=size, backend="xccl")
    members = list(range(rank - rank % size, rank - rank % size + size))
    x = rank_input(torch.int64, 7, rank)
    dist.all_reduce(x, group=mine)
    chk.equal(
        f"new_subgroups size {size}",
        x,
        Op("SUM").reference([rank_input(torch.int64, 7, r) for r in members], torch.int64),
    )


@checks_test(WORLD_SIZES, min_checks=6)
def test_split_group_via_cpp_binding(chk, rank, world):
    """ProcessGroup.split_group (C++ binding) -> ProcessGroupXccl::split.

    torch.distributed.split_group itself refuses on CPU in torch 2.14 (it requires an
    accelerator or torchcomms), so the split is driven through the bound C++ ProcessGroup.
    """
    import xccl

    cpu = torch.device("cpu")
    parent = dist.distributed_c10d._get_default_group()
    parent_backend = parent._get_backend(cpu)
    chk.true(
        "default backend is ProcessGroupXccl",
        isinstance(parent_backend, xccl.ProcessGroupXccl),
        repr(parent_backend),
    )
    chk.true("supports_splitting", parent_backend.supports_splitting)
    # Two splits: the upper half (excludes rank 0 when world > 1), then everyone reversed.
    upper = list(range(world // 2, world))
    child = parent.split_group(upper, timeout=timedelta(seconds=60))
    if rank not in upper:
        chk.true("split: a non-member gets None", child is None, repr(child))
    else:
        chk.equal("split size", child.size(), len(upper))
        chk.equal("split rank", child.rank(), upper.index(rank))
        backend = child._get_backend(cpu)
        chk.true(
            "split backend is ProcessGroupXccl",
            isinstance(backend, xccl.ProcessGroupXccl),
            repr(backend),
        )
        chk.equal(
            "split transport",
            group_transport(child),
            group_transport() if len(upper) > 1 else "tcp",
        )
        x = rank_input(torch.float32, 1001, rank)
        child.allreduce([x]).wait()
        chk.equal(
            "split allreduce",
            x,
            Op("SUM").reference([rank_input(torch.float32, 1001, r) for r in upper], torch.float32),
        )
    reversed_ranks = list(reversed(range(world)))
    options = xccl.Options()
    options.algorithm = "ring"
    child = parent.split_group(reversed_ranks, timeout=timedelta(seconds=45), opts=options)
    # torch 2.14 keeps the order given; earlier versions sort the ranks before the backend's
    # split sees them. Either way the child's ranks follow the list the backend was given.
    torch_version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    order = reversed_ranks if torch_version >= (2, 14) else sorted(reversed_ranks)
    chk.equal("reversed split rank", child.rank(), order.index(rank))
    backend = child._get_backend(cpu)
    chk.equal("split carries the given options (algorithm)", backend.options.algorithm, "ring")
    # The given options carry no policy: the child calls back what its parent does.
    chk.true(
        "split inherits the parent's policy (the package's)",
        backend.options.policy is xccl._registration.group_policy()
        and parent_backend.options.policy is xccl._registration.group_policy(),
        repr(backend.options.policy),
    )
    chk.equal("split carries the timeout", backend.options.timeout, timedelta(seconds=45))
    out = torch.empty(3 * world, dtype=torch.int64)
    child._allgather_base(out, rank_input(torch.int64, 3, rank)).wait()
    chk.equal(
        "reversed split all_gather (child rank order)",
        out,
        torch.cat([rank_input(torch.int64, 3, r) for r in order]),
    )
    x = rank_input(torch.int32, 7, rank)
    dist.all_reduce(x)
    chk.equal("parent group after split", x, expected_reduction(Op("SUM"), torch.int32, 7, world))
