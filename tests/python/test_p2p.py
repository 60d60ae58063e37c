"""Point-to-point on backend "xccl": send/recv with tags, isend/irecv, recv from any source,
batch_isend_irecv (the backend's startCoalescing/endCoalescing) and p2p interleaved with
collectives. World size 1 has no peer, so these run on 2, 3 and 4 ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist
from collective_cases import Op, check_sum, expected_reduction, rank_input, ring_batch
from dist_harness import Checker, checks_test, result, run_checks

P2P_WORLD_SIZES = (2, 3, 4)


def _message(src: int, dst: int, tag: int, n: int = 7, dtype=torch.float32) -> torch.Tensor:
    return rank_input(dtype, n, 1000 * src + 10 * dst + tag)


@checks_test(P2P_WORLD_SIZES, min_checks=8)
def test_send_recv_tags(chk, rank, world):
    # Ring: every rank sends three tagged messages to the next rank in tag order 1, 2, 3 while
    # the receiver posts its receives in the opposite order: only tag matching pairs them right.
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    tags = (1, 2, 3)
    sizes = {1: 5, 2: 1001, 3: 0}
    sends = [dist.isend(_message(rank, nxt, t, sizes[t]), dst=nxt, tag=t) for t in tags]
    received = {t: torch.full((sizes[t],), -1.0) for t in tags}
    for t in reversed(tags):
        dist.recv(received[t], src=prev, tag=t)
    for w in sends:
        w.wait()
    for t in tags:
        chk.equal(f"recv tag {t} from {prev}", received[t], _message(prev, rank, t, sizes[t]))
    # Blocking send/recv of every dtype between rank 0 and each other rank, both directions.
    for dtype in (
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.int64,
        torch.uint8,
        torch.bool,
        torch.complex64,
        torch.float64,
    ):
        for peer in range(1, world):
            if rank == 0:
                dist.send(_message(0, peer, 0, 1001, dtype), dst=peer, tag=5)
                back = torch.empty(1001, dtype=dtype)
                dist.recv(back, src=peer, tag=6)
                chk.equal(
                    f"send/recv {dtype} back from {peer}", back, _message(peer, 0, 0, 1001, dtype)
                )
            elif rank == peer:
                x = torch.empty(1001, dtype=dtype)
                dist.recv(x, src=0, tag=5)
                chk.equal(f"send/recv {dtype} from 0", x, _message(0, peer, 0, 1001, dtype))
                dist.send(_message(peer, 0, 0, 1001, dtype), dst=0, tag=6)
    # A large message (> 1M elements) and a 2-D one.
    if rank == 0:
        dist.send(rank_input(torch.float32, 1_000_003, 42), dst=world - 1)
        dist.send(rank_input(torch.int32, 12, 43).reshape(3, 4), dst=world - 1, tag=9)
    elif rank == world - 1:
        big = torch.empty(1_000_003)
        dist.recv(big, src=0)
        chk.equal("large send/recv", big, rank_input(torch.float32, 1_000_003, 42))
        small = torch.empty(3, 4, dtype=torch.int32)
        dist.recv(small, src=0, tag=9)
        chk.equal("2-D send/recv", small, rank_input(torch.int32, 12, 43).reshape(3, 4))


@checks_test(P2P_WORLD_SIZES, min_checks=4)
def test_isend_irecv(chk, rank, world):
    # Everyone posts irecvs from everyone first, then isends: nothing may block the poster.
    recvs, buffers = [], {}
    for peer in range(world):
        if peer != rank:
            buffers[peer] = torch.empty(1001, dtype=torch.int64)
            recvs.append((peer, dist.irecv(buffers[peer], src=peer, tag=7)))
    sends = [
        dist.isend(_message(rank, p, 7, 1001, torch.int64), dst=p, tag=7)
        for p in range(world)
        if p != rank
    ]
    for peer, w in recvs:
        chk.true(f"irecv from {peer} waits", w.wait())
        chk.true(f"irecv from {peer} completed", w.is_completed())
        chk.equal(f"irecv from {peer}", buffers[peer], _message(peer, rank, 7, 1001, torch.int64))
    for w in sends:
        w.wait()
        chk.true("isend completed", w.is_completed())


@checks_test(P2P_WORLD_SIZES, min_checks=2)
def test_recv_any_source(chk, rank, world):
    # Rank 0 receives one message from every other rank without naming the source; recv()
    # returns the sender, whose payload it must be. Rank 0 answers each sender with the rank it
    # saw, and the sender checks that it was recognised.
    for round_ in range(2):
        if rank == 0:
            seen = []
            for _ in range(world - 1):
                x = torch.empty(5, dtype=torch.int32)
                src = dist.recv(x, tag=round_)
                seen.append(src)
                chk.equal(
                    f"recv any source round {round_} payload from {src}",
                    x,
                    _message(src, 0, round_, 5, torch.int32),
                )
                if 0 < src < world:
                    dist.send(torch.tensor([src]), dst=src, tag=100 + round_)
            chk.equal(
                f"recv any source round {round_} senders", sorted(seen), list(range(1, world))
            )
        else:
            dist.send(_message(rank, 0, round_, 5, torch.int32), dst=0, tag=round_)
            answer = torch.tensor([-1])
            dist.recv(answer, src=0, tag=100 + round_)
            chk.equal(f"round {round_}: rank 0 saw this rank as the source", answer.item(), rank)
    # irecv without src: the Work knows its source after wait().
    if rank == world - 1:
        x = torch.empty(3)
        work = dist.irecv(x)
        work.wait()
        chk.equal("irecv any source: _source_rank()", work._source_rank(), 0)
        chk.equal("irecv any source payload", x, _message(0, world - 1, 0, 3))
    elif rank == 0:
        dist.send(_message(0, world - 1, 0, 3), dst=world - 1)


@checks_test(P2P_WORLD_SIZES, min_checks=9)
def test_batch_isend_irecv(chk, rank, world):
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    for n in (0, 1, 1001, 300_000):
        # Ring exchange in both directions in one batch.
        to_next, to_prev = _message(rank, nxt, 1, n), _message(rank, prev, 2, n)
        from_prev, from_next = torch.full((n,), -1.0), torch.full((n,), -1.0)
        ops = [
            dist.P2POp(dist.isend, to_next, nxt, tag=1),
            dist.P2POp(dist.irecv, from_prev, prev, tag=1),
            dist.P2POp(dist.isend, to_prev, prev, tag=2),
            dist.P2POp(dist.irecv, from_next, nxt, tag=2),
        ]
        works = dist.batch_isend_irecv(ops)
        chk.true(f"batch_isend_irecv n={n} returns works", len(works) >= 1, repr(works))
        for w in works:
            w.wait()
        chk.equal(f"batch ring n={n} from prev", from_prev, _message(prev, rank, 1, n))
        chk.equal(f"batch ring n={n} from next", from_next, _message(nxt, rank, 2, n))
    # All-pairs exchange in one batch (every rank with every other).
    outs = {p: torch.empty(11, dtype=torch.int16) for p in range(world) if p != rank}
    ops = []
    for p in range(world):
        if p != rank:
            ops.append(dist.P2POp(dist.irecv, outs[p], p))
            ops.append(dist.P2POp(dist.isend, _message(rank, p, 0, 11, torch.int16), p))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for p, t in outs.items():
        chk.equal(f"batch all-pairs from {p}", t, _message(p, rank, 0, 11, torch.int16))


def _batch_after_a_failed_one(rank, world):
    chk = Checker(rank)
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    # torch never ends a batch whose body raised; the backend must not refuse the next one.
    chk.raises(
        "a batch whose operation is refused",
        lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(2), nxt, tag=-1)]),
        types=(ValueError,),
        match="tag",
    )
    chk.equal("the next batch runs", ring_batch(3, rank, world), torch.full((3,), float(prev)))
    return result(chk)


def test_batch_after_a_failed_batch():
    run_checks(_batch_after_a_failed_one, 2, min_checks=2)


@checks_test(P2P_WORLD_SIZES, min_checks=16)
def test_p2p_interleaved_with_collectives(chk, rank, world):
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    for step in range(5):
        # An irecv posted before a collective must not hold the collective up, and the message
        # sent after the collective still lands in it.
        box = torch.empty(1001)
        pending = dist.irecv(box, src=prev, tag=step)
        check_sum(
            chk, f"step {step} all_reduce between p2p", torch.float32, 1001, rank, world, step
        )
        send = dist.isend(_message(rank, nxt, step, 1001), dst=nxt, tag=step)
        gathered = torch.empty(3 * world, dtype=torch.int64)
        dist.all_gather_into_tensor(gathered, rank_input(torch.int64, 3, rank))
        chk.equal(
            f"step {step} all_gather between p2p",
            gathered,
            torch.cat([rank_input(torch.int64, 3, r) for r in range(world)]),
        )
        pending.wait()
        send.wait()
        chk.equal(f"step {step} p2p around collectives", box, _message(prev, rank, step, 1001))
    # A batch and an async collective outstanding at the same time.
    to_next, from_prev = _message(rank, nxt, 0, 64), torch.empty(64)
    y = rank_input(torch.int32, 7, rank)
    reduce_work = dist.all_reduce(y, op=dist.ReduceOp.MAX, async_op=True)
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.irecv, from_prev, prev), dist.P2POp(dist.isend, to_next, nxt)]
    )
    for w in works:
        w.wait()
    reduce_work.wait()
    chk.equal("batch next to async all_reduce: p2p", from_prev, _message(prev, rank, 0, 64))
    chk.equal(
        "batch next to async all_reduce: MAX",
        y,
        expected_reduction(Op("MAX"), torch.int32, 7, world),
    )
