"""Large collectives over shared memory with the single-copy path (process_vm_readv, docs/shm.md
"Single copy between processes") on (from 1 MiB, XCCL_SHM_CMA_MIN_BYTES) and off
(XCCL_SHM_CMA=0): exact results for integer-valued data, the same bytes both ways for random
bf16/fp32 data, and the memory stats prove which path ran (`shm_bytes_cma`). With no setting the
built-in thresholds per collective choose (all_reduce from 1 MiB, all_gather from 256 KiB,
broadcast and reduce never); a value per collective and the refusals of bad values."""

from __future__ import annotations

import hashlib
from functools import partial

import pytest
import torch
import torch.distributed as dist
from dist_harness import run, spawn

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


def _cma_read() -> int:
    stats = dict(dist.group.WORLD._get_backend(torch.device("cpu")).memory_stats())
    return stats["shm_bytes_cma"]


def _created(rank: int, world: int) -> int:
    return _cma_read()


def _paths(rank: int, world: int):
    """{(collective, bytes): (bytes read from peers' memory, result exact)} for this rank."""
    paths = {}

    def measure(key, call, got, expected):
        before = _cma_read()
        call()  # a partial: no closure over the loop's tensors
        paths[key] = (_cma_read() - before, bool(torch.equal(got, expected)))

    for size in (512 << 10, 1 << 20):
        data = _input(rank, torch.float32, size // 4, 21)
        expected = sum(_input(r, torch.float32, size // 4, 21) for r in range(world))
        measure(("all_reduce", size), partial(dist.all_reduce, data), data, expected)
        rooted = _input(rank, torch.float32, size // 4, 22)
        # Only the root's buffer is defined after a reduce: the others compare it with itself.
        expected = sum(_input(r, torch.float32, size // 4, 22) for r in range(world))
        measure(
            ("reduce", size),
            partial(dist.reduce, rooted, dst=0),
            rooted,
            expected if rank == 0 else rooted,
        )
        data = _input(rank, torch.float32, size // 4, 23)
        expected = _input(0, torch.float32, size // 4, 23)
        measure(("broadcast", size), partial(dist.broadcast, data, src=0), data, expected)
    for size in (128 << 10, 256 << 10):  # all_gather: the output, at least `size` bytes
        count = (size // 4 + world - 1) // world
        part = _input(rank, torch.float32, count, 24)
        out = torch.empty(world * count)
        expected = torch.cat([_input(r, torch.float32, count, 24) for r in range(world)])
        measure(
            ("all_gather", size), partial(dist.all_gather_into_tensor, out, part), out, expected
        )
    return paths


@pytest.mark.parametrize("world", [2, 3])
def test_the_default_takes_the_single_copy_per_collective(world):
    """No XCCL_SHM_CMA* set: all_reduce from 1 MiB, all_gather from 256 KiB, never broadcast or
    reduce; every result exact."""
    for rank, paths in enumerate(run(_paths, world, transport="shm")):
        for key, (_, exact) in paths.items():
            assert exact, f"rank {rank} {key}: wrong result"
        assert paths[("all_reduce", 1 << 20)][0] > 0, f"rank {rank}: 1 MiB all_reduce took slots"
        assert paths[("all_reduce", 512 << 10)][0] == 0, f"rank {rank}: 512 KiB single copy"
        assert paths[("all_gather", 256 << 10)][0] > 0, f"rank {rank}: 256 KiB all_gather slots"
        assert paths[("all_gather", 128 << 10)][0] == 0, f"rank {rank}: 128 KiB single copy"
        for size in (512 << 10, 1 << 20):
            assert paths[("broadcast", size)][0] == 0, f"rank {rank}: broadcast single copy"
            assert paths[("reduce", size)][0] == 0, f"rank {rank}: reduce single copy"


def test_one_collective_set_and_the_opt_out():
    """A value per collective moves only that collective; XCCL_SHM_CMA=0 turns every one off."""
    per = run(
        _paths,
        2,
        transport="shm",
        env={"XCCL_SHM_CMA_MIN_BYTES": "all_reduce=never,broadcast=1048576"},
    )
    off = run(_paths, 2, transport="shm", env={"XCCL_SHM_CMA": "0"})
    for rank in range(2):
        assert per[rank][("all_reduce", 1 << 20)][0] == 0, rank
        assert per[rank][("broadcast", 1 << 20)][0] > 0 or rank == 0, rank  # the root reads none
        assert per[rank][("broadcast", 512 << 10)][0] == 0, rank
        assert per[rank][("all_gather", 256 << 10)][0] > 0, rank  # its default stays
        for key, (read, exact) in off[rank].items():
            assert exact and read == 0, f"XCCL_SHM_CMA=0 rank {rank} {key}: {read} bytes read"


@pytest.mark.parametrize(
    "value, why",
    [
        ("all_reduce=1x", "not an integer or never"),
        ("gather=1048576", "not a list of collective=bytes"),
        ("all_reduce=1,all_reduce=2", "a collective named twice"),
        ("99999999999999999999", "not an integer or never"),
        ("2199023255552", "above the maximum"),
    ],
)
def test_bad_values_are_refused_at_group_creation(value, why):
    outcomes = spawn(_created, 2, transport="shm", env={"XCCL_SHM_CMA_MIN_BYTES": value})
    for outcome in outcomes:
        assert outcome.error is not None, outcome.describe()
        assert f"XCCL_SHM_CMA_MIN_BYTES='{value}' is invalid ({why})" in outcome.error, (
            outcome.describe()
        )
