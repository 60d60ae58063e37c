"""Backend "xccl" on CUDA tensors: issue order across routes, failure reporting, CUDA graph rules
and world size 1 (docs/gpu.md, "Streams and Work", "CUDA graphs", "Errors"). Skipped without a
CUDA GPU. The decisions behind these (order steps, grid cap, all_to_all evenness) are tested on
CPU in tests/cpp/backend/test_gpu_rules.cc.

With one GPU the ranks share it: the kernel-capable collectives run xccl's kernels and the others
go through host memory, so kernel -> host ordering is what one GPU can show.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

R = dist.ReduceOp
N = 1 << 20  # large enough that an unordered host copy would read the input, not the sum


def _order_and_splits(rank, world):
    torch.cuda.set_device(0)
    chk = Checker(rank)
    # Kernel route (all_reduce) then host route (reduce: no kernel, ranks share the GPU), no wait
    # in between: the reduce must see the all_reduce's result.
    x = torch.full((N,), float(rank + 1), device="cuda")
    dist.all_reduce(x, async_op=True)
    dist.reduce(x, dst=0)
    total = world * (world + 1) / 2
    if rank == 0:
        chk.equal("reduce after an unwaited all_reduce", x.cpu(), torch.full((N,), world * total))
    # all_to_all with explicit equal splits on rank 0 and none elsewhere: one route for all.
    per = 3
    send = torch.arange(world * per, dtype=torch.float32, device="cuda") + 100 * rank
    recv = torch.empty(world * per, device="cuda")
    splits = [per] * world if rank == 0 else None
    dist.all_to_all_single(recv, send, output_split_sizes=splits, input_split_sizes=splits)
    want = torch.cat([torch.arange(rank * per, (rank + 1) * per, dtype=torch.float32) + 100 * r
                      for r in range(world)])
    chk.equal("all_to_all, explicit equal splits on one rank only", recv.cpu(), want)
    return result(chk)


def test_order_across_routes_and_even_splits():
    run_checks(_order_and_splits, 2, min_checks=3, timeout=300)


def _premul_in_graph(rank, world):
    torch.cuda.set_device(0)
    chk = Checker(rank)
    factor = torch.tensor([2.0], device="cuda")
    static = torch.ones(4099, device="cuda")
    op = dist._make_nccl_premul_sum(factor)
    dist.all_reduce(static, op=op)  # sets up the workspace outside the capture
    chk.equal("PREMUL_SUM with a CUDA factor", static.cpu(), torch.full((4099,), 2.0 * world))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static, op=op)
    for value in (3.0, 0.5):
        factor.fill_(value)
        static.fill_(1.0)
        graph.replay()
        torch.cuda.synchronize()
        chk.equal(f"captured PREMUL_SUM reads the factor at replay ({value})", static.cpu(),
                  torch.full((4099,), value * world))
    # An eager call right after a replay, without synchronising: ordered after the replay.
    static.fill_(1.0)
    graph.replay()
    dist.all_reduce(static)
    torch.cuda.synchronize()
    chk.equal("eager all_reduce after an unsynchronised replay", static.cpu(),
              torch.full((4099,), 0.5 * world * world))
    return result(chk)


def test_premul_factor_on_device_in_a_graph():
    if not hasattr(dist, "_make_nccl_premul_sum"):
        pytest.skip("this torch has no PREMUL_SUM")
    run_checks(_premul_in_graph, 2, min_checks=4, timeout=300)


def _failure_is_reported(rank, world):
    torch.cuda.set_device(0)
    chk = Checker(rank)
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)  # both ranks: the workspace exists
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        # Never joins the next all_reduce: rank 0's kernel times out (group timeout 5 s).
        store.wait(["rank0_done"], timedelta(seconds=120))
        return result(chk)
    work = dist.all_reduce(x, async_op=True)
    chk.raises("wait(timeout) on the failed all_reduce",
               lambda: work.wait(timeout=timedelta(seconds=60)),
               types=(dist.DistBackendError,), match="unusable")
    chk.raises("wait() without timeout after the failure", work.wait,
               types=(dist.DistBackendError,), match="unusable")
    chk.raises("is_completed() after the failure", work.is_completed,
               types=(dist.DistBackendError,), match="unusable")
    chk.raises("a later kernel-route call", lambda: dist.all_reduce(x),
               types=(dist.DistBackendError,), match="unusable")
    chk.raises("a later host-route call", lambda: dist.reduce(x, dst=0),
               types=(dist.DistBackendError,), match="unusable")
    store.set("rank0_done", "1")
    return result(chk)


def test_device_failure_is_reported_everywhere():
    run_checks(_failure_is_reported, 2, min_checks=5, timeout=300, pg_timeout=5.0)


def _world_one(rank, world):
    torch.cuda.set_device(0)
    chk = Checker(rank)
    x = torch.arange(10.0, device="cuda")
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(3.0))
    chk.equal("world size 1 PREMUL_SUM scales", x.cpu(), torch.arange(10.0) * 3)
    x = torch.arange(10.0, device="cuda")
    dist.all_reduce(x, op=R.AVG)
    chk.equal("world size 1 AVG is the input", x.cpu(), torch.arange(10.0))
    out = torch.empty(10, device="cuda")
    dist.all_gather_into_tensor(out, torch.arange(10.0, device="cuda"))
    chk.equal("world size 1 all_gather copies", out.cpu(), torch.arange(10.0))
    out = torch.empty(10, device="cuda")
    dist.reduce_scatter_tensor(out, torch.arange(10.0, device="cuda"))
    chk.equal("world size 1 reduce_scatter copies", out.cpu(), torch.arange(10.0))
    return result(chk)


def test_world_size_one_without_the_workspace():
    if not hasattr(dist, "_make_nccl_premul_sum"):
        pytest.skip("this torch has no PREMUL_SUM")
    run_checks(_world_one, 1, min_checks=4, timeout=300)
