"""The GPU behaviours issue 9 ("GPU path hardening") requires, as a user of NCCL through torch
expects them: issue order across routes, failed groups that never return stale data (nor a
call's own wait() after its kernel failed, issue 22), PREMUL_SUM with a tensor factor under CUDA
graph capture, world size 1, and a bounded shutdown after a peer died mid-kernel. Skipped
without a CUDA GPU; placements as in test_gpu.py (docs/gpu.md states the rules these tests hold
the backend to).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, describe, kill_self, result, run_checks, spawn
from test_gpu import _input, _sum, placement_cases

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

R = dist.ReduceOp
ORDER_ROUNDS = 20  # back-to-back rounds: a race between streams shows in some of them
SMALL = 1024  # elements: well inside every fabric's one-shot kernel limit (docs/algorithms.md)
FAILURE_TIMEOUT_S = 10.0  # the group timeout, which bounds each flag wait of a kernel
# destroy_process_group after a peer died mid-kernel: the kernel must be told to stop, so the
# survivor's shutdown may not wait out the group timeout (issue 9, defect 5).
SHUTDOWN_TIMEOUT_S = 40.0
SHUTDOWN_BOUND_S = SHUTDOWN_TIMEOUT_S / 2


def _issue_order(rank, world):
    """Unwaited calls on different routes take effect in issue order (defect 1). Each sequence
    ends in a value only the sequential order produces: world is even, so the XOR of equal
    buffers is 0, while the XOR of the ranks' different inputs is not."""
    chk = Checker(rank)
    for i in range(ORDER_ROUNDS):
        # Kernel route (small float all_reduce), then the vendor route (reduce: no kernel; host
        # where ranks share a GPU) on the same buffer, no wait between.
        x = _input(torch.float32, SMALL, rank + i)
        first = dist.all_reduce(x, async_op=True)
        second = dist.reduce(x, dst=0, async_op=True)
        first.wait()
        second.wait()
        if rank == 0:
            expected = world * sum(_input(torch.float64, SMALL, r + i, "cpu") for r in range(world))
            chk.equal(f"round {i}: all_reduce then reduce", x.cpu(), expected.to(torch.float32))
        # Kernel route, then the host route (bitwise: NCCL has none) on the same bytes.
        y = _input(torch.float32, SMALL, rank + i)
        first = dist.all_reduce(y, async_op=True)
        dist.all_reduce(y.view(torch.int32), op=R.BXOR)
        first.wait()
        chk.equal(
            f"round {i}: all_reduce then BXOR",
            y.view(torch.int32).cpu(),
            torch.zeros(SMALL, dtype=torch.int32),
        )
        # Vendor (host where shared) then host: int32 has no kernel, BXOR no vendor.
        z = torch.full((SMALL,), rank + 1 + i, dtype=torch.int32, device="cuda")
        first = dist.all_reduce(z, async_op=True)
        dist.all_reduce(z, op=R.BXOR)
        first.wait()
        chk.equal(f"round {i}: int32 sum then BXOR", z.cpu(), torch.zeros(SMALL, dtype=torch.int32))
    torch.cuda.synchronize()
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2, 4)))
def test_calls_on_different_routes_run_in_issue_order(world_size, placement):
    run_checks(
        _issue_order,
        world_size,
        min_checks=2 * ORDER_ROUNDS,
        timeout=300,
        placement=placement,
        env={"XCCL_GPU_ALGO": "kernel"},  # kernel calls among the others (unverified: none)
    )


def _names_failure(chk, what, fn):
    error = chk.raises(what, fn, types=(dist.DistBackendError,))
    if error is not None:
        chk.true(
            f"{what}: the error names the device-side timeout",
            "timed out" in str(error),
            str(error)[:300],
        )


