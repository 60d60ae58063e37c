"""Which transport carries each peer's messages (net/transport/factory.h, docs/network.md):
XCCL_NET picks the network engine, shared memory carries ranks of one host, and a group across
(simulated) hosts joins both ("shm+tcp")."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks, spawn


def _peer_transport(rank, world, expected):
    chk = Checker(rank)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    chk.equal("peer transport", backend.peer_transport, expected)
    # Every rank sends to the next and receives from any source: the route carries both.
    nxt = (rank + 1) % world
    work = dist.isend(torch.full((1000,), float(rank)), dst=nxt, tag=4)
    got = torch.empty(1000)
    src = dist.recv(got, tag=4)
    work.wait()
    chk.equal("recv from any source: sender", src, (rank - 1) % world)
    chk.equal("recv from any source: data", got, torch.full((1000,), float(src)))
    x = torch.ones(4097)
    dist.all_reduce(x)
    chk.equal("all_reduce", x, torch.full((4097,), float(world)))
    return result(chk)


@pytest.mark.parametrize(
    "transport, expected",
    [(None, "shm"), ("tcp", "tcp"), ("hierarchical", "shm+tcp")],
    ids=["one-host", "shm-disabled", "two-hosts"],
)
def test_xccl_net_tcp_routes_per_peer(transport, expected):
    run_checks(
        _peer_transport,
        4,
        expected,
        env={"XCCL_NET": "tcp"},
        transport=transport,
        min_checks=4,
    )


def _noop(rank, world):
    return rank


def test_unknown_xccl_net_is_a_value_error_at_init():
    for o in spawn(_noop, 2, pg_timeout=20.0, timeout=120, env={"XCCL_NET": "bogus"}):
        assert o.error_type == "ValueError", o.describe()
        assert "XCCL_NET" in o.error and "bogus" in o.error, o.describe()
