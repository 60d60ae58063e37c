"""FSDP2 with communication buffers allocated by the backend
(`set_allocate_memory_from_process_group_for_comm(True)`): xccl hands out CPU tensors in its
shared-memory pool and reads them in place in all_gather / reduce_scatter (docs/shm.md, "Tensors
in the pool"). Training equals gloo's; the memory stats show the zero-copy path ran and staged
fewer bytes than without the pool; pool tensors are reused, a full pool falls back to ordinary
memory, an unserved device is a ValueError, and collectives with the inputs in the pool on only
some ranks are still exact."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, checks_test, result, run
from train_steps import seeded_batches, sgd_losses

STEPS = 3
LR = 0.1


def _shm(*worlds) -> list:
    """checks_test cases on shared memory (the only transport with a pool)."""
    return [pytest.param(w, "shm", id=str(w)) for w in worlds]


def _backend():
    return dist.group.WORLD._get_backend(torch.device("cpu"))


def _stats() -> dict[str, int]:
    return dict(_backend().memory_stats())


def _model() -> torch.nn.Module:
    torch.manual_seed(4321)  # the same initial weights on every rank and for every copy
    return torch.nn.Sequential(
        torch.nn.Linear(16, 48), torch.nn.Tanh(), torch.nn.Linear(48, 24), torch.nn.Linear(24, 4)
    )


def _train(group, allocate: bool, rank: int):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    model = _model()
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_allocate_memory_from_process_group_for_comm(allocate)
    losses = sgd_losses(model, seeded_batches(STEPS, lambda step: 100 * step + rank, 8, 16, 4), LR)
    return losses, [p.full_tensor().detach().clone() for p in model.parameters()]


def _fsdp(rank, world):
    chk = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    before = _stats()
    plain = _train(dist.group.WORLD, False, rank)
    middle = _stats()
    pooled = _train(dist.group.WORLD, True, rank)
    after = _stats()
    reference = _train(gloo, False, rank)
    for name, (losses, params) in (("pool", pooled), ("ordinary", plain)):
        chk.close(f"losses xccl ({name} buffers) vs gloo", losses, reference[0], 1e-5, 1e-6)
        chk.close(f"parameters xccl ({name} buffers) vs gloo", params, reference[1], 1e-5, 1e-6)
    initial = list(_model().parameters())
    chk.true(
        "training moved the weights",
        any(not torch.allclose(p, q) for p, q in zip(pooled[1], initial)),
    )

    def delta(key, start, end):
        return end[key] - start[key]

    chk.true("no zero copy without the pool", delta("shm_bytes_direct", before, middle) == 0)
    direct = delta("shm_bytes_direct", middle, after)
    chk.true("peers' pool buffers were read in place", direct > 0, f"stats {after}")
    chk.true("this rank's inputs were in its pool", delta("shm_direct_calls", middle, after) > 0)
    staged_plain = delta("shm_bytes_staged", before, middle)
    staged_pool = delta("shm_bytes_staged", middle, after)
    chk.true(
        "the pool staged fewer bytes through the slots",
        staged_pool < staged_plain,
        f"{staged_pool} with the pool vs {staged_plain} without",
    )
    chk.true(
        "pool buffers came from the pool", after["pool_allocations"] > before["pool_allocations"]
    )
    return result(chk)


@pytest.mark.parametrize("world_size", (2, 4))
def test_fsdp2_with_backend_buffers_matches_gloo(world_size):
    values = run(_fsdp, world_size, timeout=240, transport="shm")
    failures = [f"rank {rank}: {f}" for rank, (fs, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert all(checks >= 10 for _, checks in values)


@checks_test(cases=_shm(2), min_checks=8)
def test_allocate_reuse_and_unserved_device(chk, rank, world):
    backend = _backend()
    chk.true("CPU allocation is supported", backend.supports_tensor_alloc(torch.device("cpu")))
    chk.true("CUDA allocation is not", not backend.supports_tensor_alloc(torch.device("cuda", 0)))
    chk.raises(
        "CUDA allocation is a ValueError",
        lambda: backend.allocate_tensor(16, dtype=torch.float32, device=torch.device("cuda", 0)),
        types=ValueError,
        match="CPU",
    )
    start = _stats()
    a = backend.allocate_tensor(1000, dtype=torch.float32, device=torch.device("cpu"))
    chk.equal("shape and dtype", (tuple(a.shape), a.dtype), ((1000,), torch.float32))
    address = a.data_ptr()
    a.fill_(rank + 1)
    chk.true("in use while alive", _stats()["pool_bytes_in_use"] >= 4000)
    del a
    chk.equal(
        "freed when the tensor dies", _stats()["pool_bytes_in_use"], start["pool_bytes_in_use"]
    )
    b = backend.allocate_tensor(500, dtype=torch.bfloat16, device=torch.device("cpu"))
    chk.equal("the freed block is reused", b.data_ptr(), address)
    chk.equal("allocations counted", _stats()["pool_allocations"], start["pool_allocations"] + 2)
    chk.true("nothing fell back", _stats()["pool_fallbacks"] == start["pool_fallbacks"])


def _exhaustion(rank, world):
    chk = Checker(rank)
    backend = _backend()
    stats = _stats()
    chk.equal("pool size from XCCL_SHM_POOL_BYTES", stats["pool_bytes"], 64 * 1024)
    big = backend.allocate_tensor(12 * 1024, dtype=torch.float32, device=torch.device("cpu"))
    extra = backend.allocate_tensor(8 * 1024, dtype=torch.float32, device=torch.device("cpu"))
    after = _stats()
    chk.equal(
        "the second allocation fell back", after["pool_fallbacks"], stats["pool_fallbacks"] + 1
    )
    chk.equal("and was counted as a full pool", after["pool_full"], stats["pool_full"] + 1)
    # Both still work as collective buffers: the pool one in place, the ordinary one staged.
    for t in (big, extra):
        t.copy_(torch.arange(t.numel(), dtype=torch.float32) * (rank + 1))
        out = torch.empty(t.numel() // world)
        dist.reduce_scatter_tensor(out, t)
        expected = torch.arange(t.numel(), dtype=torch.float32).chunk(world)[rank] * (
            world * (world + 1) // 2
        )
        chk.equal(f"reduce_scatter of {t.numel()} elements", out, expected)
    return result(chk)


def test_full_pool_falls_back_to_ordinary_memory():
    values = run(_exhaustion, 2, transport="shm", env={"XCCL_SHM_POOL_BYTES": str(64 * 1024)})
    failures = [f"rank {rank}: {f}" for rank, (fs, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)


def _part(rank: int, n: int, dtype) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float64) % 97 + 1000 * rank).to(dtype)


def _block(rank: int, block: int, n: int, dtype) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float64) % 31 + 40 * rank + block).to(dtype)


# 64 KiB slots: the larger case spans several slots, so the staged ranks pipeline.
@checks_test(cases=_shm(2, 3, 4), min_checks=8, env={"XCCL_SHM_SLOT_BYTES": "65536"})
def test_mixed_placement_is_exact(chk, rank, world):
    backend = _backend()
    cpu = torch.device("cpu")
    for placement in range(1 << world):
        in_pool = bool(placement >> rank & 1)
        for n, dtype in ((7, torch.float32), (100_000, torch.bfloat16)):  # one slot and several
            if in_pool:
                out = backend.allocate_tensor(world * n, dtype=dtype, device=cpu)
                mine = out[rank * n : (rank + 1) * n]  # FSDP2's layout: input inside the output
            else:
                out, mine = torch.empty(world * n, dtype=dtype), torch.empty(n, dtype=dtype)
            mine.copy_(_part(rank, n, dtype))
            dist.all_gather_into_tensor(out, mine)
            expected = torch.cat([_part(r, n, dtype) for r in range(world)])
            chk.equal(f"all_gather placement {placement} n {n}", out, expected)

            full = backend.allocate_tensor(world * n, dtype=dtype, device=cpu) if in_pool else None
            full = torch.empty(world * n, dtype=dtype) if full is None else full
            # Block b of rank r holds part(r) + b; small integers, so every sum is exact in fp32,
            # where xccl accumulates, and rounds once to the dtype.
            full.copy_(torch.cat([_block(rank, b, n, dtype) for b in range(world)]))
            reduced = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(reduced, full)
            sums = sum(_block(r, rank, n, dtype).float() for r in range(world))
            chk.equal(f"reduce_scatter placement {placement} n {n}", reduced, sums.to(dtype))


def test_fsdp_benchmark_reports_the_pool_staging_nothing():
    """`python -m xccl.bench.fsdp` at toy sizes: every row, and no staged byte with the pool."""
    import os
    import subprocess
    import sys

    import xccl

    # The subprocess imports the xccl this test runs with, and starts its own ranks.
    environ = {**os.environ, "OMP_NUM_THREADS": "1"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(xccl.__file__)))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, environ.get("PYTHONPATH")]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        environ.pop(name, None)
    argv = ["--ranks", "2", "--numel", "4096", "--reps", "1", "--width", "32", "--steps", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "xccl.bench.fsdp", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line[:36].strip(): line[36:].split() for line in done.stdout.splitlines()[2:]}
    assert len(rows) == 4, done.stdout
    for name, (ms, staged, direct) in rows.items():
        pooled = name.endswith("pool")
        assert float(ms) > 0, done.stdout
        assert (float(staged) == 0) == pooled and (float(direct) > 0) == pooled, done.stdout
