"""PyTorch Lightning's DDP over the xccl backend on CPU (docs/training.md, "Lightning").

    torchrun --nproc-per-node 2 examples/lightning_ddp.py [--steps 4]

`DDPStrategy(process_group_backend="xccl")` is all it takes: Lightning passes the name to
`init_process_group`, which finds xccl registered (at `import torch`, by xccl's entry point).
Each rank trains on its own shard; the script checks that every rank ends with the same weights
and that the group served on xccl.
"""

import argparse
import os

import lightning as L
import torch
import torch.distributed as dist
import torch.nn as nn
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch, _index):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    data = torch.Generator().manual_seed(1234)
    x = torch.randn(256, 16, generator=data)
    points = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    L.seed_everything(0, verbose=False)
    model = Regression()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),  # as many as torchrun starts
        strategy=DDPStrategy(process_group_backend="xccl"),
        max_steps=args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, points)  # Lightning shards the loader with a DistributedSampler

    rank, world = dist.get_rank(), dist.get_world_size()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    if not torch.equal(flat, reference):
        raise SystemExit(f"rank {rank}: parameters diverged from rank 0")
    if rank == 0:
        print(
            f"done: {world} ranks, {trainer.strategy.__class__.__name__} on backend "
            f"'{dist.get_backend()}', {trainer.global_step} steps, parameters identical"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