def _failed_group(rank, world):
    """Rank 1 skips an all_reduce, so rank 0's kernel times out on the device (defect 2)."""
    chk = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(SMALL, device="cuda")
    dist.all_reduce(x)  # sets the workspace up on both ranks
    chk.equal("all_reduce before the failure", x.cpu(), torch.full((SMALL,), float(world)))
    if rank == 1:
        # Stay alive (peers map our workspace) and away from the group until rank 0 is done.
        store.wait(["failed-group/done"], timedelta(seconds=120))
        return result(chk)
    work = dist.all_reduce(x, async_op=True)  # never matched by rank 1
    started = time.time()
    torch.cuda.synchronize()  # the kernel gives up after the group timeout
    chk.true(
        "the timed-out kernel returned within the timeout plus a margin",
        time.time() - started < FAILURE_TIMEOUT_S + 20,
        f"{time.time() - started:.1f} s",
    )
    _names_failure(chk, "wait() on the timed-out call", work.wait)
    _names_failure(
        chk, "wait(timeout) on the timed-out call", lambda: work.wait(timeout=timedelta(seconds=5))
    )
    # Every later call, whatever its route, raises instead of returning stale data: at issue,
    # or (async) at the latest when waited for.

    def ones(dtype=torch.float32):
        return torch.ones(SMALL, dtype=dtype, device="cuda")

    later = {
        "kernel-route all_reduce": lambda a: dist.all_reduce(ones(), async_op=a),
        "kernel-route broadcast": lambda a: dist.broadcast(ones(), src=0, async_op=a),
        "vendor-route reduce": lambda a: dist.reduce(ones(), dst=0, async_op=a),
        "host-route BAND all_reduce": lambda a: dist.all_reduce(
            ones(torch.int32), op=R.BAND, async_op=a
        ),
    }
    for what, call in later.items():
        _names_failure(chk, f"later {what}", lambda call=call: call(False))
        _names_failure(chk, f"later async {what} and its wait", lambda call=call: call(True).wait())
    store.set("failed-group/done", "1")
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
def test_failed_group_raises_on_every_later_call_and_wait(world_size, placement):
    # XCCL_GPU_ALGO=kernel: the failure must happen inside xccl's kernel, not in NCCL.
    run_checks(
        _failed_group,
        world_size,
        min_checks=3,
        timeout=240,
        placement=placement,
        pg_timeout=FAILURE_TIMEOUT_S,
        env={"XCCL_GPU_ALGO": "kernel"},
    )


def _wait_sees_own_failure(rank, world, blocking):
    """Rank 1 skips an all_reduce: rank 0's kernel times out on the device after its wait()
    was called. Its output must never be handed out as good: with XCCL_GPU_BLOCKING_WAIT=1 that
    wait() raises; with 0 (the default, NCCL's) wait() only joins the stream and the failure is
    raised at the latest by the call's future and by the next call."""
    chk = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(SMALL, device="cuda")
    dist.all_reduce(x)  # sets the workspace up on both ranks
    torch.cuda.synchronize()
    if rank == 1:
        store.wait(["own-failure/done"], timedelta(seconds=120))
        return result(chk)
    work = dist.all_reduce(x, async_op=True)  # never matched by rank 1
    started = time.time()
    if blocking:
        # No synchronize first: before issue 22 this wait returned at once and x stayed stale.
        _names_failure(chk, "wait() on a call that times out after it was called", work.wait)
    else:
        # Issued behind it before anything failed: queued on the comm stream, never good either.
        behind = dist.all_reduce(torch.ones(SMALL, device="cuda"), async_op=True)
        chk.true("wait() does not block the host", _returns_quickly(work.wait), "")
        # The future completes when the watchdog saw the call end, with the watchdog's error.
        _names_failure(chk, "the future of the call that timed out", work.get_future().wait)
        _names_failure(chk, "the future of the call issued behind it", behind.get_future().wait)
        _names_failure(
            chk, "the next call", lambda: dist.all_reduce(torch.ones(SMALL, device="cuda"))
        )
    chk.true(
        "the failure was known within the group timeout plus a margin",
        time.time() - started < FAILURE_TIMEOUT_S + 20,
        f"{time.time() - started:.1f} s",
    )
    store.set("own-failure/done", "1")
    return result(chk)


def _returns_quickly(wait):
    """True when wait() returned (or raised: the failure may already be known) within 2 s."""
    started = time.time()
    try:
        wait()
    except dist.DistBackendError:
        pass
    return time.time() - started < 2.0


@pytest.mark.parametrize("blocking", (False, True), ids=("wait_joins_stream", "blocking_wait"))
@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
def test_wait_raises_when_its_own_kernel_times_out(world_size, placement, blocking):
    run_checks(
        _wait_sees_own_failure,
        world_size,
        blocking,
        min_checks=2 if blocking else 6,
        timeout=240,
        placement=placement,
        pg_timeout=FAILURE_TIMEOUT_S,
        env={"XCCL_GPU_ALGO": "kernel", "XCCL_GPU_BLOCKING_WAIT": "1" if blocking else "0"},
    )


