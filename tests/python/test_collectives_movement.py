"""The data-movement collectives of backend "xccl" (broadcast, all_gather, gather, scatter,
all_to_all) against exact expected values and against gloo in the same job, over world sizes
1-4, element counts 0, 1, odd and > 1M and every dtype; large messages for every collective.

One spawn per test and world size (inputs, references: collective_cases.py).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from collective_cases import (
    COUNTS,
    DTYPES,
    LARGE,
    Op,
    check_all_reduce,
    different_from,
    dtype_name,
    expected_reduction,
    gloo_group,
    gloo_supports,
    rank_input,
    real,
)
from dist_harness import checks_test, transport_cases


@checks_test(transport_cases(tcp_worlds=(3,)), min_checks=40)
def test_broadcast_every_root(chk, rank, world):
    gloo = gloo_group()
    for root in range(world):
        for dtype in DTYPES:
            for n in COUNTS:
                what = f"broadcast root={root} {dtype_name(dtype)} n={n}"
                expected = rank_input(dtype, n, root)
                x = expected.clone() if rank == root else different_from(expected)
                dist.broadcast(x, src=root)
                chk.equal(what, x, expected)
                if gloo_supports(dtype) and n == 7:
                    reference = expected.clone() if rank == root else different_from(expected)
                    dist.broadcast(reference, src=root, group=gloo)
                    chk.equal(what + " vs gloo", x, reference)


@checks_test(transport_cases(tcp_worlds=(3,)), min_checks=40)
def test_all_gather(chk, rank, world):
    gloo = gloo_group()
    for dtype in DTYPES:
        for n in COUNTS:
            x = rank_input(dtype, n, rank)
            parts = [rank_input(dtype, n, r) for r in range(world)]
            # list form
            what = f"all_gather {dtype_name(dtype)} n={n}"
            outs = [different_from(p) for p in parts]
            dist.all_gather(outs, x)
            for r in range(world):
                chk.equal(f"{what} part {r}", outs[r], parts[r])
            if gloo_supports(dtype):
                reference = [torch.empty_like(p) for p in parts]
                dist.all_gather(reference, x, group=gloo)
                for r in range(world):
                    chk.equal(f"{what} part {r} vs gloo", outs[r], reference[r])
            # flat form
            what = f"all_gather_into_tensor {dtype_name(dtype)} n={n}"
            expected = torch.cat(parts)
            out = different_from(expected)
            dist.all_gather_into_tensor(out, x)
            chk.equal(what, out, expected)
            if gloo_supports(dtype):
                reference = torch.empty_like(out)
                dist.all_gather_into_tensor(reference, x, group=gloo)
                chk.equal(what + " vs gloo", out, reference)
    # 2-D input into a stacked output (the DTensor/FSDP shape)
    x = rank_input(torch.float32, 12, rank).reshape(3, 4)
    out = torch.empty(world, 3, 4)
    dist.all_gather_into_tensor(out, x)
    chk.equal(
        "all_gather_into_tensor 3x4 -> stacked",
        out,
        torch.stack([rank_input(torch.float32, 12, r).reshape(3, 4) for r in range(world)]),
    )
    # Uneven list form: rank r contributes (r % 3) * 2 elements (zero for some ranks).
    x = rank_input(torch.int64, (rank % 3) * 2, rank)
    outs = [torch.full(((r % 3) * 2,), -99, dtype=torch.int64) for r in range(world)]
    dist.all_gather(outs, x)
    for r in range(world):
        chk.equal(f"uneven all_gather part {r}", outs[r], rank_input(torch.int64, (r % 3) * 2, r))


@checks_test(transport_cases(tcp_worlds=(2,)), min_checks=40)
def test_gather_scatter_every_root(chk, rank, world):
    gloo = gloo_group()
    for root in range(world):
        for dtype in (
            torch.float32,
            torch.bfloat16,
            torch.int8,
            torch.int64,
            torch.bool,
            torch.complex64,
        ):
            for n in COUNTS:
                parts = [rank_input(dtype, n, r) for r in range(world)]
                # gather: root receives every rank's input in rank order
                what = f"gather root={root} {dtype_name(dtype)} n={n}"
                outs = [different_from(p) for p in parts] if rank == root else None
                dist.gather(parts[rank].clone(), outs, dst=root)
                if rank == root:
                    for r in range(world):
                        chk.equal(f"{what} part {r}", outs[r], parts[r])
                if gloo_supports(dtype) and n == 7:
                    reference = [torch.empty_like(p) for p in parts] if rank == root else None
                    dist.gather(
                        real(parts[rank].clone()),
                        [real(t) for t in reference] if rank == root else None,
                        dst=root,
                        group=gloo,
                    )
                    if rank == root:
                        for r in range(world):
                            chk.equal(f"{what} part {r} vs gloo", outs[r], reference[r])
                # scatter: rank r receives the root's piece r
                what = f"scatter root={root} {dtype_name(dtype)} n={n}"
                pieces = [rank_input(dtype, n, 10 * root + r) for r in range(world)]
                out = different_from(pieces[rank])
                dist.scatter(out, [p.clone() for p in pieces] if rank == root else None, src=root)
                chk.equal(what, out, pieces[rank])
                if gloo_supports(dtype) and n == 7:
                    reference = torch.empty_like(out)
                    dist.scatter(
                        real(reference),
                        [real(p.clone()) for p in pieces] if rank == root else None,
                        src=root,
                        group=gloo,
                    )
                    chk.equal(what + " vs gloo", out, reference)


def _a2a_block(dtype, rows, src, dst, cols=3):
    """The rows that rank src sends to rank dst (distinct per pair)."""
    return rank_input(dtype, rows * cols, 100 * src + dst).reshape(rows, cols)


@checks_test(transport_cases(tcp_worlds=(3,)), min_checks=60)
def test_all_to_all(chk, rank, world):
    gloo = gloo_group()
    for dtype in DTYPES:
        # equal splits (no split sizes given)
        for n in COUNTS:
            what = f"all_to_all_single equal {dtype_name(dtype)} rows/peer={n}"
            x = torch.cat([_a2a_block(dtype, n, rank, p) for p in range(world)])
            expected = torch.cat([_a2a_block(dtype, n, p, rank) for p in range(world)])
            out = different_from(expected)
            dist.all_to_all_single(out, x)
            chk.equal(what, out, expected)
            if gloo_supports(dtype) and n == 7:
                reference = torch.empty_like(out)
                dist.all_to_all_single(real(reference), real(x), group=gloo)
                chk.equal(what + " vs gloo", out, reference)
        # uneven splits, zeros included: rank s sends (s + 2d) % 3 rows to d
        for scale in (1, 333):

            def rows(s, d, scale=scale):
                return ((s + 2 * d) % 3) * scale

            what = f"all_to_all_single uneven {dtype_name(dtype)} scale={scale}"
            in_splits = [rows(rank, p) for p in range(world)]
            out_splits = [rows(p, rank) for p in range(world)]
            x = torch.cat([_a2a_block(dtype, rows(rank, p), rank, p) for p in range(world)])
            expected = torch.cat([_a2a_block(dtype, rows(p, rank), p, rank) for p in range(world)])
            out = different_from(expected)
            dist.all_to_all_single(out, x, out_splits, in_splits)
            chk.equal(what, out, expected)
            if gloo_supports(dtype) and scale == 1:
                reference = torch.empty_like(out)
                dist.all_to_all_single(real(reference), real(x), out_splits, in_splits, group=gloo)
                chk.equal(what + " vs gloo", out, reference)
        # list form, different sizes per pair (gloo needs equal sizes: compared on a second,
        # equal-sized exchange)
        what = f"all_to_all (list) {dtype_name(dtype)}"
        inputs = [_a2a_block(dtype, (rank + p) % 3 + 1, rank, p) for p in range(world)]
        expected = [_a2a_block(dtype, (p + rank) % 3 + 1, p, rank) for p in range(world)]
        outs = [different_from(e) for e in expected]
        dist.all_to_all(outs, inputs)
        for p in range(world):
            chk.equal(f"{what} from {p}", outs[p], expected[p])
        if gloo_supports(dtype):
            inputs = [_a2a_block(dtype, 2, rank, p) for p in range(world)]
            outs = [torch.empty_like(t) for t in inputs]
            reference = [torch.empty_like(t) for t in inputs]
            dist.all_to_all(outs, inputs)
            dist.all_to_all(
                [real(t) for t in reference], [real(t.clone()) for t in inputs], group=gloo
            )
            for p in range(world):
                chk.equal(f"{what} equal sizes from {p}", outs[p], _a2a_block(dtype, 2, p, rank))
                chk.equal(f"{what} equal sizes from {p} vs gloo", outs[p], reference[p])


@checks_test(transport_cases(tcp_worlds=(4,), hierarchical_worlds=(4,)), min_checks=15, timeout=300)
def test_large_messages(chk, rank, world):
    """> 1M elements: the ring/pipelined paths, compared exactly and with gloo."""
    gloo = gloo_group()
    n = LARGE
    for dtype, op in (
        (torch.float32, Op("SUM")),
        (torch.bfloat16, Op("SUM")),
        (torch.int32, Op("MAX")),
        (torch.float32, Op("AVG")),
    ):
        check_all_reduce(chk, gloo, op, dtype, n, rank, world)
    for dtype in (torch.float32, torch.uint8):
        what = f"all_gather_into_tensor {dtype_name(dtype)} n={n}"
        parts = [rank_input(dtype, n, r) for r in range(world)]
        out = torch.empty(n * world, dtype=dtype)
        dist.all_gather_into_tensor(out, parts[rank])
        chk.equal(what, out, torch.cat(parts))
        outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, parts[rank])
        chk.equal(f"all_gather {dtype_name(dtype)} n={n}", torch.cat(outs), torch.cat(parts))
        reference = torch.empty_like(out)
        dist.all_gather_into_tensor(reference, parts[rank], group=gloo)
        chk.equal(what + " vs gloo", out, reference)
    for dtype, op in ((torch.float32, Op("SUM")), (torch.int64, Op("MIN"))):
        what = f"reduce_scatter_tensor {op.label} {dtype_name(dtype)} n={n}/rank"
        x = rank_input(dtype, n * world, rank, op.pattern)
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(out, x, op=op.make(dtype))
        expected = expected_reduction(op, dtype, n * world, world)[rank * n : (rank + 1) * n]
        chk.equal(what, out, expected)
        reference = torch.empty_like(out)
        dist.reduce_scatter_tensor(reference, x, op=op.make(dtype), group=gloo)
        chk.equal(what + " vs gloo", out, reference)
    for root in sorted({0, world - 1}):
        for dtype in (torch.float32, torch.int8):
            what = f"broadcast root={root} {dtype_name(dtype)} n={n}"
            expected = rank_input(dtype, n, root)
            x = expected.clone() if rank == root else torch.zeros(n, dtype=dtype)
            dist.broadcast(x, src=root)
            chk.equal(what, x, expected)
        what = f"reduce root={root} SUM float32 n={n}"
        x = rank_input(torch.float32, n, rank)
        dist.reduce(x, dst=root)
        if rank == root:
            chk.equal(what, x, expected_reduction(Op("SUM"), torch.float32, n, world))

    # all_to_all_single: ~LARGE elements per rank in uneven splits
    def count(s, d):
        return n // world + (1 if d < n % world else 0) + (s - d)

    for dtype in (torch.float32, torch.int16):
        what = f"all_to_all_single {dtype_name(dtype)} ~{n}/rank"
        in_splits = [count(rank, p) for p in range(world)]
        out_splits = [count(p, rank) for p in range(world)]
        x = torch.cat([_a2a_block(dtype, count(rank, p), rank, p, cols=1) for p in range(world)])
        expected = torch.cat(
            [_a2a_block(dtype, count(p, rank), p, rank, cols=1) for p in range(world)]
        )
        out = torch.empty_like(expected)
        dist.all_to_all_single(out, x, out_splits, in_splits)
        chk.equal(what, out, expected)
        if gloo_supports(dtype):
            reference = torch.empty_like(expected)
            dist.all_to_all_single(reference, x, out_splits, in_splits, group=gloo)
            chk.equal(what + " vs gloo", out, reference)
