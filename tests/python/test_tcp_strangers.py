"""Strangers' connections while a group is created over TCP (docs/network.md, "Who may connect").

A 4-rank xccl group is created twice over a store that holds rank 0 up for a second just after
it published its listening address (as if it were descheduled there): every rank is inside
creation, its listener up, and the others' connections to rank 0 wait in its queue. The first
time nothing else happens, which gives the normal creation time on this machine; the second
time a helper process (stranger_flood.py) opens 1,000 idle and 1,000 slow (one byte every
100 ms) connections to every rank's new listener meanwhile. The flooded group must form within
its normal time plus 2 s, and work.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import describe, spawn
from forwarding_store import ForwardingStore

IDLE = 1000
SLOW = 1000
WORLD = 4
HOLD_S = 1.0
SLACK_S = 2.0
FLOOD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stranger_flood.py")


class _HeldStore(ForwardingStore):
    """`inner`, except that the first wait for or read of a peer's TCP addresses (rank 0's, once
    it published its own) first sleeps `hold` seconds."""

    def __init__(self, inner: dist.Store, hold: float):
        super().__init__(inner)
        self.hold = hold

    def _maybe_hold(self, key: str) -> None:
        if self.hold and "/addr/" in key:
            time.sleep(self.hold)
            self.hold = 0.0

    def get(self, key):
        self._maybe_hold(key)
        return self.inner.get(key)

    def wait(self, keys, timeout=None):
        for key in keys:
            self._maybe_hold(key)
        if timeout is None:
            self.inner.wait(keys)
        else:
            self.inner.wait(keys, timeout)


def _create(rank: int, name: str, keep: list) -> tuple[float, float]:
    """Creates the group (rank 0 held up); when this rank started and had it. Checks it works,
    and keeps it in `keep` (a rank that dropped it early would take it away from the others)."""
    import xccl

    inner = dist.PrefixStore(name + "/", dist.distributed_c10d._get_default_store())
    options = xccl.Options()
    options.timeout = timedelta(seconds=30)
    options.group_name = name
    options.global_ranks_in_group = list(range(WORLD))
    options.store_host = "127.0.0.1"
    start = time.time()
    group = xccl.ProcessGroupXccl(
        _HeldStore(inner, HOLD_S if rank == 0 else 0.0), rank, WORLD, options
    )
    end = time.time()
    x = torch.ones(16)
    group.allreduce([x]).wait()
    keep.append(group)
    assert torch.equal(x, torch.full((16,), float(WORLD))), x
    return start, end


def _twice(rank: int, world: int) -> dict:
    pids: list = [None] * world
    dist.all_gather_object(pids, os.getpid())
    dist.barrier()
    groups: list = []
    alone = _create(rank, "alone", groups)
    helper = None
    if rank == 0:
        helper = subprocess.Popen(
            [sys.executable, FLOOD, str(IDLE), str(SLOW), *map(str, pids)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert helper.stdout.readline().strip() == "ready"  # it knows the listeners there were
    dist.barrier()
    try:
        flooded = _create(rank, "flooded", groups)
        out = {"alone": alone, "flooded": flooded}
        if helper is not None:
            line = helper.stdout.readline().strip()
            assert line.startswith("flooded "), line
            helper.stdin.close()
            out["counts"] = json.loads(helper.stdout.read().strip().splitlines()[-1])
            out["flood_done"] = float(line.split()[1])
            helper.wait(timeout=30)
        dist.barrier()
        return out
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()


def test_strangers_do_not_delay_group_creation():
    needed = WORLD * (IDLE + SLOW) + 1000
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < needed:
        pytest.skip(f"the helper needs {needed} descriptors; the hard RLIMIT_NOFILE is lower")
    outcomes = spawn(_twice, WORLD, transport="tcp", timeout=90, pg_timeout=60.0)
    assert all(o.ok for o in outcomes), describe(outcomes)
    results = [o.value for o in outcomes]
    alone = max(r["alone"][1] for r in results) - min(r["alone"][0] for r in results)
    flooded = max(r["flooded"][1] for r in results) - min(r["flooded"][0] for r in results)
    counts = results[0]["counts"]
    print(f"group creation: {alone:.2f} s alone, {flooded:.2f} s flooded; flood: {counts}")
    # The flood reached every rank's new listener with all its connections, while rank 0 was
    # still creating the group.
    assert counts["listeners"] == WORLD, counts
    assert counts["opened"] == WORLD * (IDLE + SLOW), counts
    assert results[0]["flood_done"] < results[0]["flooded"][1], "the flood came too late"
    assert flooded <= alone + SLACK_S, (
        f"flooded creation took {flooded:.2f} s, alone {alone:.2f} s; flood: {counts}"
    )
