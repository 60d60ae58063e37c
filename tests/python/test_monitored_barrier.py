"""dist.monitored_barrier on backend "xccl" (the backend's monitoredBarrier): it passes when every
rank arrives, leaves the group usable after passing, and when ranks never arrive rank 0 raises
naming them in torch's (gloo's) words, while every other rank fails promptly too, with rank 0's
message, instead of waiting out the group timeout."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from collective_cases import check_sum
from dist_harness import Checker, checks_test, describe, kill_self, result, run, spawn

TIMEOUT_MS = 2000
# Far below the harness's group timeout (60 s): ranks must not wait that out.
PROMPT_S = 20.0


@checks_test((1, 2, 3, 4), min_checks=4)
def test_monitored_barrier_passes_when_every_rank_arrives(chk, rank, world):
    for i, wait_all in enumerate((False, True, False)):
        if rank == world - 1 and i == 1:
            time.sleep(0.5)  # a late rank within the timeout still passes
        dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=wait_all)
        # The group keeps working and its ranks stay in step after each one.
        check_sum(chk, f"all_reduce after monitored_barrier {i}", torch.float32, 1001, rank, world)
    dist.barrier()
    dist.monitored_barrier()  # the group's own timeout
    if world >= 3:  # on a subgroup, its first member coordinates
        sub = dist.new_group(list(range(1, world)))
        if rank >= 1:
            dist.monitored_barrier(group=sub, timeout=timedelta(seconds=10), wait_all_ranks=True)
            chk.true("the subgroup still works", dist.get_world_size(sub) == world - 1)
    chk.true("the group is usable at the end", dist.get_world_size() == world)


def _missing(rank, world, absent, wait_all):
    """Ranks in `absent` skip the barrier and go on to a collective; the others call it."""
    chk = Checker(rank)
    started = time.monotonic()
    if rank in absent:
        # Waits for peers that never come: it must fail once rank 0 gave up, saying why.
        error = chk.raises("a collective after skipping", dist.barrier, (RuntimeError,))
        chk.true(
            "the absent rank learns about the failed barrier",
            error is not None and "failed to pass monitoredBarrier" in str(error),
            str(error)[:400],
        )
    else:
        error = chk.raises(
            "monitored_barrier",
            lambda: dist.monitored_barrier(
                timeout=timedelta(milliseconds=TIMEOUT_MS), wait_all_ranks=wait_all
            ),
            (RuntimeError,),
        )
        text = str(error)
        if rank == 0:
            named = absent if wait_all else absent[:1]
            words = "Ranks " if len(named) > 1 else "Rank "
            expected = (
                f"{words}{', '.join(map(str, named))} failed to pass monitoredBarrier "
                f"in {TIMEOUT_MS} ms"
            )
            chk.true("rank 0 names the missing rank(s) as torch does", expected in text, text[:400])
            chk.true(
                "rank 0 waited for the timeout", time.monotonic() - started >= TIMEOUT_MS / 1000
            )
        else:
            chk.true(
                "an arrived rank fails with gloo's wording and rank 0's reason",
                f"Rank {rank} successfully reached monitoredBarrier" in text
                and "failed to pass monitoredBarrier" in text,
                text[:400],
            )
    chk.true(
        "failed promptly, not after the group timeout",
        time.monotonic() - started < PROMPT_S,
        f"{time.monotonic() - started:.1f} s",
    )
    # The failure left the group unusable (documented): the next call says so at once.
    if rank not in absent:
        error = chk.raises("the next collective", dist.barrier, (RuntimeError,))
        chk.true(
            "the next call gives the reason",
            error is not None and "failed to pass monitoredBarrier" in str(error),
            str(error)[:400],
        )
    return result(chk)


@pytest.mark.parametrize(
    "world,absent,wait_all",
    [
        pytest.param(2, (1,), False, id="2-rank1"),
        pytest.param(3, (1,), False, id="3-rank1"),
        pytest.param(4, (1, 3), False, id="4-ranks1,3-first"),
        pytest.param(4, (1, 3), True, id="4-ranks1,3-wait_all"),
    ],
)
def test_monitored_barrier_names_ranks_that_never_arrive(world, absent, wait_all):
    values = run(_missing, world, list(absent), wait_all, timeout=90)
    failures = [f"rank {r}: {f}" for r, (fs, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert all(checks >= 3 for _, checks in values)


def _one_dies(rank, world):
    if rank == world - 1:
        kill_self()
    chk = Checker(rank)
    started = time.monotonic()
    # A long timeout: a rank whose process is gone is known at once, not after the timeout.
    error = chk.raises(
        "monitored_barrier with a dead rank",
        lambda: dist.monitored_barrier(timeout=timedelta(seconds=60)),
        (RuntimeError,),
        match="failed to pass monitoredBarrier",
    )
    if rank == 0:
        chk.true(
            "rank 0 names the dead rank",
            error is not None and f"Rank {world - 1} failed" in str(error),
            str(error)[:400],
        )
    chk.true("failed promptly", time.monotonic() - started < PROMPT_S)
    return result(chk)


def test_monitored_barrier_names_a_rank_that_died_without_waiting_the_timeout():
    outcomes = spawn(_one_dies, 3, timeout=90)
    assert outcomes[2].exitcode == -9, describe(outcomes)
    for o in outcomes[:2]:
        assert o.ok, describe(outcomes)
        failures, checks = o.value
        assert not failures and checks == (3 if o.rank == 0 else 2), f"rank {o.rank}: {failures}"


def _rank0_runs_out(rank, world):
    """Rank 0's own timeout ends before any peer could arrive (timeout 0, peers late)."""
    chk = Checker(rank)
    if rank == 0:
        error = chk.raises(
            "monitored_barrier with timeout 0",
            lambda: dist.monitored_barrier(timeout=timedelta(0)),
            (RuntimeError,),
        )
        text = str(error)
        chk.true(
            "rank 0 says it timed out itself, in gloo's words",
            "Rank 0 timed out in monitoredBarrier after 0 ms" in text,
            text[:400],
        )
        chk.true(
            "and which ranks it was still waiting for",
            f"ranks: {', '.join(map(str, range(1, world)))}" in text,
            text[:400],
        )
        chk.true("no peer is blamed", "failed to pass monitoredBarrier" not in text, text[:400])
    else:
        time.sleep(1.0)  # arrive after rank 0 gave up
        error = chk.raises(
            "monitored_barrier after rank 0 gave up",
            lambda: dist.monitored_barrier(timeout=timedelta(seconds=10)),
            (RuntimeError,),
        )
        chk.true(
            "a peer gets rank 0's reason",
            "Rank 0 timed out in monitoredBarrier" in str(error),
            str(error)[:400],
        )
    return result(chk)


def test_monitored_barrier_blames_rank0_when_its_own_timeout_expires():
    values = run(_rank0_runs_out, 3, timeout=90)
    failures = [f"rank {r}: {f}" for r, (fs, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert [checks for _, checks in values] == [4, 2, 2]
