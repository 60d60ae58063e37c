"""DistributedDataParallel parity: the same model trained with backend "xccl" and with gloo (in
the same job, on identical initial weights and per-rank data) gives the same losses and
parameters to fp32 rounding, with DDP's built-in allreduce and with communication hooks; both
also match a single-process reference that averages every rank's gradient. Every case runs on
the default transport (shared memory on one host); some also with TCP forced or on two
simulated hosts (hierarchical all_reduce)."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, default_transport, group_transport, result, run
from train_steps import seeded_batches, sgd_losses

STEPS = 4
LR = 0.1
HOOKS = ("builtin", "allreduce_hook", "fp16_compress_hook")


def _model() -> torch.nn.Module:
    torch.manual_seed(1234)  # the same initial weights on every rank and for every copy
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def _batches(rank: int):
    return seeded_batches(STEPS, lambda step: 1000 * step + rank, 6, 12, 5)


def _reference(world: int) -> tuple[list[list[float]], list[torch.Tensor]]:
    """One process: every step applies the mean over ranks of each rank's gradient."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = [[] for _ in range(world)]
    batches = [_batches(rank) for rank in range(world)]
    for step in range(STEPS):
        optimizer.zero_grad()
        for rank in range(world):
            x, y = batches[rank][step]
            loss = torch.nn.functional.mse_loss(model(x), y) / world
            loss.backward()  # gradients accumulate: the sum of loss/world is the DDP average
            losses[rank].append(loss.item() * world)
        optimizer.step()
    return losses, [p.detach().clone() for p in model.parameters()]


def _ddp(rank, world, hook):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    chk = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    trained = {}
    for name, group in (("xccl", None), ("gloo", gloo)):
        model = DDP(_model(), process_group=group)
        if hook != "builtin":
            model.register_comm_hook(
                group if group is not None else dist.group.WORLD, getattr(default_hooks, hook)
            )
        losses = sgd_losses(model, _batches(rank), LR)
        trained[name] = (losses, [p.detach().clone() for p in model.parameters()])
    reference_losses, reference_params = _reference(world)
    # fp16 compression rounds every gradient to half precision: gloo and xccl may sum three
    # halves in a different order, one fp16 rounding apart.
    rtol, atol = (2e-3, 2e-4) if hook == "fp16_compress_hook" else (1e-5, 1e-6)
    x_losses, x_params = trained["xccl"]
    g_losses, g_params = trained["gloo"]
    chk.close("losses xccl vs gloo", x_losses, g_losses, rtol, atol)
    chk.close("parameters xccl vs gloo", x_params, g_params, rtol, atol)
    chk.close(
        "losses vs single-process reference",
        x_losses,
        torch.tensor(reference_losses[rank]),
        rtol,
        atol,
    )
    chk.close("parameters vs single-process reference", x_params, reference_params, rtol, atol)
    initial = [p.detach() for p in _model().parameters()]
    chk.true(
        "training moved the weights",
        any(not torch.allclose(p, q) for p, q in zip(x_params, initial)),
    )
    # DDP keeps replicas identical: every rank must end with the same bits (compared by the
    # parent, which does no tensor work of its own).
    digest = hashlib.sha256(b"".join(p.numpy().tobytes() for p in x_params)).hexdigest()
    failures, checks = result(chk)
    return failures, checks, digest, group_transport()


CASES = [pytest.param(w, h, None, id=f"{w}-{h}") for w in (2, 3) for h in HOOKS] + [
    pytest.param(2, "builtin", "tcp", id="2-builtin-tcp"),
    pytest.param(3, "fp16_compress_hook", "tcp", id="3-fp16_compress_hook-tcp"),
    pytest.param(3, "builtin", "hierarchical", id="3-builtin-hierarchical"),
]


@pytest.mark.parametrize("world_size,hook,transport", CASES)
def test_ddp_matches_gloo(world_size, hook, transport):
    values = run(_ddp, world_size, hook, timeout=240, transport=transport)
    failures = [f"rank {rank}: {f}" for rank, (fs, _, _, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert all(checks >= 5 for _, checks, _, _ in values)
    digests = [digest for _, _, digest, _ in values]
    assert len(set(digests)) == 1, f"replicas differ after training: {digests}"
    expected = transport or default_transport()
    used = {used for _, _, _, used in values}
    assert used == {expected}, f"DDP ran over {used}, expected {expected}"
