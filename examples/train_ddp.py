"""Trains a small model with DistributedDataParallel over the xccl backend on CPU.

    torchrun --nproc-per-node 4 examples/train_ddp.py

Each rank sees different data; DDP averages gradients with xccl's all_reduce, so every rank
ends with the same parameters, which the script checks before it exits.
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import xccl  # noqa: F401  (registers backend="xccl"; automatic once installed, explicit is clearer)
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    dist.init_process_group(backend="xccl")  # rank and world size come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1234 + rank)  # each rank its own shard

    for step in range(args.steps):
        x = torch.randn(args.batch, 32, generator=data)
        y = x.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)

    # Every rank must hold identical parameters: compare against rank 0's.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    if not torch.equal(flat, reference):
        raise SystemExit(f"rank {rank}: parameters diverged from rank 0")
    if rank == 0:
        print(f"done: {world} ranks on backend '{dist.get_backend()}', parameters identical")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
