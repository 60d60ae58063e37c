"""Bad arguments raise ValueError (or RuntimeError) on the calling rank before any traffic and
leave the group usable: each bad call is made by ONE rank only, after which every rank runs a
good collective. Had the bad call sent anything or taken a sequence number, that collective
would be mismatched across ranks (xccl reports that) or hang (the harness bound)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from collective_cases import Op, check_sum, expected_reduction, rank_input
from dist_harness import WORLD_SIZES, Checker, checks_test, result, run_checks

R = dist.ReduceOp


def _backend():
    return dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))


def _options(kind, **fields):
    opts = getattr(dist, kind)()
    for name, value in fields.items():
        setattr(opts, name, value)
    return opts


def _cases(world):
    """(name, the bad call, text its message must contain or None); None where a case needs a
    peer and world is 1."""
    f = torch.ones(6)
    non_contiguous = torch.ones(4, 6).t()
    return [
        (
            "all_gather_into_tensor output too small",
            lambda: dist.all_gather_into_tensor(torch.empty(6 * world - 1), f),
            "xccl",
        ),
        (
            "all_gather_into_tensor output too large",
            lambda: dist.all_gather_into_tensor(torch.empty(6 * world + 6), f),
            "xccl",
        ),
        (
            "all_gather_into_tensor dtype mismatch",
            lambda: dist.all_gather_into_tensor(torch.empty(6 * world, dtype=torch.float64), f),
            "dtype",
        ),
        (
            "reduce_scatter_tensor input too small",
            lambda: dist.reduce_scatter_tensor(torch.empty(6), torch.ones(6 * world - 1)),
            "xccl",
        ),
        (
            "reduce_scatter_tensor output too large",
            lambda: dist.reduce_scatter_tensor(torch.empty(7), torch.ones(6 * world)),
            "xccl",
        ),
        (
            "all_to_all_single input splits do not add up",
            lambda: dist.all_to_all_single(
                torch.empty(world), torch.ones(world), [1] * world, [1] * (world - 1) + [2]
            ),
            "split",
        ),
        (
            "all_to_all_single output splits do not add up",
            lambda: dist.all_to_all_single(
                torch.empty(world + 1), torch.ones(world), [1] * world, [1] * world
            ),
            "split",
        ),
        (
            "all_to_all_single wrong number of splits",
            lambda: dist.all_to_all_single(
                torch.empty(world), torch.ones(world), [1] * (world + 1), [1] * world
            ),
            "split",
        ),
        (
            "all_to_all_single negative split",
            lambda: dist.all_to_all_single(
                torch.empty(world),
                torch.ones(world),
                [1] * world,
                [-1] if world == 1 else [-1] + [1] * (world - 2) + [3],
            ),
            "negative",
        ),
        (
            "all_to_all_single dim 0 not divisible by the group size",
            lambda: dist.all_to_all_single(torch.empty(world * 2 + 1), torch.ones(world * 2 + 1)),
            "divisible",
        )
        if world > 1
        else None,
        (
            "broadcast root >= world size (backend)",
            lambda: _backend().broadcast([f], _options("BroadcastOptions", rootRank=world)),
            "root",
        ),
        (
            "reduce root >= world size (backend)",
            lambda: _backend().reduce([f], _options("ReduceOptions", rootRank=world)),
            "root",
        ),
        (
            "negative root (backend)",
            lambda: _backend().broadcast([f], _options("BroadcastOptions", rootRank=-1)),
            "root",
        ),
        (
            "gather root >= world size (backend)",
            lambda: _backend().gather([], [f], _options("GatherOptions", rootRank=world)),
            "root",
        ),
        (
            "scatter root >= world size (backend)",
            lambda: _backend().scatter([f], [], _options("ScatterOptions", rootRank=world)),
            "root",
        ),
        ("broadcast src >= world size (torch API)", lambda: dist.broadcast(f, src=world), None),
        ("reduce dst >= world size (torch API)", lambda: dist.reduce(f, dst=world), None),
        ("BAND on float32", lambda: dist.all_reduce(torch.ones(3), op=R.BAND), "BAND"),
        (
            "BOR on float64",
            lambda: dist.all_reduce(torch.ones(3, dtype=torch.float64), op=R.BOR),
            "BOR",
        ),
        (
            "BXOR on bfloat16",
            lambda: dist.all_reduce(torch.ones(3, dtype=torch.bfloat16), op=R.BXOR),
            "BXOR",
        ),
        (
            "BAND on float16 reduce_scatter_tensor",
            lambda: dist.reduce_scatter_tensor(
                torch.empty(2, dtype=torch.float16),
                torch.ones(2 * world, dtype=torch.float16),
                op=R.BAND,
            ),
            "BAND",
        ),
        ("BOR on float32 reduce", lambda: dist.reduce(torch.ones(3), dst=0, op=R.BOR), "BOR"),
        ("AVG on bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG), "AVG"),
        (
            "PREMUL_SUM on int32",
            lambda: dist.all_reduce(
                torch.ones(3, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0)
            ),
            "PREMUL_SUM",
        ),
        ("non-contiguous all_reduce", lambda: dist.all_reduce(non_contiguous), "contiguous"),
        (
            "non-contiguous async all_reduce (raises at the call, not at wait)",
            lambda: dist.all_reduce(non_contiguous, async_op=True),
            "contiguous",
        ),
        ("non-contiguous broadcast", lambda: dist.broadcast(non_contiguous, src=0), "contiguous"),
        (
            "non-contiguous all_gather_into_tensor input",
            lambda: dist.all_gather_into_tensor(torch.empty(24 * world), non_contiguous),
            "contiguous",
        ),
        (
            "non-contiguous reduce_scatter_tensor input",
            lambda: dist.reduce_scatter_tensor(torch.empty(6), torch.ones(6 * world, 2)[:, 0]),
            "contiguous",
        ),
        (
            "non-contiguous all_to_all_single output",
            lambda: dist.all_to_all_single(torch.empty(6, 4 * world).t(), torch.ones(4 * world, 6)),
            "contiguous",
        ),
        (
            "non-contiguous send",
            lambda: dist.send(non_contiguous, dst=(dist.get_rank() + 1) % world),
            "contiguous",
        )
        if world > 1
        else None,
        (
            "all_reduce_coalesced mixed dtypes",
            lambda: dist.all_reduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.float64)]),
            None,
        ),
        (
            "all_gather list with the wrong number of outputs",
            lambda: dist.all_gather([torch.empty(6)] * (world + 1), f),
            None,
        ),
        ("send to self (backend)", lambda: _backend().send([f], dist.get_rank(), 0), "itself"),
        ("send to rank >= world size (backend)", lambda: _backend().send([f], world, 0), "outside"),
        (
            "recv with a negative tag (backend)",
            lambda: _backend().recv([f], (dist.get_rank() + 1) % world, -3),
            "tag",
        )
        if world > 1
        else None,
    ]


@checks_test(WORLD_SIZES, min_checks=35)
def test_bad_arguments_raise_before_traffic(chk, rank, world):
    cases = [c for c in _cases(world) if c is not None]
    for index, (name, bad, text) in enumerate(cases):
        if rank == index % world:
            error = chk.raises(name, bad, (ValueError, RuntimeError))
            if error is not None and text is not None and text.lower() not in str(error).lower():
                chk.fail(name, f"message lacks {text!r}: {error}")
        # Every rank, including the one whose call was refused: the group still works and
        # the ranks are still in step.
        check_sum(chk, f"all_reduce after '{name}'", torch.int32, 7, rank, world, seed=index)
    # And a full mix of collectives at the end.
    out = torch.empty(5 * world)
    dist.all_gather_into_tensor(out, rank_input(torch.float32, 5, rank))
    chk.equal(
        "all_gather_into_tensor at the end",
        out,
        torch.cat([rank_input(torch.float32, 5, r) for r in range(world)]),
    )
    y = rank_input(torch.float32, 1001, rank)
    dist.all_reduce(y, op=R.MAX)
    chk.equal(
        "all_reduce MAX at the end", y, expected_reduction(Op("MAX"), torch.float32, 1001, world)
    )


@checks_test((2, 3), min_checks=2, pg_timeout=20.0)
def test_mismatched_collectives_are_detected(chk, rank, world):
    """Ranks that call different collectives at the same sequence number get an error naming
    the mismatch, never a silently wrong result."""
    x = torch.ones(1001)
    if rank == 0:
        error = chk.raises(
            "all_reduce against all_gather", lambda: dist.all_reduce(x), (RuntimeError,)
        )
    else:
        out = torch.empty(1001 * world)
        error = chk.raises(
            "all_gather against all_reduce",
            lambda: dist.all_gather_into_tensor(out, x),
            (RuntimeError,),
        )
    chk.true(
        "the error says the collectives differ",
        error is not None and ("different" in str(error) or "mismatch" in str(error).lower()),
        str(error),
    )


def _file_init(store_path, rank, world, timeout_s):
    """Creates the default xccl group in a rank whose harness made none (init=False), meeting
    through a file store: a call for chk.raises."""
    from datetime import timedelta

    def init():
        dist.init_process_group(
            "xccl",
            init_method=f"file://{store_path}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s),
        )

    return init


def _init_with_own_env(rank, world, store_path, env_by_rank, match):
    """Group creation with per-rank XCCL_* values set before anything reads them: every rank
    must raise ValueError naming the problem (none may hang in a later collective)."""
    import os

    os.environ.update(env_by_rank[rank])
    chk = Checker(rank)
    error = chk.raises(
        "init_process_group",
        _file_init(store_path, rank, world, 60),
        types=(ValueError,),
        match=match,
    )
    if error is not None:
        chk.true(
            "the message names the ranks or the accepted range",
            any(word in str(error) for word in ("rank", "accepts")),
            str(error)[:300],
        )
    return result(chk)


def test_group_wide_setting_that_differs_across_ranks_fails_creation_on_every_rank(tmp_path):
    env = [{"XCCL_GPU_ALGO": "auto"}, {"XCCL_GPU_ALGO": "auto"}, {"XCCL_GPU_ALGO": "kernel"}]
    run_checks(
        _init_with_own_env,
        3,
        str(tmp_path / "store"),
        env,
        "XCCL_GPU_ALGO differs across ranks",
        init=False,
        min_checks=2,
    )


def test_out_of_range_variable_fails_creation_naming_it(tmp_path):
    env = [{"XCCL_GPU_WORKSPACE_BYTES": "8"}] * 2
    run_checks(
        _init_with_own_env,
        2,
        str(tmp_path / "store"),
        env,
        "XCCL_GPU_WORKSPACE_BYTES",
        init=False,
        min_checks=2,
    )


def _alone_with_connect_timeout(rank, world, store_path):
    """Rank 1 never creates the group: rank 0's creation fails after XCCL_CONNECT_TIMEOUT_MS
    (3 s), not after the 120 s group timeout, naming the rank it waited for."""
    import os
    import time

    chk = Checker(rank)
    if rank == 1:
        chk.true("rank 1 stays out of the group", not dist.is_initialized())
        return result(chk)
    os.environ["XCCL_CONNECT_TIMEOUT_MS"] = "3000"
    started = time.monotonic()
    error = chk.raises(
        "init_process_group without rank 1",
        _file_init(store_path, rank, world, 120),
        types=(RuntimeError,),
    )
    took = time.monotonic() - started
    chk.true(
        "failed within the connect timeout plus a margin, not the group timeout",
        took < 30,
        f"{took:.1f} s",
    )
    if error is not None:
        chk.true("the error names rank 1", "1" in str(error), str(error)[:300])
    return result(chk)


def test_connect_timeout_bounds_group_creation(tmp_path):
    run_checks(
        _alone_with_connect_timeout,
        2,
        str(tmp_path / "store"),
        init=False,
        min_checks=1,
        timeout=200,
    )


@pytest.mark.parametrize(
    "kind, exception",
    [
        ("invalid argument", ValueError),
        ("timeout", dist.DistBackendError),
        ("peer failure", dist.DistBackendError),
        ("internal error", dist.DistBackendError),
    ],
)
def test_a_failed_work_raises_the_exception_of_its_error_kind(kind, exception):
    """The Work's failure path converts like every other boundary (csrc/backend/core/torch_error.h):
    a bad argument that reaches a CPU-side Work is a ValueError, not a DistBackendError, from
    wait() and from the future alike; every other kind is a DistBackendError."""
    c = pytest.importorskip("xccl._C")
    work = c._failed_work(kind, f"xccl test: {kind}")
    with pytest.raises(exception, match=f"xccl test: {kind}"):
        work.wait()
    with pytest.raises(exception, match=f"xccl test: {kind}"):
        work.get_future().wait()
