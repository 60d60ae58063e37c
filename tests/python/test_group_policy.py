"""Every xccl group gets the policy it calls back into Python through (GroupPolicy,
csrc/backend/core/group_policy.h): xccl's creator gives the package's to the default group and to
every new_group whose options carry none, keeps one that the options carry, and the group asks
that policy, not a process-wide slot, for its tuning table. (split, shrink and reconfigure:
test_collectives_groups.py and test_reconfigure.py.)"""

from __future__ import annotations

import torch
import torch.distributed as dist
from dist_harness import checks_test

CPU = torch.device("cpu")
NO_SOURCE = "no tuning source registered (xccl's Python package)"


def test_the_package_policy_holds_all_three_callbacks():
    from xccl import _C, _registration

    policy = _registration.group_policy()
    assert policy is _registration.group_policy()  # built once
    assert policy.callbacks == ["vendor_factory", "kernel_check", "tuning_source"]
    assert _C.GroupPolicy().callbacks == []
    assert _C.Options().policy is None  # a group built from these alone has the empty policy
    assert _C.GroupPolicy(tuning_source=lambda: ("", "x")).callbacks == ["tuning_source"]


@checks_test((2,), min_checks=9)
def test_every_group_asks_its_own_policy(chk, rank, world):
    from xccl import _C, _registration

    package = _registration.group_policy()
    default = dist.distributed_c10d._get_default_group()._get_backend(CPU)
    chk.true("default group: the package's policy", default.options.policy is package)
    chk.true("default group asked it", _C._tuning_in_force(default)[1] != NO_SOURCE)

    group = dist.new_group(backend="xccl")
    backend = group._get_backend(CPU)
    chk.true("new_group: the package's policy", backend.options.policy is package)
    chk.true("new_group asked it", _C._tuning_in_force(backend)[1] != NO_SOURCE)

    # Options without a policy (a user's pg_options): the creator adds the package's.
    options = _C.Options()
    options.algorithm = "ring"
    group = dist.new_group(backend="xccl", pg_options=options)
    backend = group._get_backend(CPU)
    chk.true("pg_options without one: the package's", backend.options.policy is package)
    chk.equal("the caller's options are left alone", options.policy, None)

    # A policy of its own: asked instead, by this group alone.
    mine = _C.GroupPolicy(tuning_source=lambda: ("", f"rank {rank}'s own source"))
    options = _C.Options()
    options.policy = mine
    group = dist.new_group(backend="xccl", pg_options=options)
    backend = group._get_backend(CPU)
    chk.true("pg_options' policy kept", backend.options.policy is mine)
    chk.equal(
        "its source answered", _C._tuning_in_force(backend), ("", "no table: rank 0's own source")
    )
    chk.true("the default group still has the package's", default.options.policy is package)
