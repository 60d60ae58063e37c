"""One rank of test_cross_host.py, started as a plain process inside a namespace host with
torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

    python cross_host_rank.py all       # every collective once, exact checks
    python cross_host_rank.py linkdown PROGRESS_FILE ITERS
                                        # all_reduce 4 MiB ITERS times, each result checked;
                                        # rank 0 writes the iteration it reached to the file
    python cross_host_rank.py flap PROGRESS_FILE STOP_FILE
                                        # the same loop until rank 0 sees STOP_FILE (it tells
                                        # the others through the last element of the sum)

Prints one JSON line {"rank", "checks", "failures", "seconds", "host", "max_call_s"} and exits 0
when every check passed. Inputs are small integers, so every result is exact in every dtype and
compared bit for bit.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import xccl  # noqa: F401 - registers the backend
from rank_checks import Checker

GROUP_TIMEOUT = timedelta(seconds=60)
SMALL, LARGE = 5, 131_075  # under the small-message bound; over one ring chunk, odd on purpose
R = dist.ReduceOp
# torch >= 2.14 renamed the tensor-in/tensor-out collectives; older torch has only the old names.
all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
# What each op must give, from every rank's input stacked along dimension 0.
REFERENCE = {
    R.SUM: lambda stacked, world: stacked.sum(0),
    R.MAX: lambda stacked, world: stacked.max(0).values,
    R.MIN: lambda stacked, world: stacked.min(0).values,
    R.PRODUCT: lambda stacked, world: stacked.prod(0),
    R.AVG: lambda stacked, world: stacked.sum(0) / world,
}


def pattern(rank: int, n: int, salt: int, dtype=torch.float32) -> torch.Tensor:
    """Integers in -5..5, different per rank, position and salt."""
    values = (torch.arange(n, dtype=torch.int64) * 7 + rank * 13 + salt * 3) % 11 - 5
    return values.to(dtype)


def check_all_reduce(chk: Checker, rank: int, world: int, salt: int) -> None:
    cases = [
        (dtype, op)
        for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.int64)
        for op in (R.SUM, R.MAX, R.MIN)
    ] + [(torch.float32, R.PRODUCT), (torch.int64, R.PRODUCT), (torch.float32, R.AVG)]
    for dtype, op in cases:
        for n in (SMALL, LARGE):
            salt += 1
            inputs = [pattern(r, n, salt, dtype) for r in range(world)]
            if op == R.PRODUCT:  # 1s and 2s: the product over the world stays exact
                inputs = [t.abs().remainder(2) + 1 for t in inputs]
            if op == R.AVG:  # multiples of the world size: the average is an integer
                inputs = [t * world for t in inputs]
            stacked = torch.stack(inputs)
            expected = REFERENCE[op](stacked, world).to(dtype)
            tensor = inputs[rank].clone()
            dist.all_reduce(tensor, op=op)
            chk.equal(f"all_reduce {op} {dtype} n={n}", tensor, expected)


def check_movement(chk: Checker, rank: int, world: int) -> None:
    """Every collective that moves data without arithmetic, plus reduce and reduce_scatter,
    with roots on the last host so data crosses hosts whichever rank is root."""
    root = world - 1
    for n in (SMALL, LARGE):
        mine = pattern(rank, n, 1)
        everyone = [pattern(r, n, 1) for r in range(world)]
        gathered = [torch.empty(n) for _ in range(world)]
        dist.all_gather(gathered, mine)
        chk.equal(f"all_gather n={n}", torch.cat(gathered), torch.cat(everyone))
        flat = torch.empty(n * world)
        all_gather_tensor(flat, mine)
        chk.equal(f"all_gather_into_tensor n={n}", flat, torch.cat(everyone))

        chunks = [pattern(rank, n, 10 + r) for r in range(world)]  # chunk r goes to rank r
        summed = sum(pattern(r, n, 10 + rank) for r in range(world))
        out = torch.empty(n)
        dist.reduce_scatter(out, chunks)
        chk.equal(f"reduce_scatter n={n}", out, summed)
        reduce_scatter_tensor(out, torch.cat(chunks))
        chk.equal(f"reduce_scatter_tensor n={n}", out, summed)

        tensor = mine.clone()
        dist.broadcast(tensor, src=root)
        chk.equal(f"broadcast n={n}", tensor, everyone[root])
        tensor = mine.clone()
        dist.reduce(tensor, dst=root)
        if rank == root:
            chk.equal(f"reduce n={n}", tensor, sum(everyone))

        received = [torch.empty(n) for _ in range(world)]
        dist.all_to_all(received, chunks)
        chk.equal(
            f"all_to_all n={n}",
            torch.cat(received),
            torch.cat([pattern(r, n, 10 + rank) for r in range(world)]),
        )
        single = torch.empty(n * world)
        dist.all_to_all_single(single, torch.cat(chunks))
        chk.equal(f"all_to_all_single n={n}", single, torch.cat(received))

        gather_list = [torch.empty(n) for _ in range(world)] if rank == root else None
        dist.gather(mine, gather_list, dst=root)
        if rank == root:
            chk.equal(f"gather n={n}", torch.cat(gather_list), torch.cat(everyone))
        out = torch.empty(n)
        dist.scatter(
            out,
            [pattern(root, n, 20 + r) for r in range(world)] if rank == root else None,
            src=root,
        )
        chk.equal(f"scatter n={n}", out, pattern(root, n, 20 + rank))

        # Point to point around the ring of ranks: neighbours sit on different hosts at each
        # host boundary, and the wrap-around joins the last host to the first.
        after, before = (rank + 1) % world, (rank - 1) % world
        got = torch.empty(n)
        works = dist.batch_isend_irecv(
            [
                dist.P2POp(dist.isend, pattern(rank, n, 30), after),
                dist.P2POp(dist.irecv, got, before),
            ]
        )
        for work in works:
            work.wait()
        chk.equal(f"isend/irecv n={n}", got, pattern(before, n, 30))
        if rank in (0, root) and root != 0:  # blocking send/recv between first and last host
            if rank == 0:
                dist.send(mine, dst=root)
            else:
                got = torch.empty(n)
                dist.recv(got, src=0)
                chk.equal(f"send/recv n={n}", got, everyone[0])
    dist.barrier()
    chk.true("barrier", True)


def link_down_loop(chk: Checker, rank: int, world: int, progress: str, iters: int) -> float:
    """all_reduce of 4 MiB `iters` times, each result checked; the test takes a link down and
    up while this runs. Returns the longest single call."""
    n = (4 << 20) // 4
    base = [pattern(r, n, 0) for r in range(world)]
    base_sum = torch.stack(base).sum(0)
    longest = 0.0
    for i in range(iters):
        tensor = base[rank] + i
        start = time.monotonic()
        dist.all_reduce(tensor)
        longest = max(longest, time.monotonic() - start)
        if not torch.equal(tensor, base_sum + world * i):
            chk.fail(f"all_reduce iteration {i}", "result differs")
        chk.checks += 1
        if rank == 0:
            with open(progress + ".tmp", "w") as f:
                f.write(str(i + 1))
            os.replace(progress + ".tmp", progress)  # the reader never sees a partial number
    return longest


def flap_loop(chk: Checker, rank: int, world: int, progress: str, stop: str) -> float:
    """link_down_loop until rank 0 finds `stop`: rank 0 adds 1 to an extra last element, so
    every rank leaves after the same iteration. Returns the longest single call."""
    n = (4 << 20) // 4
    base = [torch.cat([pattern(r, n, 0), torch.zeros(1)]) for r in range(world)]
    base_sum = torch.stack(base).sum(0)
    longest, i = 0.0, 0
    while True:
        tensor = base[rank] + i
        tensor[-1] = 1.0 if rank == 0 and os.path.exists(stop) else 0.0
        start = time.monotonic()
        dist.all_reduce(tensor)
        longest = max(longest, time.monotonic() - start)
        if not torch.equal(tensor[:-1], base_sum[:-1] + world * i) or float(tensor[-1]) not in (
            0.0,
            1.0,
        ):
            chk.fail(f"all_reduce iteration {i}", "result differs")
        chk.checks += 1
        i += 1
        if rank == 0:
            with open(progress + ".tmp", "w") as f:
                f.write(str(i))
            os.replace(progress + ".tmp", progress)
        if float(tensor[-1]) != 0.0:
            return longest


def main() -> int:
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("xccl", timeout=GROUP_TIMEOUT)
    chk, longest, started = Checker(rank), 0.0, time.monotonic()
    # What carries this rank's messages: "shm+tcp" with a same-host peer, "tcp" alone on a host.
    peers = dist.group.WORLD._get_backend(torch.device("cpu")).peer_transport
    if sys.argv[1] == "all":
        check_all_reduce(chk, rank, world, 0)
        check_movement(chk, rank, world)
    elif sys.argv[1] == "flap":
        longest = flap_loop(chk, rank, world, sys.argv[2], sys.argv[3])
    else:
        longest = link_down_loop(chk, rank, world, sys.argv[2], int(sys.argv[3]))
    seconds = time.monotonic() - started  # the collectives' share of the run, for reading
    dist.destroy_process_group()
    result = {"rank": rank, "checks": chk.checks, "failures": chk.failures, "seconds": seconds}
    result["host"] = socket.gethostname()  # what xccl told hosts apart by
    result["peer_transport"] = peers
    print(json.dumps({**result, "max_call_s": longest}), flush=True)
    return 1 if chk.failures else 0


if __name__ == "__main__":
    sys.exit(main())
