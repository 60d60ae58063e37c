"""Backend "xccl" on CUDA tensors: every route of csrc/backend/core/gpu_side.h, stream semantics and
CUDA graph capture. Skipped without a CUDA GPU.

Each multi-rank test runs in two placements (dist_harness.device_index). "shared": every rank on
cuda:0 (separate processes, time-sliced: correctness only, never timing). Sharing a GPU is what
NCCL refuses and xccl's kernels allow, so the kernel-capable collectives run xccl's kernels over
CUDA IPC on one device and the others go through host memory. "spread": rank r on
cuda:(r % device_count), collected only where there are 2 or more GPUs: with at least as many
GPUs as ranks this is the deployment case (IPC and peer access across devices, the fabric plan,
NCCL at world size > 1 for what no kernel runs); with fewer, some ranks still share a device and
the group behaves as shared. The vendor route at world size 1 is exercised with
XCCL_GPU_ALGO=nccl. Inputs are small integers, so sums are exact in float16 and bfloat16 too.
The issue-9 hardening cases (ordering across routes, failures, shutdown) are in
test_gpu_hardening.py.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from collective_cases import ring_batch
from dist_harness import Checker, result, run_checks

if torch.cuda.is_available():
    DEVICES = torch.cuda.device_count()
else:
    DEVICES = 0

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Tests of xccl's own kernels force them: an unverified machine plans NCCL or host memory
# (docs/gpu.md, "Verified kernels").
KERNEL = {"XCCL_GPU_ALGO": "kernel"}


def mig_reason() -> str:
    """Why CUDA IPC cannot run here (a MIG instance refuses it), or "" (csrc/topo/gpu_sharing.h
    decides the same for the backend)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    names = [torch.cuda.get_device_name(i) for i in range(DEVICES)]
    if any(e.strip().startswith("MIG-") for e in visible.split(",")) or any(
        " MIG " in n for n in names
    ):
        return "a MIG instance refuses CUDA IPC: xccl's kernels fall back to NCCL or host memory"
    return ""


needs_ipc = pytest.mark.skipif(bool(DEVICES and mig_reason()), reason=mig_reason() or "-")

R = dist.ReduceOp
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
COUNTS = (0, 1, 7, 1001, 70_001, 1_000_003)
WORLDS = (2, 3, 4)


def placement_cases(worlds) -> list:
    """pytest.param((world_size, placement)): every world shared on cuda:0, and spread over the
    GPUs where there are several (not collected, rather than skipped, on one GPU: a skip on a
    GPU machine reads as a failure in benchmarks/device_check.sh)."""
    placements = ("shared", "spread") if DEVICES >= 2 else ("shared",)
    return [pytest.param(w, p, id=f"{w}-{p}") for w in worlds for p in placements]


def shares_a_gpu(world: int, placement: str) -> bool:
    """Whether two ranks of the group use one device (then NCCL is out: host route)."""
    return placement == "shared" or world > DEVICES


def _input(dtype, n, rank, device="cuda"):
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + rank * 5 + 3) % 11 - 5).to(dtype).to(device)


def _sum(dtype, n, world):
    return sum(_input(torch.float64, n, r, "cpu") for r in range(world)).to(dtype)


def _name(dtype):
    return str(dtype).replace("torch.", "")


def _check_usable(chk, what, world):
    """The group still runs a CUDA all_reduce (after a refused call)."""
    x = torch.ones(8, device="cuda")
    dist.all_reduce(x)
    chk.equal(what, x.cpu(), torch.full((8,), float(world)))


