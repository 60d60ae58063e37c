"""A Hugging Face Trainer on CPU over the xccl backend (docs/training.md, "Hugging Face").

    torchrun --nproc-per-node 2 examples/hf_trainer_cpu.py [--steps 4]

accelerate, which the Trainer runs on, takes the name "xccl" for Intel's XPU backend: with
`TrainingArguments(use_cpu=True, ddp_backend="xccl")` it refuses ("Your assigned backend xccl is
not available, please use gloo"). Creating the process group first, and leaving `ddp_backend`
unset, works: accelerate keeps a group that exists, and the Trainer's DistributedDataParallel
runs on it. Each rank trains on its own shard; the script checks that every rank ends with the
same weights (DDP averaged the gradients) and that they served on xccl.
"""

import argparse
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class Regression(nn.Module):
    """A model the Trainer accepts: forward takes the batch's fields and returns the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x, labels=None):
        out = self.net(x)
        loss = nn.functional.mse_loss(out, labels) if labels is not None else None
        return {"loss": loss, "logits": out}


class Points(Dataset):
    def __init__(self, count: int) -> None:
        data = torch.Generator().manual_seed(1234)
        self.x = torch.randn(count, 16, generator=data)
        self.y = self.x.sum(dim=1, keepdim=True)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    # First, before TrainingArguments: accelerate then uses this group instead of making one.
    dist.init_process_group("xccl")  # rank and world size come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out,
            use_cpu=True,  # and no ddp_backend: the group above decides
            per_device_train_batch_size=8,
            max_steps=args.steps,
            learning_rate=1e-2,
            save_strategy="no",
            report_to=[],
            ddp_find_unused_parameters=False,
            disable_tqdm=True,
        )
        trainer = Trainer(model=Regression(), args=training, train_dataset=Points(256))
        trainer.train()

    wrapped = trainer.model_wrapped  # DistributedDataParallel around the model
    backend = dist.get_backend(getattr(wrapped, "process_group", None))
    flat = torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    if not torch.equal(flat, reference):
        raise SystemExit(f"rank {rank}: parameters diverged from rank 0")
    if rank == 0:
        print(
            f"done: {world} ranks, {type(wrapped).__name__} on backend '{backend}', "
            f"{trainer.state.global_step} steps, parameters identical"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
