"""One rank of test_window_hosts.py, started inside a namespace host with torchrun's variables:
test_window.across_hosts on a group whose ranks are numbered host by host.

    python window_hosts_rank.py RANKS_PER_HOST

Prints one JSON line {"rank", "checks", "failures", "host", "peer_transport"}; exits 0 when
every check passed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta

import torch.distributed as dist
import xccl  # noqa: F401 - registers the backend
from rank_checks import Checker
from test_window import across_hosts


def main() -> int:
    per_host = int(sys.argv[1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("xccl", timeout=timedelta(seconds=60))
    chk = Checker(rank)
    # Host by host: the rank `per_host` ahead is on the next host; our neighbour on ours.
    same_host = rank ^ 1 if per_host == 2 else None
    across_hosts(chk, rank, world, per_host, same_host)
    backend = dist.distributed_c10d._get_default_group()._get_backend(dist.torch.device("cpu"))
    print(
        json.dumps(
            {
                "rank": rank,
                "checks": chk.checks,
                "failures": chk.failures,
                "host": socket.gethostname(),
                "peer_transport": backend.peer_transport,
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if not chk.failures else 1


if __name__ == "__main__":
    sys.exit(main())
