"""Where a group's ranks are is worked out once per membership (net::GroupLayout,
csrc/net/rendezvous/group_layout.h; docs/design.md): XCCL_SHM_* are read in one place, and a group's
creation takes one census of hosts through the store, which the transport, the segments, the
hierarchy, the tuning agreement, windows and the GPU placement all read."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from dist_harness import HOST, checks_test, transport_cases
from forwarding_store import ForwardingStore

CSRC = Path(__file__).resolve().parents[2] / "csrc"
# A call of shm::Options::fromEnvironment outside comments (algo::Tunables has its own: not this
# one).
FROM_ENVIRONMENT = re.compile(r"(?<!Tunables)(?<!\w)(?:net::)?(?:shm::)?Options::fromEnvironment\(")
# Its definition and declaration.
DEFINITION = re.compile(r"^Options Options::fromEnvironment\(\)|static Options fromEnvironment\(")


def test_shm_options_are_read_from_the_environment_in_one_place():
    calls = [
        f"{path.relative_to(CSRC)}:{n}"
        for path in sorted(CSRC.rglob("*"))
        if path.suffix in (".cc", ".h", ".cu", ".cuh")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if FROM_ENVIRONMENT.search(line.split("//")[0]) and not DEFINITION.search(line.strip())
    ]
    assert [c.split(":")[0] for c in calls] == ["net/rendezvous/group_layout.cc"], calls


class _CensusCountingStore(ForwardingStore):
    """Forwards to `inner`; remembers the keys this rank publishes a host census under (the
    allGather "hosts" or "host": ".../hosts/<rank>")."""

    CENSUS = re.compile(r"(^|/)hosts?/\d+$")

    def __init__(self, inner):
        super().__init__(inner)
        self.census_keys = []

    def set(self, key, value):
        if self.CENSUS.search(key):
            self.census_keys.append(key)
        self.inner.set(key, value)


@checks_test(transport_cases(tcp_worlds=(2,), hierarchical_worlds=(4,), worlds=(3,)), min_checks=3)
def test_group_creation_takes_one_census_of_hosts(chk, rank, world):
    """One host (one segment), shared memory disabled (the factory, the segment and the
    hierarchy all refuse) and two simulated hosts (a segment per host): each rank publishes its
    host once, under the layout's key; a window created afterwards asks nobody again."""
    from xccl import _C

    store = _CensusCountingStore(
        dist.PrefixStore("census/", dist.distributed_c10d._get_default_store())
    )
    options = _C.Options()
    options.timeout = timedelta(seconds=60)
    options.store_host = HOST
    options.group_name = "census"
    options.global_ranks_in_group = list(range(world))
    group = _C.ProcessGroupXccl(store, rank, world, options)
    t = torch.full((4,), float(rank))
    group.allreduce([t]).wait()
    chk.equal("the group works", t, torch.full((4,), float(sum(range(world)))))
    if hasattr(group, "new_window"):
        group.new_window()
    keys = store.census_keys
    chk.true("one census of hosts, under the layout's key", len(keys) == 1, str(keys))
    chk.true("it is the layout's", all(k.endswith(f"layout/hosts/{rank}") for k in keys), str(keys))