def _premul_tensor_graph(rank, world):
    """PREMUL_SUM with a device tensor factor captures and replays (defect 7); the factor is
    read on the device at each replay, as NCCL does (ncclScalarDevice)."""
    chk = Checker(rank)
    factor = torch.tensor(2.0, device="cuda")
    op = dist._make_nccl_premul_sum(factor)
    static = _input(torch.float32, SMALL, rank)
    dist.all_reduce(static, op=op)  # eager first: the workspace cannot be set up in capture
    chk.equal("eager PREMUL_SUM(tensor 2)", static.cpu(), 2 * _sum(torch.float32, SMALL, world))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static, op=op)
    for replay, value in enumerate((2.0, 3.0, 0.5)):
        static.copy_(_input(torch.float32, SMALL, rank) * (replay + 1))
        factor.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        chk.equal(
            f"replay {replay} with factor {value}",
            static.cpu(),
            (value * (replay + 1) * _sum(torch.float64, SMALL, world)).to(torch.float32),
        )
    # An eager call right after a replay, without synchronising: ordered after the replay
    # (docs/gpu.md, "CUDA graphs": replays and eager kernel calls share the comm stream's order).
    static.copy_(_input(torch.float32, SMALL, rank))
    factor.fill_(1.0)
    graph.replay()
    dist.all_reduce(static)
    torch.cuda.synchronize()
    chk.equal(
        "eager all_reduce after an unsynchronised replay",
        static.cpu(),
        (world * _sum(torch.float64, SMALL, world)).to(torch.float32),
    )
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
def test_premul_sum_tensor_factor_under_graph_capture(world_size, placement):
    run_checks(
        _premul_tensor_graph,
        world_size,
        min_checks=5,
        timeout=180,
        placement=placement,
        env={"XCCL_GPU_ALGO": "kernel"},  # capture needs the kernel route (unverified: NCCL/host)
    )


def _capture_beside_a_watched_call(rank, world):
    """A graph captured on this thread (global capture mode, torch.cuda.graph's default) while
    the group's watchdog polls an outstanding kernel-route call from its own thread: its event
    queries run in the thread-local mode (docs/gpu.md, "Streams and Work"), so the capture is
    neither broken nor refused, and the group is not failed for a call that ran fine. Rank 1
    joins the call late, so rank 0's kernel is still spinning (watched) while rank 0 captures.
    torch.cuda.graph would synchronise the device first (waiting for that call): the capture is
    begun by hand on a side stream."""
    chk = Checker(rank)
    x = _input(torch.float32, SMALL, rank)
    dist.all_reduce(x)  # the workspace is set up outside any capture
    y = torch.full((SMALL,), 3.0, device="cuda")
    torch.cuda.synchronize()
    if rank != 0:
        time.sleep(1.0)  # rank 0's call waits for this rank meanwhile
    x = _input(torch.float32, SMALL, rank)
    work = dist.all_reduce(x, async_op=True)
    if rank == 0:
        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        captured, why = False, ""
        try:
            with torch.cuda.stream(side):
                graph.capture_begin(capture_error_mode="global")
                z = y * 2
                time.sleep(0.3)  # hundreds of watchdog polls while this thread captures
                graph.capture_end()
            captured = True
        except RuntimeError as error:
            why = str(error)[:300]
        chk.true("capture while a kernel-route call is watched", captured, why)
        if captured:
            graph.replay()
            torch.cuda.synchronize()
            chk.equal("the captured graph's replay", z.cpu(), torch.full((SMALL,), 6.0))
    work.wait()
    torch.cuda.synchronize()
    chk.equal("the watched call's result", x.cpu(), _sum(torch.float32, SMALL, world))
    x = _input(torch.float32, SMALL, rank)
    dist.all_reduce(x)
    chk.equal("the group after the capture", x.cpu(), _sum(torch.float32, SMALL, world))
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
def test_a_capture_beside_a_watched_call_is_not_broken(world_size, placement):
    run_checks(
        _capture_beside_a_watched_call,
        world_size,
        min_checks=2,  # rank 0 makes 4, rank 1 2
        timeout=180,
        placement=placement,
        env={"XCCL_GPU_ALGO": "kernel"},  # a watched call is a kernel-route call
    )