def _kernel_collectives(rank, world):
    chk = Checker(rank)
    for dtype in KERNEL_DTYPES:
        for n in COUNTS:
            what = f"{_name(dtype)} n={n}"
            x = _input(dtype, n, rank)
            dist.all_reduce(x)
            chk.equal(f"all_reduce SUM {what}", x.cpu(), _sum(dtype, n, world))
            x = _input(dtype, n, rank)
            dist.all_reduce(x, op=R.MAX)
            expected = torch.stack([_input(torch.float64, n, r, "cpu") for r in range(world)])
            chk.equal(f"all_reduce MAX {what}", x.cpu(), expected.max(0).values.to(dtype))
            x = _input(dtype, n, rank)
            dist.all_reduce(x, op=R.AVG)
            chk.close(
                f"all_reduce AVG {what}",
                x.cpu().double(),
                _sum(torch.float64, n, world) / world,
                rtol=1e-2,
                atol=2e-2,
            )
            x = _input(dtype, n, rank)
            dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
            chk.equal(
                f"all_reduce PREMUL_SUM(2) {what}",
                x.cpu(),
                (2 * _sum(torch.float64, n, world)).to(dtype),
            )
        n = 1001
        x = _input(dtype, n, rank)
        out = torch.empty(n * world, dtype=dtype, device="cuda")
        dist.all_gather_into_tensor(out, x)
        chk.equal(
            f"all_gather_into_tensor {_name(dtype)}",
            out.cpu(),
            torch.cat([_input(dtype, n, r, "cpu") for r in range(world)]),
        )
        big = torch.cat([_input(dtype, n, rank * world + q) for q in range(world)])
        out = torch.empty(n, dtype=dtype, device="cuda")
        dist.reduce_scatter_tensor(out, big)
        expected = sum(_input(torch.float64, n, r * world + rank, "cpu") for r in range(world))
        chk.equal(f"reduce_scatter_tensor {_name(dtype)}", out.cpu(), expected.to(dtype))
        for root in range(world):
            x = _input(dtype, n, rank)
            dist.broadcast(x, src=root)
            chk.equal(
                f"broadcast root={root} {_name(dtype)}", x.cpu(), _input(dtype, n, root, "cpu")
            )
    # all_to_all (even splits): chunk q of rank r is r * 100 + q.
    chunk = 33
    send = torch.cat(
        [torch.full((chunk,), rank * 100 + q, dtype=torch.int32) for q in range(world)]
    ).cuda()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    chk.equal(
        "all_to_all_single even",
        recv.cpu(),
        torch.cat([torch.full((chunk,), r * 100 + rank, dtype=torch.int32) for r in range(world)]),
    )
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases(WORLDS))
@needs_ipc
def test_kernel_route(world_size, placement):
    run_checks(
        _kernel_collectives,
        world_size,
        min_checks=85,
        timeout=600,
        placement=placement,
        env=KERNEL,
    )


def _chunked(rank, world):
    # XCCL_GPU_WORKSPACE_BYTES=64 KiB: all_reduce and broadcast run in chunks; the larger
    # all_gather goes through host memory where the ranks share a GPU, else to NCCL.
    chk = Checker(rank)
    n = 300_007
    x = _input(torch.float32, n, rank)
    dist.all_reduce(x)
    chk.equal("chunked all_reduce", x.cpu(), _sum(torch.float32, n, world))
    x = _input(torch.bfloat16, n, rank)
    dist.broadcast(x, src=world - 1)
    chk.equal("chunked broadcast", x.cpu(), _input(torch.bfloat16, n, world - 1, "cpu"))
    x = _input(torch.float32, 40_000, rank)
    out = torch.empty(40_000 * world, device="cuda")
    dist.all_gather_into_tensor(out, x)
    chk.equal(
        "all_gather above the workspace",
        out.cpu(),
        torch.cat([_input(torch.float32, 40_000, r, "cpu") for r in range(world)]),
    )
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((3,)))
@needs_ipc
def test_messages_larger_than_the_workspace(world_size, placement):
    run_checks(
        _chunked,
        world_size,
        min_checks=3,
        timeout=300,
        placement=placement,
        env={"XCCL_GPU_WORKSPACE_BYTES": str(64 * 1024), **KERNEL},
    )


