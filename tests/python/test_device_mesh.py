"""DeviceMesh and DTensor on backend "xccl": a 2 x 2 mesh ("dp" x "tp") on 4 CPU ranks.

Each case builds the mesh twice in one job, once on xccl (the default group's backend) and once
with every dimension overridden to gloo, and runs the same work on both: DTensor placements and
redistributions (all-gather, all-to-all, reduce and reduce-scatter along one mesh dimension)
must equal an exact reference computed from the global tensor, and FSDP2 + tensor-parallel
training must match gloo's losses and weights. The mesh's per-dimension groups also run plain
collectives, subgroups made from them with new_group, and splits of them.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from collective_cases import Op, rank_input
from dist_harness import Checker, result, run_checks
from train_steps import seeded_batches, sgd_losses

WORLD = 4
SHAPE = (2, 2)
NAMES = ("dp", "tp")
CPU = torch.device("cpu")


def _meshes(chk: Checker) -> dict:
    """The xccl mesh and the same mesh on gloo, after checking which backend each dimension uses."""
    import xccl
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {
        "xccl": init_device_mesh("cpu", SHAPE, mesh_dim_names=NAMES),
        "gloo": init_device_mesh(
            "cpu", SHAPE, mesh_dim_names=NAMES, backend_override={n: "gloo" for n in NAMES}
        ),
    }
    for name in NAMES:
        backend = meshes["xccl"][name].get_group()._get_backend(CPU)
        chk.true(
            f"mesh dim {name} runs on ProcessGroupXccl",
            isinstance(backend, xccl.ProcessGroupXccl),
            repr(backend),
        )
        chk.equal(
            f"gloo mesh dim {name}", dist.get_backend(meshes["gloo"][name].get_group()), "gloo"
        )
    return meshes


def _global(rows: int = 8, cols: int = 6) -> torch.Tensor:
    # Integer-valued floats: every sum below is exact whatever order a backend adds in.
    return torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) - 7


def _dtensor_body(rank, world):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    chk = Checker(rank)
    meshes = _meshes(chk)
    full = _global()
    dp, tp = divmod(rank, SHAPE[1])  # this rank's coordinate: mesh[dp][tp] == rank
    for name, mesh in meshes.items():
        chk.equal(f"{name}: coordinate", list(mesh.get_coordinate()), [dp, tp])
        # Shard(0) over dp, Replicate over tp: each dp row holds half the rows.
        d = distribute_tensor(full, mesh, [Shard(0), Replicate()])
        chk.equal(f"{name}: Shard(0),Replicate local", d.to_local(), full.chunk(2, 0)[dp])
        # Shard(0) over dp and Shard(1) over tp: a quarter each.
        d2 = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
        chk.equal(
            f"{name}: Shard(0),Shard(1) local",
            d2.to_local(),
            full.chunk(2, 0)[dp].chunk(2, 1)[tp],
        )
        # Shard(0) -> Replicate on dp only: an all-gather along the dp dimension.
        gathered = d2.redistribute(mesh, [Replicate(), Shard(1)])
        chk.equal(f"{name}: all-gather along dp", gathered.to_local(), full.chunk(2, 1)[tp])
        # Shard(0) -> Shard(1) on dp: an all-to-all along dp.
        moved = d.redistribute(mesh, [Shard(1), Replicate()])
        chk.equal(f"{name}: Shard(0)->Shard(1) along dp", moved.to_local(), full.chunk(2, 1)[dp])
        chk.equal(f"{name}: full_tensor", moved.full_tensor(), full)
        # Partial over tp: each tp rank holds a different addend; Partial -> Replicate is an
        # all-reduce along tp, Partial -> Shard(0) a reduce-scatter along tp.
        part = full * (tp + 1) + dp
        partial = DTensor.from_local(part, mesh, [Replicate(), Partial()], run_check=False)
        summed = full * 3 + 2 * dp  # (tp=0: full + dp) + (tp=1: 2*full + dp)
        chk.equal(
            f"{name}: Partial->Replicate along tp",
            partial.redistribute(mesh, [Replicate(), Replicate()]).to_local(),
            summed,
        )
        chk.equal(
            f"{name}: Partial->Shard(0) along tp",
            partial.redistribute(mesh, [Replicate(), Shard(0)]).to_local(),
            summed.chunk(2, 0)[tp],
        )
        avg = DTensor.from_local(
            part, mesh, [Replicate(), Partial("avg")], run_check=False
        ).full_tensor()
        chk.equal(f"{name}: Partial(avg) full_tensor", avg, summed / 2)
    return result(chk)


def test_dtensor_redistribute_on_2d_mesh():
    run_checks(_dtensor_body, WORLD, timeout=240, min_checks=20)


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4321)  # the same initial weights on every rank and for both backends
        self.up = torch.nn.Linear(12, 16)
        self.down = torch.nn.Linear(16, 6)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


STEPS = 3


def _train_2d(mesh, dp: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    model = _Mlp()
    parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    # The same batches on both tp ranks of a dp row (TP's contract), different per dp row.
    batches = seeded_batches(STEPS, lambda step: 100 * step + dp, 5, 12, 6)
    losses = sgd_losses(model, batches, 0.05)
    return losses, [p.full_tensor().detach().clone() for p in model.parameters()]


def _fsdp_tp_body(rank, world):
    chk = Checker(rank)
    meshes = _meshes(chk)
    dp = rank // SHAPE[1]
    trained = {name: _train_2d(mesh, dp) for name, mesh in meshes.items()}
    (x_losses, x_params), (g_losses, g_params) = trained["xccl"], trained["gloo"]
    # Two addends per reduction: a + b == b + a, so the order a backend sums in cannot matter.
    chk.close("losses xccl vs gloo", x_losses, g_losses, 1e-6, 1e-7)
    chk.close("parameters xccl vs gloo", x_params, g_params, 1e-6, 1e-7)
    initial = list(_Mlp().parameters())
    chk.true(
        "training moved the weights",
        any(not torch.allclose(p, q.detach()) for p, q in zip(x_params, initial)),
    )
    chk.true("losses are finite", bool(torch.isfinite(x_losses).all()))
    return result(chk)


def test_fsdp2_with_tensor_parallel_matches_gloo():
    run_checks(_fsdp_tp_body, WORLD, timeout=300, min_checks=6)


def _groups_body(rank, world):
    import xccl

    chk = Checker(rank)
    meshes = _meshes(chk)
    mesh = meshes["xccl"]
    for dim, name in enumerate(NAMES):
        group = mesh[name].get_group()
        members = mesh.mesh.movedim(dim, -1).reshape(-1, SHAPE[dim])  # one row per group
        row = next(r.tolist() for r in members if rank in r.tolist())
        chk.equal(f"{name}: group ranks", dist.get_process_group_ranks(group), row)
        chk.equal(f"{name}: local rank", mesh.get_local_rank(name), row.index(rank))
        x = rank_input(torch.float32, 1001, rank)
        dist.all_reduce(x, group=group)
        chk.equal(
            f"{name}: all_reduce",
            x,
            Op("SUM").reference([rank_input(torch.float32, 1001, r) for r in row], torch.float32),
        )
        out = [torch.empty(5, dtype=torch.int64) for _ in row]
        dist.all_gather(out, rank_input(torch.int64, 5, rank), group=group)
        chk.equal(
            f"{name}: all_gather",
            torch.stack(out),
            torch.stack([rank_input(torch.int64, 5, r) for r in row]),
        )
        b = rank_input(torch.int32, 9, rank)
        dist.broadcast(b, group=group, group_src=1)
        chk.equal(f"{name}: broadcast from group rank 1", b, rank_input(torch.int32, 9, row[1]))
        # new_group over the same ranks, made by every rank for every row (new_group's contract).
        sub = {tuple(r.tolist()): dist.new_group(r.tolist()) for r in members}[tuple(row)]
        chk.equal(f"{name}: new_group backend", dist.get_backend(sub), "xccl")
        y = rank_input(torch.float64, 33, rank)
        dist.all_reduce(y, op=dist.ReduceOp.MAX, group=sub)
        chk.equal(
            f"{name}: new_group all_reduce MAX",
            y,
            Op("MAX").reference([rank_input(torch.float64, 33, r) for r in row], torch.float64),
        )
        # A split of the dimension's group into singletons, then one keeping both in reverse.
        # torch.distributed.split_group refuses on CPU (it needs an accelerator), so through
        # the ProcessGroup binding, as test_collectives_groups.py does.
        alone = group.split_group([dist.get_group_rank(group, rank)], timeout=timedelta(seconds=60))
        chk.equal(f"{name}: singleton split size", alone.size() if alone else None, 1)
        flipped = group.split_group([1, 0], timeout=timedelta(seconds=60))
        chk.true(
            f"{name}: split backend is ProcessGroupXccl",
            isinstance(flipped._get_backend(CPU), xccl.ProcessGroupXccl),
        )
        z = torch.empty(2 * 3, dtype=torch.int64)
        flipped._allgather_base(z, rank_input(torch.int64, 3, rank)).wait()
        order = sorted(row) if flipped.rank() == row.index(rank) else list(reversed(row))
        chk.equal(
            f"{name}: split all_gather follows the child's rank order",
            z,
            torch.cat([rank_input(torch.int64, 3, r) for r in order]),
        )
    return result(chk)


def test_mesh_dimension_groups_new_group_and_split():
    run_checks(_groups_body, WORLD, timeout=240, min_checks=20)
