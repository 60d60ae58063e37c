"""Large collectives over shared memory with the single-copy path (process_vm_readv, docs/shm.md
"Single copy between processes") on (from 1 MiB, XCCL_SHM_CMA_MIN_BYTES) and off
(XCCL_SHM_CMA=0): exact results for integer-valued data, the same bytes both ways for random
bf16/fp32 data, and the memory stats prove which path ran (`shm_bytes_cma`)."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torch.distributed as dist
from dist_harness import run

COUNT = (4 << 20) // 4 + 37  # just over 4 MiB of float32: above the default threshold, odd


def _input(rank: int, dtype: torch.dtype, count: int, salt: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.int64 or salt < 10:  # integer values: every sum is exact in fp32
        return torch.randint(-100, 100, (count,), generator=generator).to(dtype)
    return torch.randn(count, generator=generator).to(dtype)


def _collectives(rank: int, world: int):
    failures = []
    digest = hashlib.sha256()

    def check(name, got, expected):
        if not torch.equal(got, expected):
            failures.append(f"{name}: {(got != expected).sum().item()} elements differ")

    # Exact: all_reduce SUM, all_gather, reduce_scatter SUM, broadcast of integer-valued floats.
    data = _input(rank, torch.float32, COUNT, 1)
    dist.all_reduce(data)
    check("all_reduce", data, sum(_input(r, torch.float32, COUNT, 1) for r in range(world)))
    part = _input(rank, torch.float32, COUNT // world, 2)
    gathered = torch.empty(world * part.numel())
    dist.all_gather_into_tensor(gathered, part)
    expected = torch.cat([_input(r, torch.float32, COUNT // world, 2) for r in range(world)])
    check("all_gather", gathered, expected)
    blocks = _input(rank, torch.float32, world * (COUNT // world), 3)
    mine = torch.empty(COUNT // world)
    dist.reduce_scatter_tensor(mine, blocks)
    total = sum(_input(r, torch.float32, world * (COUNT // world), 3) for r in range(world))
    check("reduce_scatter", mine, total.view(world, -1)[rank])
    data = _input(rank, torch.float32, COUNT, 4)
    dist.broadcast(data, src=world - 1)
    check("broadcast", data, _input(world - 1, torch.float32, COUNT, 4))
    # Rounding-sensitive: the bytes must not depend on the path (compared across runs).
    for dtype, op in ((torch.bfloat16, dist.ReduceOp.SUM), (torch.float32, dist.ReduceOp.AVG)):
        data = _input(rank, dtype, COUNT, 11)
        dist.all_reduce(data, op=op)
        digest.update(data.view(torch.uint8).numpy().tobytes())
        out = torch.empty(COUNT // world, dtype=dtype)
        dist.reduce_scatter_tensor(out, _input(rank, dtype, world * (COUNT // world), 12), op=op)
        digest.update(out.view(torch.uint8).numpy().tobytes())
    stats = dict(dist.group.WORLD._get_backend(torch.device("cpu")).memory_stats())
    return failures, digest.hexdigest(), stats["shm_bytes_cma"]


@pytest.mark.parametrize("world", [2, 3])
def test_large_collectives_equal_with_and_without_single_copy(world):
    runs = {}
    for cma in ("1", "0"):
        env = {"XCCL_SHM_CMA": cma, "XCCL_SHM_CMA_MIN_BYTES": str(1 << 20)}
        runs[cma] = run(_collectives, world, transport="shm", env=env)
        for rank, (failures, _, _) in enumerate(runs[cma]):
            assert not failures, f"XCCL_SHM_CMA={cma} rank {rank}: {failures}"
    for rank in range(world):
        assert runs["1"][rank][2] > 0, f"rank {rank}: the single-copy path was not taken"
        assert runs["0"][rank][2] == 0, f"rank {rank}: XCCL_SHM_CMA=0 still read peers' memory"
        assert runs["1"][rank][1] == runs["0"][rank][1], f"rank {rank}: results differ in bytes"