def _without_kernel(rank, world, shared):
    # Calls no kernel runs: host route where ranks share a GPU (shared), NCCL otherwise; bitwise
    # reductions go through host memory either way (NCCL has none).
    chk = Checker(rank)
    x = torch.arange(10, dtype=torch.int64, device="cuda") * (rank + 1)
    dist.all_reduce(x)
    chk.equal(
        "int64 all_reduce (no kernel)",
        x.cpu(),
        torch.arange(10, dtype=torch.int64) * sum(range(1, world + 1)),
    )
    x = torch.full((5,), rank + 1, dtype=torch.int32, device="cuda")
    dist.all_reduce(x, op=R.BXOR)
    expected = 0
    for r in range(world):
        expected ^= r + 1
    chk.equal("int32 BXOR", x.cpu(), torch.full((5,), expected, dtype=torch.int32))
    x = _input(torch.float32, 17, rank)
    dist.reduce(x, dst=0)
    if rank == 0:
        chk.equal("reduce", x.cpu(), _sum(torch.float32, 17, world))
    gathered = [torch.empty(17, device="cuda") for _ in range(world)]
    dist.all_gather(gathered, _input(torch.float32, 17, rank))
    chk.equal(
        "all_gather list",
        torch.stack(gathered).cpu(),
        torch.stack([_input(torch.float32, 17, r, "cpu") for r in range(world)]),
    )
    if rank == 0:
        dist.send(torch.full((3,), 42.0, device="cuda"), dst=world - 1)
    elif rank == world - 1:
        got = torch.zeros(3, device="cuda")
        dist.recv(got, src=0)
        chk.equal("send/recv", got.cpu(), torch.full((3,), 42.0))
        # From any source: only the host route has it (NCCL has no receive from any source).
        if shared:
            chk.equal("recv from any source names the sender", dist.recv(got), 1)
        else:
            dist.recv(got, src=1)
        chk.equal("recv from rank 1", got.cpu(), torch.full((3,), 7.0))
    if rank == 1:
        dist.send(torch.full((3,), 7.0, device="cuda"), dst=world - 1)
    # Uneven all_to_all: rank r sends q + 1 elements to rank q.
    send = torch.cat([torch.full((q + 1,), float(rank), device="cuda") for q in range(world)])
    recv = torch.empty(world * (rank + 1), device="cuda")
    dist.all_to_all_single(
        recv,
        send,
        output_split_sizes=[rank + 1] * world,
        input_split_sizes=[q + 1 for q in range(world)],
    )
    chk.equal(
        "uneven all_to_all",
        recv.cpu(),
        torch.cat([torch.full((rank + 1,), float(r)) for r in range(world)]),
    )
    # A coalesced batch runs on NCCL: on distinct GPUs it runs; where ranks share a GPU NCCL
    # refuses them, a clear ValueError, after which no call is caught in a batch left open.
    # (torch itself keeps the group marked as coalescing after a batch raised, until the next
    # batch ends: the CPU batch comes first.)
    prev = (rank - 1) % world

    def cuda_batch():
        return ring_batch(4, rank, world, device="cuda")

    if shared:
        chk.raises(
            "batch_isend_irecv of CUDA tensors on a shared GPU", cuda_batch, types=(ValueError,)
        )
    else:
        chk.equal(
            "batch_isend_irecv of CUDA tensors (NCCL)",
            cuda_batch().cpu(),
            torch.full((4,), float(prev)),
        )
    chk.equal(
        "CPU batch after the CUDA one", ring_batch(4, rank, world), torch.full((4,), float(prev))
    )
    _check_usable(chk, "CUDA all_reduce after the batches", world)
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((3,)))
def test_calls_without_a_kernel(world_size, placement):
    run_checks(
        _without_kernel,
        world_size,
        shares_a_gpu(world_size, placement),
        min_checks=7,
        timeout=300,
        placement=placement,
    )