def _world_one(rank, world):
    """At world size 1 every reduction returns its input (times the factor); no crash at any
    size or alignment (defect 9: one copy or none)."""
    chk = Checker(rank)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in (0, 1, 7, 1001, 1_000_003, 9_000_001):
            x = _input(dtype, n, 0)
            dist.all_reduce(x)
            chk.equal(f"SUM {dtype} n={n}", x.cpu(), _input(dtype, n, 0, "cpu"))
        # Views whose start is not 16-byte aligned (copies must not assume it).
        for offset in (1, 3):
            base = _input(dtype, 4099 + offset, 0)
            view = base[offset:]
            dist.all_reduce(view, op=R.MAX)
            chk.equal(
                f"MAX {dtype} on a view at element {offset}",
                base.cpu(),
                _input(dtype, 4099 + offset, 0, "cpu"),
            )
        x = _input(dtype, 1001, 0)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
        chk.equal(
            f"PREMUL_SUM(2) {dtype}", x.cpu(), (2 * _input(torch.float64, 1001, 0, "cpu")).to(dtype)
        )
    x = _input(torch.float32, 1001, 0)
    out = torch.empty(1001, device="cuda")
    dist.all_gather_into_tensor(out, x)
    chk.equal("all_gather_into_tensor", out.cpu(), _input(torch.float32, 1001, 0, "cpu"))
    dist.reduce_scatter_tensor(out, _input(torch.float32, 1001, 0) * 3)
    chk.equal("reduce_scatter_tensor", out.cpu(), 3 * _input(torch.float32, 1001, 0, "cpu"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(x)
    x.copy_(_input(torch.float32, 1001, 0) * 5)
    graph.replay()
    torch.cuda.synchronize()
    chk.equal("graph replay", x.cpu(), 5 * _input(torch.float32, 1001, 0, "cpu"))
    return result(chk)


def test_world_size_one_returns_the_input():
    run_checks(_world_one, 1, min_checks=30, timeout=180, placement="shared")


def _peer_killed(rank, world):
    """Rank 1 dies while rank 0's kernel waits for it; rank 0 times its shutdown."""
    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(SMALL, device="cuda")
    dist.all_reduce(x)  # workspace mapped on both ranks
    torch.cuda.synchronize()
    if rank == 1:
        dist.all_reduce(x, async_op=True)  # our half of a kernel, left behind when we die
        store.wait(["killed/issued"], timedelta(seconds=60))
        kill_self()
    dist.all_reduce(x, async_op=True)
    dist.all_reduce(x, async_op=True)  # this one spins on the peer that will be gone
    store.set("killed/issued", "1")
    time.sleep(2)  # rank 1 is dead by now
    started = time.time()
    dist.destroy_process_group()
    return {"destroy_s": time.time() - started}


@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
def test_shutdown_after_a_peer_died_mid_kernel_is_bounded(world_size, placement):
    outcomes = spawn(
        _peer_killed,
        world_size,
        placement=placement,
        pg_timeout=SHUTDOWN_TIMEOUT_S,
        timeout=SHUTDOWN_TIMEOUT_S + 60,
        env={"XCCL_GPU_ALGO": "kernel"},
    )
    assert outcomes[1].exitcode == -9, describe(outcomes)
    survivor = outcomes[0]
    assert survivor.ok, describe([survivor])
    took = survivor.value["destroy_s"]
    assert took < SHUTDOWN_BOUND_S, (
        f"destroy_process_group took {took:.1f} s after the peer died mid-kernel (group timeout "
        f"{SHUTDOWN_TIMEOUT_S:g} s, bound {SHUTDOWN_BOUND_S:g} s)\n" + describe([survivor])
    )


def _moe_splits(rank, world):
    """all_to_all_single with explicit split lists on every rank, equal on rank 0 only (MoE
    dispatch with data-dependent splits): every rank must take the same route, whatever its own
    lists look like (defect 6), and the results must be exact."""
    chk = Checker(rank)
    # sends[s][d]: rows rank s sends to rank d; rank 0's row is equal, the others are not.
    sends = [[2] * world] + [[1 + (s + d) % 3 for d in range(world)] for s in range(1, world)]
    send = torch.cat(
        [torch.full((sends[rank][d],), float(100 * rank + d), device="cuda") for d in range(world)]
    )
    recv_splits = [sends[s][rank] for s in range(world)]
    recv = torch.empty(sum(recv_splits), device="cuda")
    dist.all_to_all_single(
        recv, send, output_split_sizes=recv_splits, input_split_sizes=sends[rank]
    )
    want = torch.cat([torch.full((sends[s][rank],), float(100 * s + rank)) for s in range(world)])
    chk.equal("all_to_all, explicit splits, equal on rank 0 only", recv.cpu(), want)
    # Torch's equal form (no lists) on every rank: the kernel route where the plan picks it.
    per = 3
    send = torch.arange(world * per, dtype=torch.float32, device="cuda") + 100 * rank
    recv = torch.empty(world * per, device="cuda")
    dist.all_to_all_single(recv, send)
    want = torch.cat(
        [
            torch.arange(rank * per, (rank + 1) * per, dtype=torch.float32) + 100 * r
            for r in range(world)
        ]
    )
    chk.equal("all_to_all, no split lists", recv.cpu(), want)
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2, 3)))
def test_all_to_all_route_does_not_depend_on_one_ranks_splits(world_size, placement):
    run_checks(
        _moe_splits,
        world_size,
        min_checks=2,
        timeout=180,
        placement=placement,
        env={"XCCL_GPU_ALGO": "kernel"},  # the kernel route for torch's equal form
    )
