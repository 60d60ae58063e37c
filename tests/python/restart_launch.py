"""torchrun --standalone --max-restarts N, as a function: torch's elastic agent (LocalElasticAgent,
c10d rendezvous on this host, one store kept across restarts, survivors stopped with SIGTERM then
SIGKILL) running restart_worker.main. Workers fork from a forkserver that imported torch, DDP
and xccl once, so an attempt costs group creation and training, not three torch imports.

Usage: restart_launch.py <workers> <max restarts> <output dir> <attempts that fail>
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(workers: str, max_restarts: str, out_dir: str, failing_attempts: str) -> None:
    # What DDP imports on first use too (torch._dynamo, DTensor): ~10 s of CPU per worker else.
    multiprocessing.set_forkserver_preload(
        [
            "torch",
            "torch.distributed",
            "torch._dynamo",
            "torch.distributed.tensor",
            "torch.nn.parallel",
            "torch.distributed.algorithms.ddp_comm_hooks",
            "xccl",
            "restart_worker",
        ]
    )
    import restart_worker
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=int(workers),
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=int(max_restarts),
        monitor_interval=0.1,
        start_method="forkserver",
    )
    elastic_launch(config, restart_worker.main)(out_dir, failing_attempts)


if __name__ == "__main__":
    main(*sys.argv[1:])