def _streams_and_graphs(rank, world):
    chk = Checker(rank)
    n = 4099
    # wait() without a timeout orders the caller's stream after the collective; the future's
    # value is the list of outputs.
    x = _input(torch.float32, n, rank)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    chk.equal("async all_reduce then wait()", (x * 1).cpu(), _sum(torch.float32, n, world))
    value = work.get_future().wait()
    chk.true("future value is a list of tensors", isinstance(value, list) and len(value) == 1)
    # wait(timeout) blocks the host until the GPU finished.
    x = _input(torch.float32, n, rank)
    work = dist.all_reduce(x, async_op=True)
    work.wait(timeout=timedelta(seconds=60))
    chk.true("is_completed() after a host wait", work.is_completed())
    chk.equal("all_reduce after wait(timeout)", x.cpu(), _sum(torch.float32, n, world))
    # Work on a side stream: the collective follows the caller's current stream.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = _input(torch.float32, n, rank) * 3
        dist.all_reduce(y)
        z = y + 1
    torch.cuda.synchronize()
    chk.equal("all_reduce on a side stream", z.cpu(), 3 * _sum(torch.float32, n, world) + 1)
    # CUDA graph capture of all_reduce; each replay reduces the buffer's current contents.
    static = _input(torch.float32, n, rank)
    dist.all_reduce(static)  # the first call sets up the workspace; capture cannot
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static)
    for replay in range(3):
        static.copy_(_input(torch.float32, n, rank) * (replay + 1))
        graph.replay()
        torch.cuda.synchronize()
        chk.equal(
            f"graph replay {replay}", static.cpu(), (replay + 1) * _sum(torch.float32, n, world)
        )
    # Mixed devices are a ValueError before anything runs, and the group stays usable.
    chk.raises(
        "CPU output with a CUDA input",
        lambda: dist.all_gather_into_tensor(torch.empty(world * 4), torch.ones(4, device="cuda")),
        types=(ValueError,),
    )
    _check_usable(chk, "usable after a bad call", world)
    return result(chk)


@pytest.mark.parametrize("world_size,placement", placement_cases((2,)))
@needs_ipc
def test_stream_semantics_and_graph_capture(world_size, placement):
    run_checks(
        _streams_and_graphs, world_size, min_checks=9, timeout=300, placement=placement, env=KERNEL
    )


def _vendor_world_one(rank, world):
    chk = Checker(rank)
    x = torch.arange(100, dtype=torch.float32, device="cuda")
    dist.all_reduce(x)
    chk.equal("NCCL all_reduce at world size 1", x.cpu(), torch.arange(100, dtype=torch.float32))
    x = torch.arange(10, dtype=torch.int64, device="cuda")
    dist.all_reduce(x, op=R.MAX)
    chk.equal("NCCL int64 MAX", x.cpu(), torch.arange(10, dtype=torch.int64))
    # A coalesced batch of CUDA calls runs as one NCCL group; its Work covers them all.
    cuda = torch.device("cuda", torch.cuda.current_device())
    a, b = torch.arange(5.0, device=cuda), torch.arange(7.0, device=cuda) * 2
    with dist._coalescing_manager(device=cuda, async_ops=True) as cm:
        dist.broadcast(a, src=0)
        dist.broadcast(b, src=0)
    cm.wait()
    chk.equal(
        "coalesced broadcasts",
        torch.cat([a, b]).cpu(),
        torch.cat([torch.arange(5.0), torch.arange(7.0) * 2]),
    )
    # A call NCCL cannot run (a bitwise reduction) is refused inside a batch, which is closed;
    # the next batch runs (torch forgets the failed one when the next one ends).
    x = torch.full((4,), 6, dtype=torch.int32, device=cuda)

    def bitwise_in_batch():
        with dist._coalescing_manager(device=cuda, async_ops=True):
            dist.reduce(x, dst=0, op=R.BAND)

    chk.raises(
        "bitwise reduce inside a CUDA batch",
        bitwise_in_batch,
        types=(ValueError,),
        match="coalesced batch",
    )
    c = torch.arange(3.0, device=cuda)
    with dist._coalescing_manager(device=cuda, async_ops=True) as cm:
        dist.broadcast(c, src=0)
    cm.wait()
    chk.equal("a batch after the refused one", c.cpu(), torch.arange(3.0))
    work = dist.all_reduce(x, op=R.BAND, async_op=True)
    chk.true(
        "all_reduce after the batches is issued, not queued by torch",
        type(work).__name__ != "_IllegalWork",
        type(work).__name__,
    )
    work.wait()
    chk.equal("bitwise all_reduce (host route)", x.cpu(), torch.full((4,), 6, dtype=torch.int32))
    return result(chk)


def test_vendor_route_at_world_size_one():
    if not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL")
    run_checks(
        _vendor_world_one,
        1,
        min_checks=7,
        timeout=300,
        placement="shared",
        env={"XCCL_GPU_ALGO": "nccl"},
    )
