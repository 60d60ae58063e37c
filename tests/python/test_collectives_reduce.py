"""The reducing collectives of backend "xccl" (all_reduce, reduce, reduce_scatter, their
coalesced and functional forms, async work and futures) against exact expected values and
against gloo in the same job, over world sizes 1-4, every dtype and ReduceOp.

One spawn per test and world size (inputs, references: collective_cases.py).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from collective_cases import (
    COUNTS,
    DTYPES,
    Op,
    R,
    check_all_reduce,
    check_reduce_scatter_tensor,
    compare,
    different_from,
    dtype_name,
    expected_reduction,
    gloo_group,
    gloo_supports,
    ops_for,
    rank_input,
)
from dist_harness import checks_test, transport_cases


@checks_test(transport_cases(tcp_worlds=(3,), hierarchical_worlds=(3, 4)), min_checks=200)
def test_all_reduce(chk, rank, world):
    gloo = gloo_group()
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS:
                check_all_reduce(chk, gloo, op, dtype, n, rank, world)
    # A 2-D, non-trivially shaped tensor reduces element-wise like a flat one.
    x = rank_input(torch.int32, 35, rank).reshape(5, 7)
    dist.all_reduce(x)
    chk.equal(
        "all_reduce SUM int32 5x7",
        x,
        expected_reduction(Op("SUM"), torch.int32, 35, world).reshape(5, 7),
    )


@checks_test(transport_cases(tcp_worlds=(2,)), min_checks=60)
def test_reduce_every_root(chk, rank, world):
    gloo = gloo_group()
    for root in range(world):
        for dtype in DTYPES:
            for op in ops_for(dtype):
                for n in (7,) if op.name != "SUM" else COUNTS:
                    what = f"reduce root={root} {op.label} {dtype_name(dtype)} n={n}"
                    x = rank_input(dtype, n, rank, op.pattern)
                    out = x.clone()
                    dist.reduce(out, dst=root, op=op.make(dtype))
                    if rank == root:
                        compare(chk, what, op, out, expected_reduction(op, dtype, n, world))
                    else:
                        chk.equal(what + " (non-root keeps its input)", out, x)
                    if gloo_supports(dtype, op) and n == 7:
                        reference = x.clone()
                        dist.reduce(reference, dst=root, op=op.make(dtype), group=gloo)
                        if rank == root:
                            chk.equal(what + " vs gloo", out, reference)


@checks_test(transport_cases(tcp_worlds=(3,)), min_checks=100)
def test_reduce_scatter(chk, rank, world):
    gloo = gloo_group()
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS if op.name in ("SUM", "MAX") else (7,):
                # reduce_scatter_tensor (flat input), then reduce_scatter (a list per rank)
                x = check_reduce_scatter_tensor(chk, gloo, op, dtype, n, rank, world)
                expected = expected_reduction(op, dtype, n * world, world)[
                    rank * n : (rank + 1) * n
                ]
                what = f"reduce_scatter {op.label} {dtype_name(dtype)} n={n}"
                pieces = [x[b * n : (b + 1) * n].clone() for b in range(world)]
                out = different_from(expected)
                dist.reduce_scatter(out, pieces, op=op.make(dtype))
                compare(chk, what, op, out, expected)
                if gloo_supports(dtype, op):
                    reference = torch.empty_like(out)
                    dist.reduce_scatter(
                        reference, [p.clone() for p in pieces], op=op.make(dtype), group=gloo
                    )
                    chk.equal(what + " vs gloo", out, reference)


@checks_test(transport_cases(tcp_worlds=(2,), hierarchical_worlds=(4,)), min_checks=20)
def test_all_reduce_coalesced(chk, rank, world):
    gloo = gloo_group()
    sizes = (7, 0, 1, 1001, 3)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.complex64):
        for op in [o for o in ops_for(dtype) if o.name in ("SUM", "MAX", "AVG", "PREMUL_SUM")]:
            what = f"all_reduce_coalesced {op.label} {dtype_name(dtype)}"
            inputs = [rank_input(dtype, n, rank + k, op.pattern) for k, n in enumerate(sizes)]
            outs = [t.clone() for t in inputs]
            dist.all_reduce_coalesced(outs, op=op.make(dtype))
            for k, n in enumerate(sizes):
                expected = op.reference(
                    [rank_input(dtype, n, r + k, op.pattern) for r in range(world)], dtype
                )
                compare(chk, f"{what} tensor {k} (n={n})", op, outs[k], expected)
            if gloo_supports(dtype, op):
                reference = [t.clone() for t in inputs]
                dist.all_reduce_coalesced(reference, op=op.make(dtype), group=gloo)
                for k in range(len(sizes)):
                    chk.equal(f"{what} tensor {k} vs gloo", outs[k], reference[k])
    # async form: the future completes with the reduced tensors
    outs = [rank_input(torch.float32, n, rank) for n in (3, 5)]
    future = dist.all_reduce_coalesced(outs, async_op=True)
    future.wait()
    for t, n in zip(outs, (3, 5)):
        chk.equal(
            f"async all_reduce_coalesced n={n}",
            t,
            expected_reduction(Op("SUM"), torch.float32, n, world),
        )


@checks_test(transport_cases(tcp_worlds=(2,), hierarchical_worlds=(3,)), min_checks=12)
def test_async_work_and_futures(chk, rank, world):
    expected = expected_reduction(Op("SUM"), torch.float32, 1001, world)
    # wait(), is_completed(), then the future's value: a list holding the output tensor.
    t = rank_input(torch.float32, 1001, rank)
    work = dist.all_reduce(t, async_op=True)
    chk.true("all_reduce async returns a Work", isinstance(work, dist.Work), repr(work))
    chk.true("Work.wait() returns True", work.wait() is True)
    chk.true("is_completed() after wait()", work.is_completed())
    chk.equal("async all_reduce result", t, expected)
    value = work.get_future().wait()
    chk.true(
        "future value is a list of one tensor",
        isinstance(value, list) and len(value) == 1 and isinstance(value[0], torch.Tensor),
        repr(type(value)),
    )
    if isinstance(value, list) and value:
        chk.true("future value is the output tensor itself", value[0].data_ptr() == t.data_ptr())
        chk.equal("future value", value[0], expected)
    chk.equal("Work.result()", work.result()[0], expected)
    # get_future() before completion, chained with then(): the callback sees the reduced value.
    t = rank_input(torch.int64, 7, rank)
    work = dist.all_reduce(t, op=R.MAX, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2).wait()
    chk.equal(
        "future.then() on MAX", doubled, expected_reduction(Op("MAX"), torch.int64, 7, world) * 2
    )
    # Several outstanding async collectives of different kinds complete in order, correctly.
    a = rank_input(torch.float64, 1001, rank)
    b = rank_input(torch.int32, 7, rank)
    gathered = torch.empty(7 * world, dtype=torch.int32)
    c = rank_input(torch.uint8, 5, rank) if rank == 0 else torch.zeros(5, dtype=torch.uint8)
    works = [
        dist.all_reduce(a, async_op=True),
        dist.all_gather_into_tensor(gathered, b, async_op=True),
        dist.broadcast(c, src=0, async_op=True),
        dist.barrier(async_op=True),
    ]
    for w in reversed(works):
        w.wait()
    chk.true("all outstanding works completed", all(w.is_completed() for w in works))
    chk.equal(
        "outstanding all_reduce", a, expected_reduction(Op("SUM"), torch.float64, 1001, world)
    )
    chk.equal(
        "outstanding all_gather_into_tensor",
        gathered,
        torch.cat([rank_input(torch.int32, 7, r) for r in range(world)]),
    )
    chk.equal("outstanding broadcast", c, rank_input(torch.uint8, 5, 0))


@checks_test(transport_cases(tcp_worlds=(3,), hierarchical_worlds=(4,)), min_checks=20)
def test_coalesced_and_functional_collectives(chk, rank, world):
    """The *_coalesced entry points that functional collectives, DTensor and FSDP use, reached
    through the ProcessGroup bindings, the coalescing manager and functional collectives."""
    import torch.distributed._functional_collectives as funcol

    pg = dist.distributed_c10d._get_default_group()
    sizes = (7, 0, 1001)
    sum_ = Op("SUM")
    # allgather_into_tensor_coalesced
    inputs = [rank_input(torch.float32, n, rank + k) for k, n in enumerate(sizes)]
    outputs = [torch.full((n * world,), -1.0) for n in sizes]
    pg.allgather_into_tensor_coalesced(outputs, inputs).wait()
    for k, n in enumerate(sizes):
        chk.equal(
            f"allgather_into_tensor_coalesced tensor {k}",
            outputs[k],
            torch.cat([rank_input(torch.float32, n, r + k) for r in range(world)]),
        )
    # reduce_scatter_tensor_coalesced
    inputs = [rank_input(torch.int64, n * world, rank + k) for k, n in enumerate(sizes)]
    outputs = [torch.full((n,), -1, dtype=torch.int64) for n in sizes]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = R.SUM
    pg.reduce_scatter_tensor_coalesced(outputs, inputs, opts).wait()
    for k, n in enumerate(sizes):
        full = sum_.reference(
            [rank_input(torch.int64, n * world, r + k) for r in range(world)], torch.int64
        )
        chk.equal(
            f"reduce_scatter_tensor_coalesced tensor {k}",
            outputs[k],
            full[rank * n : (rank + 1) * n],
        )
    # gather_into_tensor (root receives everything in one tensor): newer torch only (the backend
    # implements it where torch's Backend declares it).
    for root in range(world) if hasattr(pg, "gather_into_tensor") else ():
        out = torch.full((5 * world,), -1, dtype=torch.int32)
        opts = dist.GatherOptions()
        opts.rootRank = root
        pg.gather_into_tensor(out, rank_input(torch.int32, 5, rank), opts).wait()
        if rank == root:
            chk.equal(
                f"gather_into_tensor root={root}",
                out,
                torch.cat([rank_input(torch.int32, 5, r) for r in range(world)]),
            )
    # The coalescing manager, fast path (no device) and start/endCoalescing (device given).
    for device in (None, torch.device("cpu")):
        a, b = rank_input(torch.float32, 7, rank), rank_input(torch.float32, 1001, rank + 1)
        with dist._coalescing_manager(device=device, async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        chk.equal(
            f"coalescing manager all_reduce a (device={device})",
            a,
            expected_reduction(sum_, torch.float32, 7, world),
        )
        chk.equal(
            f"coalescing manager all_reduce b (device={device})",
            b,
            sum_.reference(
                [rank_input(torch.float32, 1001, r + 1) for r in range(world)], torch.float32
            ),
        )
        outs = [torch.empty(3 * world), torch.empty(4 * world)]
        with dist._coalescing_manager(device=device):
            dist.all_gather_into_tensor(outs[0], rank_input(torch.float32, 3, rank))
            dist.all_gather_into_tensor(outs[1], rank_input(torch.float32, 4, rank + 9))
        chk.equal(
            f"coalescing manager all_gather_into_tensor (device={device})",
            torch.cat(outs),
            torch.cat(
                [rank_input(torch.float32, 3, r) for r in range(world)]
                + [rank_input(torch.float32, 4, r + 9) for r in range(world)]
            ),
        )
        outs = [torch.empty(2), torch.empty(6)]
        with dist._coalescing_manager(device=device):
            dist.reduce_scatter_tensor(outs[0], rank_input(torch.float32, 2 * world, rank))
            dist.reduce_scatter_tensor(outs[1], rank_input(torch.float32, 6 * world, rank + 3))
        chk.equal(
            f"coalescing manager reduce_scatter_tensor (device={device})",
            outs[1],
            sum_.reference(
                [rank_input(torch.float32, 6 * world, r + 3) for r in range(world)], torch.float32
            )[rank * 6 : rank * 6 + 6],
        )
    # Functional collectives (the traceable API DTensor is built on).
    group = dist.group.WORLD
    x = rank_input(torch.float32, 1001, rank)
    chk.equal(
        "funcol.all_reduce",
        funcol.all_reduce(x, "sum", group).wait(),
        expected_reduction(sum_, torch.float32, 1001, world),
    )
    chk.equal(
        "funcol.all_reduce max",
        funcol.all_reduce(x, "max", group).wait(),
        expected_reduction(Op("MAX"), torch.float32, 1001, world),
    )
    chk.equal(
        "funcol.all_reduce avg",
        funcol.all_reduce(x, "avg", group).wait(),
        expected_reduction(Op("AVG"), torch.float32, 1001, world),
    )
    chk.equal(
        "funcol.all_gather_tensor",
        funcol.all_gather_tensor(x, 0, group).wait(),
        torch.cat([rank_input(torch.float32, 1001, r) for r in range(world)]),
    )
    y = rank_input(torch.float32, 6 * world, rank).reshape(2 * world, 3)
    chk.equal(
        "funcol.reduce_scatter_tensor",
        funcol.reduce_scatter_tensor(y, "sum", 0, group).wait(),
        expected_reduction(sum_, torch.float32, 6 * world, world).reshape(2 * world, 3)[
            2 * rank : 2 * rank + 2
        ],
    )
    many = funcol.all_reduce_coalesced([x, rank_input(torch.float32, 3, rank)], "sum", group)
    chk.equal(
        "funcol.all_reduce_coalesced",
        torch.cat([t.wait() for t in many]),
        torch.cat(
            [
                expected_reduction(sum_, torch.float32, 1001, world),
                expected_reduction(sum_, torch.float32, 3, world),
            ]
        ),
    )
    splits = [(rank + p) % 3 for p in range(world)]
    received = [(p + rank) % 3 for p in range(world)]
    z = torch.cat([torch.full(((rank + p) % 3,), float(100 * rank + p)) for p in range(world)])
    chk.equal(
        "funcol.all_to_all_single",
        funcol.all_to_all_single(z, received, splits, group).wait(),
        torch.cat([torch.full((received[p],), float(100 * p + rank)) for p in range(world)]),
    )
    b = x if rank == world - 1 else torch.zeros(1001)
    chk.equal(
        "funcol.broadcast",
        funcol.broadcast(b, world - 1, group).wait(),
        rank_input(torch.float32, 1001, world - 1),
    )
