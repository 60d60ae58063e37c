"""Restarts: a job whose workers torch's elastic agent restarts (torchrun --max-restarts), and a
group created again on a store that still holds an earlier creation's keys. The agent keeps one
store for all attempts and c10d's group prefixes start again from the same values, so each
attempt finds the previous one's keys under its own names; xccl scopes every key to one
incarnation (docs/design.md, "Incarnations"). Each job must finish with the right result, never hang
(every run here is bounded), and leave no shared-memory file of its workers in /dev/shm."""

from __future__ import annotations

import glob
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from dist_harness import describe, run_job, spawn, torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = 3
# A stale key read is an error within this bound, not a hang.
CONNECT_TIMEOUT_MS = "20000"


def _run_job(command: list[str], timeout: float) -> tuple[str, float]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", XCCL_CONNECT_TIMEOUT_MS=CONNECT_TIMEOUT_MS)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")]))
    started = time.time()
    output = run_job(command, env, timeout)
    return output, time.time() - started


def _check_job(out_dir, attempts: int, output: str) -> None:
    for rank in range(WORKERS):
        text = (out_dir / f"rank{rank}.txt").read_text()
        assert text == f"attempt {attempts - 1} matches True", f"rank {rank}: {text!r}\n{output}"
    pids = [name.rsplit("-", 1)[1] for name in os.listdir(out_dir / "pids")]
    assert len(pids) == attempts * WORKERS, sorted(os.listdir(out_dir / "pids"))
    # Names xccl gives files (net/regions/shm/segment.h): "xccl-<kind><pid>-...", kind "",
    # "p2p-", "w".
    left = [
        path
        for pid in pids
        for kind in ("", "p2p-", "w")
        for path in glob.glob(f"/dev/shm/xccl-{kind}{pid}-*")
    ]
    assert not left, f"left in /dev/shm by this job's workers: {left}"


def test_torchrun_restart_after_a_worker_exits(tmp_path):
    """The issue's reproduction: torchrun --standalone --nproc-per-node 3 --max-restarts 1, one
    worker gone at step 3 of the first attempt; the second attempt trains to the right result."""
    script = os.path.join(HERE, "restart_worker.py")
    command = torchrun(WORKERS, 1, "--monitor-interval", "0.1", script, str(tmp_path), "1")
    output, _ = _run_job(command, timeout=240)
    _check_job(tmp_path, 2, output)


def test_twenty_restarts_in_a_row(tmp_path):
    """A 3-worker DDP job restarted 20 times: attempts 0..19 each lose one worker at step 3 (rank
    attempt % 3, by exit or SIGKILL), attempt 20 completes. Through torch's elastic agent with
    forked workers (restart_launch.py) so that 21 attempts fit in CI."""
    restarts = 20
    command = [
        sys.executable,
        os.path.join(HERE, "restart_launch.py"),
        str(WORKERS),
        str(restarts),
        str(tmp_path),
        str(restarts),
    ]
    output, took = _run_job(command, timeout=540)
    _check_job(tmp_path, restarts + 1, output)
    print(f"{restarts} restarts in {took:.1f} s")


def _recreate(rank: int, world: int, path: str) -> list[float]:
    """Creates the xccl default group three times on one FileStore (c10d names every creation's
    keys alike); from the second on rank 0 comes late, so the others read the store first."""
    store = dist.FileStore(path, world)
    sums = []
    for creation in range(3):
        if creation and rank == 0:
            time.sleep(0.5)
        dist.init_process_group(
            "xccl", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=30)
        )
        x = torch.full((1000,), float(rank + 1 + creation))
        dist.all_reduce(x)
        sums.append(x[0].item())
        dist.destroy_process_group()
    return sums


def test_a_group_recreated_on_a_reused_store(tmp_path):
    outcomes = spawn(
        _recreate,
        WORKERS,
        str(tmp_path / "store"),
        init=False,
        timeout=90,
        env={"XCCL_CONNECT_TIMEOUT_MS": "10000"},
    )
    assert all(o.ok for o in outcomes), describe(outcomes)
    for o in outcomes:
        assert o.value == [6.0, 9.0, 12.0], describe(outcomes)
