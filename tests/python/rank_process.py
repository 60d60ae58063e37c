"""What runs in each rank's process of a dist_harness spawn: `entry(launch, rank)` redirects
the rank's output to its log, applies the environment, creates the default group (checking its
transport), runs the test's function and leaves the outcome in a result file for the parent.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import pickle
import signal
import sys
import time
import traceback
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist

HOST = "127.0.0.1"
PLACEMENTS = ("shared", "spread")


@dataclasses.dataclass(frozen=True)
class Launch:
    """One spawn's settings, the same for every rank (spawn() documents them); pickled to each
    rank's process."""

    fn: Callable
    world_size: int
    args: tuple
    workdir: str
    port: int  # the parent's TCPStore; 0 without a group (init=False)
    init: bool
    pg_timeout: float
    pg_options: dict | None
    env: dict
    started: float  # time.time() at the spawn: phases and elapsed are counted from it
    transport: str | None
    placement: str | None


def _write_result(path: str, payload: dict) -> None:
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        pickle.dump(payload, f)
    os.replace(temporary, path)


def group_transport(group=None) -> str:
    """How the group's collectives travel: "shm" (one host), "hierarchical" (segments per host,
    TCP between them) or "tcp"."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device("cpu")).transport


def device_index(placement: str, rank: int) -> int:
    """The CUDA device a rank uses under `placement` (see PLACEMENTS)."""
    if placement == "shared":
        return 0
    if placement == "spread":
        return rank % torch.cuda.device_count()
    raise ValueError(f"unknown placement {placement!r}; known: {', '.join(PLACEMENTS)}")


def entry(launch: Launch, rank: int) -> None:
    """Runs in the rank's process."""
    started = launch.started
    log = os.open(os.path.join(launch.workdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    faulthandler.enable()  # a crashing rank leaves its Python stack in its log
    # ... and so does a hung one: spawn() sends SIGUSR1 before killing it at the bound.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # Flight recorder dumps (written when a collective fails) stay in the spawn's folder.
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(launch.workdir, "fr_trace_rank_")
    os.environ.update(launch.env)
    if launch.transport == "hierarchical":
        os.environ["XCCL_SHM_HOST_ID"] = f"simulated-host-{rank % 2}"
    # Up to 4 ranks share 2 cores: intra-op threads would only spin against each other.
    torch.set_num_threads(1)
    if launch.placement is not None:
        # Before the group exists, so that its GPU side sees the device it will use.
        torch.cuda.set_device(device_index(launch.placement, rank))
    result = os.path.join(launch.workdir, f"rank{rank}.pkl")
    payload: dict = {}
    phases = {"start": time.time() - started}
    try:
        import xccl  # registers the backend

        if launch.init:
            store = dist.TCPStore(
                HOST,
                launch.port,
                is_master=False,
                timeout=timedelta(seconds=launch.pg_timeout + 30),
            )
            options = None
            if launch.pg_options is not None:
                options = xccl.Options()
                for name, value in launch.pg_options.items():
                    setattr(options, name, value)
            dist.init_process_group(
                "xccl",
                store=store,
                rank=rank,
                world_size=launch.world_size,
                timeout=timedelta(seconds=launch.pg_timeout),
                pg_options=options,
            )
            used = group_transport()
            if launch.transport is not None and launch.world_size > 1 and used != launch.transport:
                raise AssertionError(f"the default group uses {used}, not {launch.transport}")
        phases["init"] = time.time() - started
        value = launch.fn(rank, launch.world_size, *launch.args)
        phases["run"] = time.time() - started
        payload = {"value": value}
        if launch.init and dist.is_initialized():
            dist.destroy_process_group()
        phases["destroy"] = time.time() - started
    except BaseException as e:  # noqa: BLE001 - everything is reported to the parent
        payload = {
            "error": f"{type(e).__name__}: {e}",
            "error_type": type(e).__name__,
            "traceback": traceback.format_exc(),
            **payload,
        }
    payload["elapsed"] = time.time() - started
    payload["phases"] = phases
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        _write_result(result, payload)
    except Exception as e:  # noqa: BLE001 - an unpicklable value
        _write_result(
            result,
            {
                "error": f"result not picklable: {e}",
                "error_type": "PicklingError",
                "elapsed": payload["elapsed"],
            },
        )
