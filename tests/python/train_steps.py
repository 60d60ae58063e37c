"""The training loop the parity tests share (DDP, hooks, FSDP2, DeviceMesh): plain SGD on
mean-squared error over batches every copy of a model sees alike, so two backends' runs can be
compared loss by loss and parameter by parameter."""

from __future__ import annotations

from collections.abc import Callable

import torch


def seeded_batches(
    steps: int, seed: Callable[[int], int], rows: int, inputs: int, outputs: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` (x, y) pairs of shapes (rows, inputs) and (rows, outputs); step s is drawn from a
    generator seeded with seed(s)."""
    batches = []
    for step in range(steps):
        g = torch.Generator().manual_seed(seed(step))
        batches.append(
            (torch.randn(rows, inputs, generator=g), torch.randn(rows, outputs, generator=g))
        )
    return batches


def sgd_losses(model: torch.nn.Module, batches, lr: float) -> torch.Tensor:
    """Trains `model` in place, one SGD step per (x, y) in `batches`; returns the losses."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses)
