"""What a GPU call hands out (issue 22): a kernel-route call follows every vendor call issued
before it, and a PREMUL_SUM factor on the device is never read on the host (a call that fails
while it runs raises in its own wait(): test_gpu_hardening.py, which benchmarks/device_check.sh
runs on one GPU). The GPU tests skip without a CUDA GPU and need one GPU per rank (the vendor
route): on one GPU they are not collected; the source rules below run everywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks
from test_gpu import _input, _sum, placement_cases

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SMALL = 1024  # elements: inside every fabric's one-shot kernel limit (docs/algorithms.md)
BIG = 16 << 20  # int32 elements (64 MiB): a vendor call still running when the next is issued
ROUNDS = 10
GPU_SOURCES = Path(__file__).resolve().parents[2] / "csrc" / "backend" / "gpu"


def _spread_only(worlds):
    """The vendor route needs one GPU per rank: with the gpus(2) mark, not collected on a
    machine with one GPU (conftest.py), where this list is empty."""
    return [case for case in placement_cases(worlds) if case.values[1] == "spread"]


def test_gpu_side_never_reads_a_premul_factor_on_the_host():
    # toReduceSpec reads PREMUL_SUM's factor with .item(): on a CUDA factor that is a device
    # sync (and an error under graph capture). The GPU side decides routes with reduceOpOf and
    # reads factors with toGpuReduce, which keeps a CUDA factor on the device.
    calls = {
        f"{path.name}:{n}": line.strip()
        for path in sorted(GPU_SOURCES.glob("*.cc"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\btoReduceSpec\s*\(", line)
    }
    assert not calls, f"the GPU side reads PREMUL_SUM factors on the host: {calls}"


def test_gpu_side_queries_events_only_beside_a_capture():
    # An event or stream query (or synchronize) from a thread other than the capturing one, in
    # the default global capture mode, is refused and breaks the capture: every one goes
    # through rules::queryBesideCapture (thread-local mode), as CudaEvent::query does.
    lines = {path.name: path.read_text().splitlines() for path in sorted(GPU_SOURCES.glob("*.cc"))}
    unguarded = [
        f"{name}:{n}: {line.strip()}"
        for name, text in lines.items()
        for n, line in enumerate(text, 1)
        if re.search(r"XCCL_RT\((Event|Stream)(Query|Synchronize)\)", line)
        and "queryBesideCapture" not in " ".join(text[max(0, n - 2) : n])
    ]
    assert not unguarded, f"queries that can break another thread's graph capture: {unguarded}"


def _vendor_then_p2p_then_kernel(rank, world):
    """A long vendor reduce, a short vendor send/recv (another NCCL stream), then a kernel-route
    broadcast of the reduce's output, no wait between: the broadcast must see the reduced
    values, not rank 0's input."""
    chk = Checker(rank)
    token = torch.zeros(8, device="cuda")
    for i in range(ROUNDS + 1):  # round 0 creates NCCL's communicators
        z = torch.full((BIG,), rank + 1 + i, dtype=torch.int32, device="cuda")
        dist.reduce(z, dst=0, async_op=True)  # vendor: int32 has no kernel
        if rank == 0:
            dist.send(token, dst=1)
        elif rank == 1:
            dist.recv(token, src=0)
        head = z[:SMALL].view(torch.float32)
        dist.broadcast(head, src=0)  # kernel route: reads rank 0's z after the reduce
        want = sum(r + 1 + i for r in range(world))
        chk.equal(
            f"round {i}: broadcast after reduce and send/recv",
            head.view(torch.int32).cpu(),
            torch.full((SMALL,), want, dtype=torch.int32),
        )
    return result(chk)


@needs_gpu
@pytest.mark.gpus(2)
@pytest.mark.parametrize("world_size,placement", _spread_only((2,)))
def test_kernel_call_follows_every_earlier_vendor_call(world_size, placement):
    run_checks(
        _vendor_then_p2p_then_kernel,
        world_size,
        min_checks=ROUNDS,
        timeout=240,
        placement=placement,
        env={"XCCL_GPU_ALGO": "kernel"},
    )


def _premul_factor_on_device(rank, world):
    """The vendor-route reductions with a CUDA factor run without a device sync (torch's sync
    debug mode raises on one, as .item() on the factor was)."""
    chk = Checker(rank)
    factor = torch.tensor(2.0, device="cuda")
    op = dist._make_nccl_premul_sum(factor)
    want = 2 * _sum(torch.float32, SMALL, world)

    def reduce():
        x = _input(torch.float32, SMALL, rank)
        dist.reduce(x, dst=0, op=op)
        return x if rank == 0 else None

    def coalesced():
        xs = [_input(torch.float32, SMALL, rank) for _ in range(2)]
        dist.all_reduce_coalesced(xs, op=op)
        return xs[1]

    def listed():
        out = torch.empty(SMALL, device="cuda")
        dist.reduce_scatter(out, [_input(torch.float32, SMALL, rank) for _ in range(world)], op=op)
        return out

    for name, call in (
        ("reduce", reduce),
        ("allreduce_coalesced", coalesced),
        ("reduce_scatter (list)", listed),
    ):
        call()  # eager, sync debug off: NCCL's communicator is created here
        torch.cuda.set_sync_debug_mode("error")
        out, synced = None, None
        try:
            out = call()
        except RuntimeError as e:
            synced = e
        finally:
            torch.cuda.set_sync_debug_mode("default")
        chk.true(f"{name} with a CUDA factor, no device sync", synced is None, str(synced)[:300])
        if out is not None:
            chk.equal(f"{name} with a CUDA factor", out.cpu(), want)
    return result(chk)


@needs_gpu
@pytest.mark.gpus(2)
@pytest.mark.parametrize("world_size,placement", _spread_only((2,)))
def test_premul_sum_cuda_factor_needs_no_device_sync(world_size, placement):
    run_checks(_premul_factor_on_device, world_size, min_checks=3, timeout=180, placement=placement)
