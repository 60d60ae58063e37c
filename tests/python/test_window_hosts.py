"""Windows across namespace hosts (python/xccl/bench/hosts.py), as test_cross_host.py runs
collectives: 2 hosts with 1 or 2 ranks each, every put, page, row and signal of
test_window.across_hosts crossing the network engine (ofi or xccl's TCP), a neighbour on the
same host mapped. Skipped where namespaces cannot be made or torch has no windows."""

from __future__ import annotations

import os
import sys
import time

import pytest
import torch.distributed as dist
from test_cross_host import _env, finish_ranks, hosts_module, make_hosts  # noqa: F401

RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "window_hosts_rank.py")
CASE_TIMEOUT_S = 90

_unavailable = hosts_module.unavailable_reason()
pytestmark = [
    pytest.mark.skipif(_unavailable is not None, reason=str(_unavailable)),
    pytest.mark.skipif(not hasattr(dist, "_new_window"), reason="this torch has no windows"),
]


@pytest.mark.parametrize(
    "net, per_host", [("ofi", 2), ("tcp", 2), ("tcp", 1)], ids=["ofi-2x2", "tcp-2x2", "tcp-2x1"]
)
def test_window_across_namespace_hosts(make_hosts, tmp_path, net, per_host):  # noqa: F811
    hosts = make_hosts(2)
    world = 2 * per_host
    procs = []
    for rank in range(world):
        out = open(tmp_path / f"rank{rank}.out", "w")  # noqa: SIM115 - closed in finish_ranks
        err = open(tmp_path / f"rank{rank}.err", "w")  # noqa: SIM115
        env = _env(rank, world, rank % per_host, per_host, {"XCCL_NET": net})
        proc = hosts.popen(
            rank // per_host,
            [sys.executable, RANK_SCRIPT, str(per_host)],
            env=env,
            stdout=out,
            stderr=err,
        )
        procs.append((proc, out, err))
    results = finish_ranks(procs, tmp_path, time.monotonic() + CASE_TIMEOUT_S)
    assert [r["host"] for r in results] == [
        hosts_module.hostname(r // per_host) for r in range(world)
    ]
    for result in results:
        assert result["failures"] == [], f"rank {result['rank']}: {result['failures']}"
        assert result["checks"] >= 10
        assert result["peer_transport"] == (f"shm+{net}" if per_host > 1 else net)
