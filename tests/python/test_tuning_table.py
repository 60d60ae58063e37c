"""The measured tuning table inside the backend (csrc/algo/tuning.h): every rank of a new group
plans from rank 0's table whatever its own source says, a corrupt or foreign table leaves the
group on the rules without an error, `_C._plan_rows` marks tuned rows, and
`_C._inject_wrong_result` damages exactly the named algorithm's results. Each group here gets a
tuning source of its own through its options' GroupPolicy; the injection exists only in builds
with XCCL_TEST_HOOKS=1, which scripts/test.sh installs."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks

CPU = torch.device("cpu")


def _table(locality: str, entry: str, world: int = 2) -> str:
    return f"xccl-tuning 1\nworld {world} 1 {locality}\n{entry}\n"


def test_this_build_has_the_test_hooks():
    """The injection tests below and test_tune.py's need it: a clear failure instead of theirs."""
    from xccl import _C

    assert hasattr(_C, "_inject_wrong_result"), (
        "this xccl was built without its test hooks: install it with "
        "XCCL_TEST_HOOKS=1 pip install --no-build-isolation . (as scripts/test.sh does)"
    )


def _group_with(source):
    """A new xccl group whose policy's tuning source on this rank is `source` (None: none)."""
    from xccl import _C

    options = _C.Options()
    options.policy = _C.GroupPolicy(tuning_source=source)
    group = dist.new_group(backend="xccl", pg_options=options)
    return group, group._get_backend(CPU)


def _all_reduce_ok(chk: Checker, what: str, group, world: int, wrong_first: int = 0) -> None:
    x = torch.arange(1000, dtype=torch.float32) + dist.get_rank()
    dist.all_reduce(x, group=group)
    expected = torch.arange(1000, dtype=torch.float32) * world + sum(range(world))
    expected[0] += wrong_first
    chk.equal(what, x, expected)


def _agreement(rank: int, world: int):
    from xccl import _C

    chk = Checker(rank)
    default = dist.distributed_c10d._get_default_group()._get_backend(CPU)
    # The group's locality as planCpu sees it: shared memory on this host, or TCP alone.
    locality = "one_host" if default.transport == "shm" else "none"
    tcp_ring = _table(locality, "cpu all_reduce 0 inf tcp ring 8192 111 222")
    other = _table(locality, "cpu all_reduce 0 inf tcp direct 0 1 2")

    # Ranks answer differently (one raises): every rank plans from rank 0's table.
    def differing():
        if rank == 0:
            return (tcp_ring, "test table")
        raise RuntimeError("this rank's source fails")  # no table here: rank 0's still wins

    group, backend = _group_with(differing)
    chk.equal("in force", _C._tuning_in_force(backend), (tcp_ring, "rank 0's table"))
    _all_reduce_ok(chk, "all_reduce on the tuned plan", group, world)
    # The tuned ring really runs: damage to ring results shows, to the rules' algorithms not.
    _C._inject_wrong_result("ring")
    _all_reduce_ok(chk, "ring damaged", group, world, wrong_first=1)
    _C._inject_wrong_result("")
    _all_reduce_ok(chk, "damage off", group, world)

    group, backend = _group_with(lambda: (other if rank else tcp_ring, "mine"))
    chk.equal("rank 0's text wins", _C._tuning_in_force(backend)[0], tcp_ring)

    # A corrupt rank-0 text: the rules on every rank, no error anywhere.
    group, backend = _group_with(lambda: ("xccl-tuning 1\nworld x" if rank == 0 else tcp_ring, ""))
    text, why = _C._tuning_in_force(backend)
    chk.equal("corrupt: no table", text, "")
    chk.true("corrupt: why names line 2", "malformed" in why and "line 2" in why, why)
    _all_reduce_ok(chk, "all_reduce by the rules", group, world)

    # A table for another world: not used, and why says both shapes.
    foreign = _table(locality, "cpu all_reduce 0 inf tcp ring 0 1 2", world=world + 2)
    group, backend = _group_with(lambda: (foreign, ""))
    text, why = _C._tuning_in_force(backend)
    chk.equal("foreign: no table", text, "")
    chk.equal(
        "foreign: why",
        why,
        f"table for world {world + 2}/1/{locality}, group is {world}/1/{locality}",
    )

    # No source at all: no table, and why says so.
    group, backend = _group_with(None)
    chk.equal("no source", _C._tuning_in_force(backend)[0], "")
    return result(chk)


def test_every_rank_plans_from_rank_zeros_table():
    run_checks(_agreement, 2, min_checks=10)


def _injection(rank: int, world: int):
    from xccl import _C

    chk = Checker(rank)
    group = dist.new_group(backend="xccl")
    plan = _C._plan_rows("cpu", world, 1, [4000])
    # What the rules run for a 4000-byte all_reduce here (shm one_shot, or TCP's algorithm).
    backend = group._get_backend(CPU)
    ran = (
        next(a for c, b, r, a, *_ in plan if c == "all_reduce")
        if backend.transport == "shm"
        else "direct"
    )
    for name in ("ring", "direct", "one_shot", "two_shot", "shm"):
        _C._inject_wrong_result(name)
        try:
            _all_reduce_ok(chk, f"inject {name}", group, world, wrong_first=int(name == ran))
        finally:
            _C._inject_wrong_result("")
    chk.raises("unknown name", lambda: _C._inject_wrong_result("auto"), ValueError, "unknown")
    return result(chk)


def test_injected_wrong_results_hit_exactly_the_named_algorithm():
    run_checks(_injection, 2, min_checks=6)


def test_plan_rows_mark_tuned_decisions():
    from xccl import _C

    table = _table("one_host", "cpu all_gather 4096 65536 tcp ring 16384 700 900")
    rows = {
        (c, b): row
        for c, b, *row in _C._plan_rows("cpu", 2, 1, [1024, 4096, 65536], None, False, table)
    }
    route, algorithm, reason, decision, tuned_ns, rule_ns = rows[("all_gather", 4096)]
    assert (route, algorithm, decision, tuned_ns, rule_ns) == (
        "tcp",
        "ring (16 KiB chunks)",
        "tuned",
        700,
        900,
    )
    assert "tuned" in reason
    for key in [("all_gather", 1024), ("all_gather", 65536), ("all_reduce", 4096)]:
        assert tuple(rows[key][3:]) == ("rule", 0, 0), key
    untuned = _C._plan_rows("cpu", 2, 1, [4096])
    assert all(len(r) == 8 and r[5] == "rule" for r in untuned)
    with pytest.raises(ValueError, match="tuning table line 3"):
        _C._plan_rows("cpu", 2, 1, [4096], tuning=table.replace("ring", "rung"))
    with pytest.raises(ValueError, match="table for world 2/1/one_host, group is 4/1/one_host"):
        _C._plan_rows("cpu", 4, 1, [4096], tuning=table)
