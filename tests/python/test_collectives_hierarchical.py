"""Every collective of a group spanning two simulated hosts (XCCL_SHM_HOST_ID per rank: even
ranks on one host, odd ranks on the other, so ranks are not ordered by host, and 3 ranks make
hosts of 2 and 1) runs hierarchically (algo/hierarchical.h) and gives exactly the expected
tensors, and gloo's. A 4 KiB pipelining chunk (XCCL_RING_CHUNK_BYTES) makes the larger sizes
cross it many times.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from collective_cases import (
    check_reduce_scatter_tensor,
    compare,
    different_from,
    dtype_name,
    expected_reduction,
    gloo_group,
    gloo_supports,
    ops_for,
    rank_input,
    real,
)
from dist_harness import checks_test, transport_cases

CASES = transport_cases(tcp_worlds=(), hierarchical_worlds=(3, 4), worlds=())
ENV = {"XCCL_RING_CHUNK_BYTES": "4096"}
COUNTS = (1, 3001)  # 3001 x 4 bytes: three chunks and a bit
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool, torch.complex64)


@checks_test(CASES, min_checks=200, env=ENV)
def test_reductions(chk, rank, world):
    gloo = gloo_group()
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS:
                what = f"all_reduce {op.label} {dtype_name(dtype)} n={n}"
                x = rank_input(dtype, n, rank, op.pattern)
                dist.all_reduce(x, op=op.make(dtype))
                compare(chk, what, op, x, expected_reduction(op, dtype, n, world))
                # Whatever the rounding, every rank holds rank 0's bytes.
                mine = x.view(torch.uint8)
                first = mine.clone()
                dist.broadcast(first, src=0)
                chk.equal(what + " same bytes on every rank", mine, first)
                for root in sorted({0, world - 1}):
                    what = f"reduce root={root} {op.label} {dtype_name(dtype)} n={n}"
                    x = rank_input(dtype, n, rank, op.pattern)
                    dist.reduce(x, dst=root, op=op.make(dtype))
                    if rank == root:
                        compare(chk, what, op, x, expected_reduction(op, dtype, n, world))
                check_reduce_scatter_tensor(chk, gloo, op, dtype, n, rank, world)


@checks_test(CASES, min_checks=60, env=ENV)
def test_data_movement(chk, rank, world):
    gloo = gloo_group()
    for dtype in (torch.float32, torch.int8, torch.bool, torch.complex64):
        for n in COUNTS:
            parts = [rank_input(dtype, n, r) for r in range(world)]
            what = f"all_gather_into_tensor {dtype_name(dtype)} n={n}"
            out = different_from(torch.cat(parts))
            dist.all_gather_into_tensor(out, parts[rank])
            chk.equal(what, out, torch.cat(parts))
            if gloo_supports(dtype):
                reference = torch.empty_like(out)
                dist.all_gather_into_tensor(real(reference), real(parts[rank]), group=gloo)
                chk.equal(what + " vs gloo", out, reference)
            for root in range(world):
                what = f"broadcast root={root} {dtype_name(dtype)} n={n}"
                x = parts[root].clone() if rank == root else different_from(parts[root])
                dist.broadcast(x, src=root)
                chk.equal(what, x, parts[root])
                what = f"gather root={root} {dtype_name(dtype)} n={n}"
                outs = [different_from(p) for p in parts] if rank == root else None
                dist.gather(parts[rank].clone(), outs, dst=root)
                if rank == root:
                    chk.equal(what, torch.cat(outs), torch.cat(parts))
                what = f"scatter root={root} {dtype_name(dtype)} n={n}"
                pieces = [rank_input(dtype, n, 10 * root + r) for r in range(world)]
                got = different_from(pieces[rank])
                dist.scatter(got, [p.clone() for p in pieces] if rank == root else None, src=root)
                chk.equal(what, got, pieces[rank])
    # Uneven all_gather: rank r gives (r % 3) * 2000 elements (none for some ranks).
    x = rank_input(torch.int64, (rank % 3) * 2000, rank)
    outs = [torch.full(((r % 3) * 2000,), -99, dtype=torch.int64) for r in range(world)]
    dist.all_gather(outs, x)
    for r in range(world):
        chk.equal(
            f"uneven all_gather part {r}", outs[r], rank_input(torch.int64, (r % 3) * 2000, r)
        )

    # all_to_all_single, uneven splits with zeros: rank s sends ((s + 2d) % 3) * 700 rows to d.
    def rows(s, d):
        return ((s + 2 * d) % 3) * 700

    for dtype in (torch.float32, torch.int16):

        def block(s, d, dtype=dtype):
            return rank_input(dtype, rows(s, d), 100 * s + d)

        x = torch.cat([block(rank, p) for p in range(world)])
        expected = torch.cat([block(p, rank) for p in range(world)])
        out = different_from(expected)
        dist.all_to_all_single(
            out,
            x,
            output_split_sizes=[rows(p, rank) for p in range(world)],
            input_split_sizes=[rows(rank, p) for p in range(world)],
        )
        chk.equal(f"all_to_all_single uneven {dtype_name(dtype)}", out, expected)
    # barrier: nobody leaves before the last rank (rank 0, late on purpose) arrived.
    for _ in range(2):
        if rank == 0:
            time.sleep(0.3)
        start = time.monotonic()
        dist.barrier()
        waited = time.monotonic() - start
        if rank != 0:
            chk.true("barrier waited for rank 0", waited > 0.2, f"left after {waited:.3f} s")
