"""One rank of test_reconfigure.py's case across namespace hosts, started as a plain process
inside a namespace host with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

Three ranks form a group by reconfigure, the last one sits out a reconfigure to the first two,
then all three reconfigure back; each step records the transport and an all_reduce. Prints one
JSON line {"rank", "host", "steps": [{"uuid", "rank", "size", "transport", "peer_transport",
"sum"}]}.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import xccl  # noqa: F401 - registers the backend
from torch.distributed.distributed_c10d import _get_default_store


def main() -> int:
    torch.set_num_threads(1)
    me = int(os.environ["RANK"])
    dist.init_process_group("xccl", timeout=timedelta(seconds=60), enable_reconfigure=True)
    store = _get_default_store()
    steps = []
    for uuid, members in ((1, [0, 1, 2]), (2, [0, 1]), (3, [0, 1, 2])):
        if me not in members:
            continue
        store.set(f"test/{uuid}/{me}", dist._get_reconfigure_handle())
        handles = [store.get(f"test/{uuid}/{m}").decode() for m in members]
        dist._reconfigure(uuid=uuid, handles=handles).wait()
        total = torch.full((4,), float(dist.get_rank() + 1))
        dist.all_reduce(total)
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        steps.append(
            {
                "uuid": uuid,
                "rank": dist.get_rank(),
                "size": dist.get_world_size(),
                "transport": backend.transport,
                "peer_transport": backend.peer_transport,
                "sum": total.tolist(),
            }
        )
    dist.destroy_process_group()
    print(json.dumps({"rank": me, "host": socket.gethostname(), "steps": steps}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
