"""One worker of test_restart.py's elastic jobs: a DDP training run under torch's elastic agent
(torchrun, or the same agent started by restart_launch.py), which keeps its store across restarts.

Every attempt but the last loses one worker at step 3 (which rank, and whether it exits or is
SIGKILLed, varies with the attempt); the last one trains to the end and checks its parameters
against the same training done in one process. From the second attempt on, rank 0 creates its group
late, so the other ranks reach the store first, where the earlier attempt's keys still are.

Arguments: <output dir> <attempts that fail>. Each worker records its pid in <output dir>/pids/
(the test looks for shared-memory files named after them) and the last attempt's ranks write
<output dir>/rank<r>.txt.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

STEPS = 6
FAIL_AT_STEP = 3
RANK_ZERO_LATE_S = 0.5


def _batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def _model() -> torch.nn.Module:
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _reference(world: int) -> list[torch.Tensor]:
    """The same SGD in one process: DDP averages the ranks' gradients, which for equal batch
    sizes is the gradient of the mean of the ranks' losses."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        optimizer.zero_grad()
        batches = [_batch(step, r) for r in range(world)]
        losses = [torch.nn.functional.mse_loss(model(x), y) for x, y in batches]
        (sum(losses) / world).backward()
        optimizer.step()
    return [p.detach() for p in model.parameters()]


def main(out_dir: str, failing_attempts: str) -> None:
    import xccl  # noqa: F401 - registers the backend

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    os.makedirs(os.path.join(out_dir, "pids"), exist_ok=True)
    open(os.path.join(out_dir, "pids", f"{attempt}-{rank}-{os.getpid()}"), "w").close()
    failing = attempt < int(failing_attempts)
    if attempt > 0 and rank == 0:
        time.sleep(RANK_ZERO_LATE_S)
    dist.init_process_group("xccl", timeout=timedelta(seconds=60))
    model = torch.nn.parallel.DistributedDataParallel(_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        if failing and step == FAIL_AT_STEP and rank == attempt % world:
            sys.stdout.flush()
            if attempt % 2:
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        optimizer.zero_grad()
        x, y = _batch(step, rank)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    trained = [p.detach() for p in model.module.parameters()]
    same = all(
        torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(trained, _reference(world))
    )
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
        f.write(f"attempt {attempt} matches {same}")


if __name__ == "__main__":
    main(*sys.argv[1:])
