"""DistributedDataParallel parity: the same model trained with backend "xccl" and with gloo (in
the same job, on identical initial weights and per-rank data) gives the same losses and
parameters to fp32 rounding, with DDP's built-in allreduce and with communication hooks; both
also match a single-process reference that averages every rank's gradient."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_harness import run

STEPS = 4
LR = 0.1
HOOKS = ("builtin", "allreduce_hook", "fp16_compress_hook")


def _model() -> torch.nn.Module:
    torch.manual_seed(1234)  # the same initial weights on every rank and for every copy
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def _batch(rank: int, step: int):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(6, 12, generator=g), torch.randn(6, 5, generator=g)


def _train(module: torch.nn.Module, rank: int) -> list[float]:
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        x, y = _batch(rank, step)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(module(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _reference(world: int) -> tuple[list[list[float]], list[torch.Tensor]]:
    """One process: every step applies the mean over ranks of each rank's gradient."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = [[] for _ in range(world)]
    for step in range(STEPS):
        optimizer.zero_grad()
        for rank in range(world):
            x, y = _batch(rank, step)
            loss = torch.nn.functional.mse_loss(model(x), y) / world
            loss.backward()  # gradients accumulate: the sum of loss/world is the DDP average
            losses[rank].append(loss.item() * world)
        optimizer.step()
    return losses, [p.detach().clone() for p in model.parameters()]


def _ddp(rank, world, hook):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    results = {}
    for name, group in (("xccl", None), ("gloo", gloo)):
        model = DDP(_model(), process_group=group)
        if hook != "builtin":
            model.register_comm_hook(group if group is not None else dist.group.WORLD,
                                     getattr(default_hooks, hook))
        losses = _train(model, rank)
        results[name] = (losses, [p.detach().clone() for p in model.parameters()])
    return results


def _assert_close(actual, expected, what, hook):
    # fp16 compression rounds every gradient to half precision: gloo and xccl may sum three
    # halves in a different order, one fp16 rounding apart.
    tolerance = dict(rtol=2e-3, atol=2e-4) if hook == "fp16_compress_hook" else dict(
        rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(actual, expected, msg=lambda m: f"{what}: {m}", **tolerance)


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("world_size", (2, 3))
def test_ddp_matches_gloo(world_size, hook):
    results = run(_ddp, world_size, hook, timeout=240)
    reference_losses, reference_params = _reference(world_size)
    initial = [p.detach() for p in _model().parameters()]
    for rank, result in enumerate(results):
        x_losses, x_params = result["xccl"]
        g_losses, g_params = result["gloo"]
        _assert_close(torch.tensor(x_losses), torch.tensor(g_losses),
                      f"rank {rank} losses xccl vs gloo", hook)
        _assert_close(x_params, g_params, f"rank {rank} parameters xccl vs gloo", hook)
        _assert_close(torch.tensor(x_losses), torch.tensor(reference_losses[rank]),
                      f"rank {rank} losses vs single-process reference", hook)
        _assert_close(x_params, reference_params, f"rank {rank} parameters vs reference", hook)
        # DDP keeps replicas identical: every rank ends with rank 0's parameters, bit for bit.
        for k, (mine, first) in enumerate(zip(x_params, results[0]["xccl"][1])):
            assert torch.equal(mine, first), f"rank {rank} parameter {k} differs from rank 0's"
        # Training moved the weights (the comparison is not of untouched initial values).
        assert any(not torch.allclose(p, q) for p, q in zip(x_params, initial))
