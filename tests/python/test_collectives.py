"""Every collective of backend "xccl" against exact expected values and against gloo in the
same job, over world sizes 1-4, element counts 0, 1, odd and > 1M, every dtype and ReduceOp.

Each test is one spawn per world size; the ranks sweep their matrix and return failure
descriptions (dist_harness.Checker), so one run reports every mismatch. Inputs are small
integers, so sums, products and averages have exact references that every rank computes for
all ranks locally (rank_input is a pure function of dtype, count, rank and pattern).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import (WORLD_SIZES, Checker, group_transport, result, run_checks,
                          transport_cases)

R = dist.ReduceOp
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
DTYPES = FLOATS + INTS + (torch.bool, torch.complex64)
COUNTS = (0, 1, 7, 1001)
LARGE = 1_000_003
# What gloo implements on CPU (probed on torch 2.14): no int16, no AVG, no PREMUL_SUM.
GLOO_DTYPES = tuple(d for d in DTYPES if d != torch.int16)
GLOO_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


# --- inputs and references ------------------------------------------------------------------

def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# Every pattern below repeats after PERIOD elements (a multiple of 2, 3, 4, 11 and 255), so
# large inputs and their references are built from one period: the machine running the suite
# is small and shared.
PERIOD = 11220


def tile(t: torch.Tensor, n: int) -> torch.Tensor:
    return t if t.numel() == n else t.repeat(-(-n // t.numel()))[:n].contiguous()


def rank_input(dtype: torch.dtype, n: int, rank: int, pattern: str = "sum") -> torch.Tensor:
    """Small integers, different per rank and position. pattern: "sum" (|x| <= 5), "product"
    (|x| <= 2, never 0), "bits" (the dtype's bit range, to exercise high and sign bits)."""
    if n > PERIOD:
        return tile(rank_input(dtype, PERIOD, rank, pattern), n)
    i = torch.arange(n, dtype=torch.int64)
    if dtype.is_complex:
        real = rank_input(torch.float32, n, rank, pattern)
        imag = rank_input(torch.float32, n, rank + 7, pattern)
        return torch.complex(real, imag)
    signed = dtype not in (torch.uint8, torch.bool)
    if pattern == "sum":
        v = (i * 7 + rank * 5 + 3) % 11
        v = v - 5 if signed else v
        if dtype == torch.bool:
            v = (i * 7 + rank * 5 + 3) % 3 == 0
    elif pattern == "product":
        v = 1 + (i + rank) % 2
        if signed:
            v = torch.where((i * 3 + rank) % 4 == 0, -v, v)
        if dtype == torch.bool:
            v = (i + rank) % 4 != 0
    elif pattern == "bits":
        v = (i * 37 + rank * 101 + 11) % 255
        if signed:
            v = (v - 127) * {torch.int8: 1, torch.int16: 257, torch.int32: 16777217,
                             torch.int64: 1099512676353}[dtype]
        if dtype == torch.bool:
            v = v % 2 == 1
    else:
        raise ValueError(pattern)
    return v.to(dtype)


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    pattern: str = "sum"
    factor: float | None = None  # PREMUL_SUM
    tensor_factor: bool = False

    def make(self, dtype: torch.dtype):
        if self.factor is None:
            return getattr(R, self.name)
        if self.tensor_factor:
            return dist._make_nccl_premul_sum(torch.tensor(self.factor, dtype=dtype))
        return dist._make_nccl_premul_sum(self.factor)

    @property
    def label(self) -> str:
        if self.factor is None:
            return self.name
        return f"PREMUL_SUM({'tensor ' if self.tensor_factor else ''}{self.factor})"

    @property
    def exact(self) -> bool:
        return self.name != "AVG"  # AVG of floats divides: compare to fp rounding

    def reference(self, inputs: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        """The reduction of every rank's input, computed exactly and cast to dtype."""
        if dtype == torch.bool:
            stacked = torch.stack(inputs)
            if self.name in ("SUM", "MAX", "BOR"):
                return stacked.any(0)
            if self.name in ("PRODUCT", "MIN", "BAND"):
                return stacked.all(0)
            return functools.reduce(torch.bitwise_xor, inputs)
        wide = torch.complex128 if dtype.is_complex else (
            torch.float64 if dtype.is_floating_point else torch.int64)
        values = [t.to(wide) for t in inputs]
        if self.name in ("SUM", "AVG"):
            out = functools.reduce(torch.add, values)
            if self.name == "AVG" and wide == torch.int64:
                out = torch.div(out, len(inputs), rounding_mode="trunc")
            elif self.name == "AVG":
                out = out / len(inputs)
        elif self.name == "PREMUL_SUM":
            out = functools.reduce(torch.add, [v * self.factor for v in values])
        else:
            combine = {"PRODUCT": torch.mul, "MIN": torch.minimum, "MAX": torch.maximum,
                       "BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
                       "BXOR": torch.bitwise_xor}[self.name]
            out = functools.reduce(combine, values)
        return out.to(dtype)


def ops_for(dtype: torch.dtype) -> list[Op]:
    if dtype.is_complex:
        return [Op("SUM"), Op("AVG")]
    ops = [Op("SUM"), Op("PRODUCT", "product"), Op("MIN"), Op("MAX")]
    if dtype != torch.bool:
        ops.insert(1, Op("AVG"))
    if dtype.is_floating_point:
        ops += [Op("PREMUL_SUM", factor=0.5), Op("PREMUL_SUM", factor=3.0, tensor_factor=True)]
    else:
        ops += [Op("BAND", "bits"), Op("BOR", "bits"), Op("BXOR", "bits")]
    return ops


def expected_reduction(op: Op, dtype: torch.dtype, n: int, world: int) -> torch.Tensor:
    """The reduction over ranks of rank_input(dtype, n, r, op.pattern)."""
    period = min(n, PERIOD)
    return tile(op.reference([rank_input(dtype, period, r, op.pattern) for r in range(world)],
                             dtype), n)


def gloo_supports(dtype: torch.dtype, op: Op | None = None) -> bool:
    return dtype in GLOO_DTYPES and (op is None or op.name in GLOO_OPS)


def real(t: torch.Tensor) -> torch.Tensor:
    """gloo moves complex tensors only as their real view (all_reduce does that itself)."""
    return torch.view_as_real(t) if t.is_complex() else t


def different_from(t: torch.Tensor) -> torch.Tensor:
    """A tensor of t's shape and dtype with no element equal to t's (initial outputs)."""
    return ~t if t.dtype == torch.bool else t + 1


def compare(chk: Checker, what: str, op: Op, actual: torch.Tensor, expected: torch.Tensor):
    if op.exact or not (expected.dtype.is_floating_point or expected.dtype.is_complex):
        chk.equal(what, actual, expected)
    else:
        chk.close(what, actual, expected)


def gloo_group():
    return dist.new_group(backend="gloo")


# --- reducing collectives -------------------------------------------------------------------

def _all_reduce(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS:
                what = f"all_reduce {op.label} {_name(dtype)} n={n}"
                x = rank_input(dtype, n, rank, op.pattern)
                out = x.clone()
                dist.all_reduce(out, op=op.make(dtype))
                compare(chk, what, op, out, expected_reduction(op, dtype, n, world))
                if gloo_supports(dtype, op):
                    reference = x.clone()
                    dist.all_reduce(reference, op=op.make(dtype), group=gloo)
                    chk.equal(what + " vs gloo", out, reference)
    # A 2-D, non-trivially shaped tensor reduces element-wise like a flat one.
    x = rank_input(torch.int32, 35, rank).reshape(5, 7)
    dist.all_reduce(x)
    chk.equal("all_reduce SUM int32 5x7", x,
              expected_reduction(Op("SUM"), torch.int32, 35, world).reshape(5, 7))
    return result(chk)


@pytest.mark.parametrize("world_size,transport",
                         transport_cases(tcp_worlds=(3,), hierarchical_worlds=(3, 4)))
def test_all_reduce(world_size, transport):
    run_checks(_all_reduce, world_size, min_checks=200, transport=transport)


def _reduce(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for root in range(world):
        for dtype in DTYPES:
            for op in ops_for(dtype):
                for n in (7,) if op.name != "SUM" else COUNTS:
                    what = f"reduce root={root} {op.label} {_name(dtype)} n={n}"
                    x = rank_input(dtype, n, rank, op.pattern)
                    out = x.clone()
                    dist.reduce(out, dst=root, op=op.make(dtype))
                    if rank == root:
                        compare(chk, what, op, out, expected_reduction(op, dtype, n, world))
                    else:
                        chk.equal(what + " (non-root keeps its input)", out, x)
                    if gloo_supports(dtype, op) and n == 7:
                        reference = x.clone()
                        dist.reduce(reference, dst=root, op=op.make(dtype), group=gloo)
                        if rank == root:
                            chk.equal(what + " vs gloo", out, reference)
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(2,)))
def test_reduce_every_root(world_size, transport):
    run_checks(_reduce, world_size, min_checks=60, transport=transport)


def _reduce_scatter(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS if op.name in ("SUM", "MAX") else (7,):
                x = rank_input(dtype, n * world, rank, op.pattern)
                expected = expected_reduction(op, dtype, n * world, world)[rank * n:(rank + 1) * n]
                # reduce_scatter_tensor (flat input)
                what = f"reduce_scatter_tensor {op.label} {_name(dtype)} n={n}"
                out = different_from(expected)
                dist.reduce_scatter_tensor(out, x, op=op.make(dtype))
                compare(chk, what, op, out, expected)
                chk.equal(what + " (input untouched)", x, rank_input(dtype, n * world, rank,
                                                                      op.pattern))
                if gloo_supports(dtype, op):
                    reference = torch.empty_like(out)
                    dist.reduce_scatter_tensor(reference, x.clone(), op=op.make(dtype), group=gloo)
                    chk.equal(what + " vs gloo", out, reference)
                # reduce_scatter (list of per-rank inputs)
                what = f"reduce_scatter {op.label} {_name(dtype)} n={n}"
                pieces = [x[b * n:(b + 1) * n].clone() for b in range(world)]
                out = different_from(expected)
                dist.reduce_scatter(out, pieces, op=op.make(dtype))
                compare(chk, what, op, out, expected)
                if gloo_supports(dtype, op):
                    reference = torch.empty_like(out)
                    dist.reduce_scatter(reference, [p.clone() for p in pieces], op=op.make(dtype),
                                        group=gloo)
                    chk.equal(what + " vs gloo", out, reference)
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(3,)))
def test_reduce_scatter(world_size, transport):
    run_checks(_reduce_scatter, world_size, min_checks=100, transport=transport)


def _all_reduce_coalesced(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    sizes = (7, 0, 1, 1001, 3)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.complex64):
        for op in [o for o in ops_for(dtype) if o.name in ("SUM", "MAX", "AVG", "PREMUL_SUM")]:
            what = f"all_reduce_coalesced {op.label} {_name(dtype)}"
            inputs = [rank_input(dtype, n, rank + k, op.pattern) for k, n in enumerate(sizes)]
            outs = [t.clone() for t in inputs]
            dist.all_reduce_coalesced(outs, op=op.make(dtype))
            for k, n in enumerate(sizes):
                expected = op.reference([rank_input(dtype, n, r + k, op.pattern)
                                         for r in range(world)], dtype)
                compare(chk, f"{what} tensor {k} (n={n})", op, outs[k], expected)
            if gloo_supports(dtype, op):
                reference = [t.clone() for t in inputs]
                dist.all_reduce_coalesced(reference, op=op.make(dtype), group=gloo)
                for k in range(len(sizes)):
                    chk.equal(f"{what} tensor {k} vs gloo", outs[k], reference[k])
    # async form: the future completes with the reduced tensors
    outs = [rank_input(torch.float32, n, rank) for n in (3, 5)]
    future = dist.all_reduce_coalesced(outs, async_op=True)
    future.wait()
    for t, n in zip(outs, (3, 5)):
        chk.equal(f"async all_reduce_coalesced n={n}", t,
                  expected_reduction(Op("SUM"), torch.float32, n, world))
    return result(chk)


@pytest.mark.parametrize("world_size,transport",
                         transport_cases(tcp_worlds=(2,), hierarchical_worlds=(4,)))
def test_all_reduce_coalesced(world_size, transport):
    run_checks(_all_reduce_coalesced, world_size, min_checks=20, transport=transport)


def _async_work(rank, world):
    chk = Checker(rank)
    expected = expected_reduction(Op("SUM"), torch.float32, 1001, world)
    # wait(), is_completed(), then the future's value: a list holding the output tensor.
    t = rank_input(torch.float32, 1001, rank)
    work = dist.all_reduce(t, async_op=True)
    chk.true("all_reduce async returns a Work", isinstance(work, dist.Work), repr(work))
    chk.true("Work.wait() returns True", work.wait() is True)
    chk.true("is_completed() after wait()", work.is_completed())
    chk.equal("async all_reduce result", t, expected)
    value = work.get_future().wait()
    chk.true("future value is a list of one tensor",
             isinstance(value, list) and len(value) == 1 and isinstance(value[0], torch.Tensor),
             repr(type(value)))
    if isinstance(value, list) and value:
        chk.true("future value is the output tensor itself", value[0].data_ptr() == t.data_ptr())
        chk.equal("future value", value[0], expected)
    chk.equal("Work.result()", work.result()[0], expected)
    # get_future() before completion, chained with then(): the callback sees the reduced value.
    t = rank_input(torch.int64, 7, rank)
    work = dist.all_reduce(t, op=R.MAX, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2).wait()
    chk.equal("future.then() on MAX", doubled,
              expected_reduction(Op("MAX"), torch.int64, 7, world) * 2)
    # Several outstanding async collectives of different kinds complete in order, correctly.
    a = rank_input(torch.float64, 1001, rank)
    b = rank_input(torch.int32, 7, rank)
    gathered = torch.empty(7 * world, dtype=torch.int32)
    c = rank_input(torch.uint8, 5, rank) if rank == 0 else torch.zeros(5, dtype=torch.uint8)
    works = [dist.all_reduce(a, async_op=True),
             dist.all_gather_into_tensor(gathered, b, async_op=True),
             dist.broadcast(c, src=0, async_op=True),
             dist.barrier(async_op=True)]
    for w in reversed(works):
        w.wait()
    chk.true("all outstanding works completed", all(w.is_completed() for w in works))
    chk.equal("outstanding all_reduce", a,
              expected_reduction(Op("SUM"), torch.float64, 1001, world))
    chk.equal("outstanding all_gather_into_tensor", gathered,
              torch.cat([rank_input(torch.int32, 7, r) for r in range(world)]))
    chk.equal("outstanding broadcast", c, rank_input(torch.uint8, 5, 0))
    return result(chk)


def _coalesced_variants(rank, world):
    """The *_coalesced entry points that functional collectives, DTensor and FSDP use, reached
    through the ProcessGroup bindings, the coalescing manager and functional collectives."""
    import torch.distributed._functional_collectives as funcol

    chk, pg = Checker(rank), dist.distributed_c10d._get_default_group()
    sizes = (7, 0, 1001)
    sum_ = Op("SUM")
    # allgather_into_tensor_coalesced
    inputs = [rank_input(torch.float32, n, rank + k) for k, n in enumerate(sizes)]
    outputs = [torch.full((n * world,), -1.0) for n in sizes]
    pg.allgather_into_tensor_coalesced(outputs, inputs).wait()
    for k, n in enumerate(sizes):
        chk.equal(f"allgather_into_tensor_coalesced tensor {k}", outputs[k],
                  torch.cat([rank_input(torch.float32, n, r + k) for r in range(world)]))
    # reduce_scatter_tensor_coalesced
    inputs = [rank_input(torch.int64, n * world, rank + k) for k, n in enumerate(sizes)]
    outputs = [torch.full((n,), -1, dtype=torch.int64) for n in sizes]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = R.SUM
    pg.reduce_scatter_tensor_coalesced(outputs, inputs, opts).wait()
    for k, n in enumerate(sizes):
        full = sum_.reference([rank_input(torch.int64, n * world, r + k) for r in range(world)],
                              torch.int64)
        chk.equal(f"reduce_scatter_tensor_coalesced tensor {k}", outputs[k],
                  full[rank * n:(rank + 1) * n])
    # gather_into_tensor (root receives everything in one tensor): newer torch only (the backend
    # implements it where torch's Backend declares it).
    for root in range(world) if hasattr(pg, "gather_into_tensor") else ():
        out = torch.full((5 * world,), -1, dtype=torch.int32)
        opts = dist.GatherOptions()
        opts.rootRank = root
        pg.gather_into_tensor(out, rank_input(torch.int32, 5, rank), opts).wait()
        if rank == root:
            chk.equal(f"gather_into_tensor root={root}", out,
                      torch.cat([rank_input(torch.int32, 5, r) for r in range(world)]))
    # The coalescing manager, fast path (no device) and start/endCoalescing (device given).
    for device in (None, torch.device("cpu")):
        a, b = rank_input(torch.float32, 7, rank), rank_input(torch.float32, 1001, rank + 1)
        with dist._coalescing_manager(device=device, async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        chk.equal(f"coalescing manager all_reduce a (device={device})", a,
                  expected_reduction(sum_, torch.float32, 7, world))
        chk.equal(f"coalescing manager all_reduce b (device={device})", b, sum_.reference(
            [rank_input(torch.float32, 1001, r + 1) for r in range(world)], torch.float32))
        outs = [torch.empty(3 * world), torch.empty(4 * world)]
        with dist._coalescing_manager(device=device):
            dist.all_gather_into_tensor(outs[0], rank_input(torch.float32, 3, rank))
            dist.all_gather_into_tensor(outs[1], rank_input(torch.float32, 4, rank + 9))
        chk.equal(f"coalescing manager all_gather_into_tensor (device={device})",
                  torch.cat(outs), torch.cat(
                      [rank_input(torch.float32, 3, r) for r in range(world)]
                      + [rank_input(torch.float32, 4, r + 9) for r in range(world)]))
        outs = [torch.empty(2), torch.empty(6)]
        with dist._coalescing_manager(device=device):
            dist.reduce_scatter_tensor(outs[0], rank_input(torch.float32, 2 * world, rank))
            dist.reduce_scatter_tensor(outs[1], rank_input(torch.float32, 6 * world, rank + 3))
        chk.equal(f"coalescing manager reduce_scatter_tensor (device={device})", outs[1],
                  sum_.reference([rank_input(torch.float32, 6 * world, r + 3)
                                  for r in range(world)], torch.float32)[rank * 6:rank * 6 + 6])
    # Functional collectives (the traceable API DTensor is built on).
    group = dist.group.WORLD
    x = rank_input(torch.float32, 1001, rank)
    chk.equal("funcol.all_reduce", funcol.all_reduce(x, "sum", group).wait(),
              expected_reduction(sum_, torch.float32, 1001, world))
    chk.equal("funcol.all_reduce max", funcol.all_reduce(x, "max", group).wait(),
              expected_reduction(Op("MAX"), torch.float32, 1001, world))
    chk.equal("funcol.all_reduce avg", funcol.all_reduce(x, "avg", group).wait(),
              expected_reduction(Op("AVG"), torch.float32, 1001, world))
    chk.equal("funcol.all_gather_tensor", funcol.all_gather_tensor(x, 0, group).wait(),
              torch.cat([rank_input(torch.float32, 1001, r) for r in range(world)]))
    y = rank_input(torch.float32, 6 * world, rank).reshape(2 * world, 3)
    chk.equal("funcol.reduce_scatter_tensor", funcol.reduce_scatter_tensor(y, "sum", 0,
                                                                          group).wait(),
              expected_reduction(sum_, torch.float32, 6 * world, world).reshape(2 * world, 3)
              [2 * rank:2 * rank + 2])
    many = funcol.all_reduce_coalesced([x, rank_input(torch.float32, 3, rank)], "sum", group)
    chk.equal("funcol.all_reduce_coalesced", torch.cat([t.wait() for t in many]), torch.cat(
        [expected_reduction(sum_, torch.float32, 1001, world),
         expected_reduction(sum_, torch.float32, 3, world)]))
    splits = [(rank + p) % 3 for p in range(world)]
    received = [(p + rank) % 3 for p in range(world)]
    z = torch.cat([torch.full(((rank + p) % 3,), float(100 * rank + p)) for p in range(world)])
    chk.equal("funcol.all_to_all_single", funcol.all_to_all_single(z, received, splits,
                                                                  group).wait(),
              torch.cat([torch.full((received[p],), float(100 * p + rank)) for p in range(world)]))
    b = x if rank == world - 1 else torch.zeros(1001)
    chk.equal("funcol.broadcast", funcol.broadcast(b, world - 1, group).wait(),
              rank_input(torch.float32, 1001, world - 1))
    return result(chk)


@pytest.mark.parametrize("world_size,transport",
                         transport_cases(tcp_worlds=(3,), hierarchical_worlds=(4,)))
def test_coalesced_and_functional_collectives(world_size, transport):
    run_checks(_coalesced_variants, world_size, min_checks=20, transport=transport)


@pytest.mark.parametrize("world_size,transport",
                         transport_cases(tcp_worlds=(2,), hierarchical_worlds=(3,)))
def test_async_work_and_futures(world_size, transport):
    run_checks(_async_work, world_size, min_checks=12, transport=transport)


# --- data movement --------------------------------------------------------------------------

def _broadcast(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for root in range(world):
        for dtype in DTYPES:
            for n in COUNTS:
                what = f"broadcast root={root} {_name(dtype)} n={n}"
                expected = rank_input(dtype, n, root)
                x = expected.clone() if rank == root else different_from(expected)
                dist.broadcast(x, src=root)
                chk.equal(what, x, expected)
                if gloo_supports(dtype) and n == 7:
                    reference = expected.clone() if rank == root else different_from(expected)
                    dist.broadcast(reference, src=root, group=gloo)
                    chk.equal(what + " vs gloo", x, reference)
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(3,)))
def test_broadcast_every_root(world_size, transport):
    run_checks(_broadcast, world_size, min_checks=40, transport=transport)


def _all_gather(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for dtype in DTYPES:
        for n in COUNTS:
            x = rank_input(dtype, n, rank)
            parts = [rank_input(dtype, n, r) for r in range(world)]
            # list form
            what = f"all_gather {_name(dtype)} n={n}"
            outs = [different_from(p) for p in parts]
            dist.all_gather(outs, x)
            for r in range(world):
                chk.equal(f"{what} part {r}", outs[r], parts[r])
            if gloo_supports(dtype):
                reference = [torch.empty_like(p) for p in parts]
                dist.all_gather(reference, x, group=gloo)
                for r in range(world):
                    chk.equal(f"{what} part {r} vs gloo", outs[r], reference[r])
            # flat form
            what = f"all_gather_into_tensor {_name(dtype)} n={n}"
            expected = torch.cat(parts)
            out = different_from(expected)
            dist.all_gather_into_tensor(out, x)
            chk.equal(what, out, expected)
            if gloo_supports(dtype):
                reference = torch.empty_like(out)
                dist.all_gather_into_tensor(reference, x, group=gloo)
                chk.equal(what + " vs gloo", out, reference)
    # 2-D input into a stacked output (the DTensor/FSDP shape)
    x = rank_input(torch.float32, 12, rank).reshape(3, 4)
    out = torch.empty(world, 3, 4)
    dist.all_gather_into_tensor(out, x)
    chk.equal("all_gather_into_tensor 3x4 -> stacked", out,
              torch.stack([rank_input(torch.float32, 12, r).reshape(3, 4) for r in range(world)]))
    # Uneven list form: rank r contributes (r % 3) * 2 elements (zero for some ranks).
    x = rank_input(torch.int64, (rank % 3) * 2, rank)
    outs = [torch.full(((r % 3) * 2,), -99, dtype=torch.int64) for r in range(world)]
    dist.all_gather(outs, x)
    for r in range(world):
        chk.equal(f"uneven all_gather part {r}", outs[r], rank_input(torch.int64, (r % 3) * 2, r))
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(3,)))
def test_all_gather(world_size, transport):
    run_checks(_all_gather, world_size, min_checks=40, transport=transport)


def _gather_scatter(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for root in range(world):
        for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.bool,
                      torch.complex64):
            for n in COUNTS:
                parts = [rank_input(dtype, n, r) for r in range(world)]
                # gather: root receives every rank's input in rank order
                what = f"gather root={root} {_name(dtype)} n={n}"
                outs = [different_from(p) for p in parts] if rank == root else None
                dist.gather(parts[rank].clone(), outs, dst=root)
                if rank == root:
                    for r in range(world):
                        chk.equal(f"{what} part {r}", outs[r], parts[r])
                if gloo_supports(dtype) and n == 7:
                    reference = [torch.empty_like(p) for p in parts] if rank == root else None
                    dist.gather(real(parts[rank].clone()), [real(t) for t in reference]
                                if rank == root else None, dst=root, group=gloo)
                    if rank == root:
                        for r in range(world):
                            chk.equal(f"{what} part {r} vs gloo", outs[r], reference[r])
                # scatter: rank r receives the root's piece r
                what = f"scatter root={root} {_name(dtype)} n={n}"
                pieces = [rank_input(dtype, n, 10 * root + r) for r in range(world)]
                out = different_from(pieces[rank])
                dist.scatter(out, [p.clone() for p in pieces] if rank == root else None, src=root)
                chk.equal(what, out, pieces[rank])
                if gloo_supports(dtype) and n == 7:
                    reference = torch.empty_like(out)
                    dist.scatter(real(reference), [real(p.clone()) for p in pieces]
                                 if rank == root else None, src=root, group=gloo)
                    chk.equal(what + " vs gloo", out, reference)
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(2,)))
def test_gather_scatter_every_root(world_size, transport):
    run_checks(_gather_scatter, world_size, min_checks=40, transport=transport)


def _a2a_block(dtype, rows, src, dst, cols=3):
    """The rows that rank src sends to rank dst (distinct per pair)."""
    return rank_input(dtype, rows * cols, 100 * src + dst).reshape(rows, cols)


def _all_to_all(rank, world):
    chk, gloo = Checker(rank), gloo_group()
    for dtype in DTYPES:
        # equal splits (no split sizes given)
        for n in COUNTS:
            what = f"all_to_all_single equal {_name(dtype)} rows/peer={n}"
            x = torch.cat([_a2a_block(dtype, n, rank, p) for p in range(world)])
            expected = torch.cat([_a2a_block(dtype, n, p, rank) for p in range(world)])
            out = different_from(expected)
            dist.all_to_all_single(out, x)
            chk.equal(what, out, expected)
            if gloo_supports(dtype) and n == 7:
                reference = torch.empty_like(out)
                dist.all_to_all_single(real(reference), real(x), group=gloo)
                chk.equal(what + " vs gloo", out, reference)
        # uneven splits, zeros included: rank s sends (s + 2d) % 3 rows to d
        for scale in (1, 333):
            def rows(s, d, scale=scale):
                return ((s + 2 * d) % 3) * scale
            what = f"all_to_all_single uneven {_name(dtype)} scale={scale}"
            in_splits = [rows(rank, p) for p in range(world)]
            out_splits = [rows(p, rank) for p in range(world)]
            x = torch.cat([_a2a_block(dtype, rows(rank, p), rank, p) for p in range(world)])
            expected = torch.cat([_a2a_block(dtype, rows(p, rank), p, rank) for p in range(world)])
            out = different_from(expected)
            dist.all_to_all_single(out, x, out_splits, in_splits)
            chk.equal(what, out, expected)
            if gloo_supports(dtype) and scale == 1:
                reference = torch.empty_like(out)
                dist.all_to_all_single(real(reference), real(x), out_splits, in_splits,
                                       group=gloo)
                chk.equal(what + " vs gloo", out, reference)
        # list form, different sizes per pair (gloo needs equal sizes: compared on a second,
        # equal-sized exchange)
        what = f"all_to_all (list) {_name(dtype)}"
        inputs = [_a2a_block(dtype, (rank + p) % 3 + 1, rank, p) for p in range(world)]
        expected = [_a2a_block(dtype, (p + rank) % 3 + 1, p, rank) for p in range(world)]
        outs = [different_from(e) for e in expected]
        dist.all_to_all(outs, inputs)
        for p in range(world):
            chk.equal(f"{what} from {p}", outs[p], expected[p])
        if gloo_supports(dtype):
            inputs = [_a2a_block(dtype, 2, rank, p) for p in range(world)]
            outs = [torch.empty_like(t) for t in inputs]
            reference = [torch.empty_like(t) for t in inputs]
            dist.all_to_all(outs, inputs)
            dist.all_to_all([real(t) for t in reference], [real(t.clone()) for t in inputs],
                            group=gloo)
            for p in range(world):
                chk.equal(f"{what} equal sizes from {p}", outs[p], _a2a_block(dtype, 2, p, rank))
                chk.equal(f"{what} equal sizes from {p} vs gloo", outs[p], reference[p])
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(3,)))
def test_all_to_all(world_size, transport):
    run_checks(_all_to_all, world_size, min_checks=60, transport=transport)


def _large(rank, world):
    """> 1M elements: the ring/pipelined paths, compared exactly and with gloo."""
    chk, gloo = Checker(rank), gloo_group()
    n = LARGE
    for dtype, op in ((torch.float32, Op("SUM")), (torch.bfloat16, Op("SUM")),
                      (torch.int32, Op("MAX")), (torch.float32, Op("AVG"))):
        what = f"all_reduce {op.label} {_name(dtype)} n={n}"
        x = rank_input(dtype, n, rank, op.pattern)
        out = x.clone()
        dist.all_reduce(out, op=op.make(dtype))
        compare(chk, what, op, out, expected_reduction(op, dtype, n, world))
        if gloo_supports(dtype, op):
            reference = x.clone()
            dist.all_reduce(reference, op=op.make(dtype), group=gloo)
            chk.equal(what + " vs gloo", out, reference)
    for dtype in (torch.float32, torch.uint8):
        what = f"all_gather_into_tensor {_name(dtype)} n={n}"
        parts = [rank_input(dtype, n, r) for r in range(world)]
        out = torch.empty(n * world, dtype=dtype)
        dist.all_gather_into_tensor(out, parts[rank])
        chk.equal(what, out, torch.cat(parts))
        outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, parts[rank])
        chk.equal(f"all_gather {_name(dtype)} n={n}", torch.cat(outs), torch.cat(parts))
        reference = torch.empty_like(out)
        dist.all_gather_into_tensor(reference, parts[rank], group=gloo)
        chk.equal(what + " vs gloo", out, reference)
    for dtype, op in ((torch.float32, Op("SUM")), (torch.int64, Op("MIN"))):
        what = f"reduce_scatter_tensor {op.label} {_name(dtype)} n={n}/rank"
        x = rank_input(dtype, n * world, rank, op.pattern)
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(out, x, op=op.make(dtype))
        expected = expected_reduction(op, dtype, n * world, world)[rank * n:(rank + 1) * n]
        chk.equal(what, out, expected)
        reference = torch.empty_like(out)
        dist.reduce_scatter_tensor(reference, x, op=op.make(dtype), group=gloo)
        chk.equal(what + " vs gloo", out, reference)
    for root in sorted({0, world - 1}):
        for dtype in (torch.float32, torch.int8):
            what = f"broadcast root={root} {_name(dtype)} n={n}"
            expected = rank_input(dtype, n, root)
            x = expected.clone() if rank == root else torch.zeros(n, dtype=dtype)
            dist.broadcast(x, src=root)
            chk.equal(what, x, expected)
        what = f"reduce root={root} SUM float32 n={n}"
        x = rank_input(torch.float32, n, rank)
        dist.reduce(x, dst=root)
        if rank == root:
            chk.equal(what, x, expected_reduction(Op("SUM"), torch.float32, n, world))
    # all_to_all_single: ~LARGE elements per rank in uneven splits
    def count(s, d):
        return n // world + (1 if d < n % world else 0) + (s - d)

    for dtype in (torch.float32, torch.int16):
        what = f"all_to_all_single {_name(dtype)} ~{n}/rank"
        in_splits = [count(rank, p) for p in range(world)]
        out_splits = [count(p, rank) for p in range(world)]
        x = torch.cat([_a2a_block(dtype, count(rank, p), rank, p, cols=1) for p in range(world)])
        expected = torch.cat([_a2a_block(dtype, count(p, rank), p, rank, cols=1)
                              for p in range(world)])
        out = torch.empty_like(expected)
        dist.all_to_all_single(out, x, out_splits, in_splits)
        chk.equal(what, out, expected)
        if gloo_supports(dtype):
            reference = torch.empty_like(expected)
            dist.all_to_all_single(reference, x, out_splits, in_splits, group=gloo)
            chk.equal(what + " vs gloo", out, reference)
    return result(chk)


@pytest.mark.parametrize("world_size,transport",
                         transport_cases(tcp_worlds=(4,), hierarchical_worlds=(4,)))
def test_large_messages(world_size, transport):
    run_checks(_large, world_size, min_checks=15, timeout=300, transport=transport)


# --- objects, barrier, groups ---------------------------------------------------------------

def _object(rank):
    return {"rank": rank, "payload": "x" * (rank * 1000 + 1), "list": list(range(rank))}


def _objects(rank, world):
    chk = Checker(rank)
    gathered = [None] * world
    dist.all_gather_object(gathered, _object(rank))
    chk.equal("all_gather_object", gathered, [_object(r) for r in range(world)])
    for root in range(world):
        objects = [_object(root), ("root", root)] if rank == root else [None, None]
        dist.broadcast_object_list(objects, src=root)
        chk.equal(f"broadcast_object_list root={root}", objects, [_object(root), ("root", root)])
        out = [None] * world if rank == root else None
        dist.gather_object(_object(rank), out, dst=root)
        if rank == root:
            chk.equal(f"gather_object root={root}", out, [_object(r) for r in range(world)])
        received = [None]
        dist.scatter_object_list(received, [_object(10 * root + r) for r in range(world)]
                                 if rank == root else None, src=root)
        chk.equal(f"scatter_object_list root={root}", received[0], _object(10 * root + rank))
    return result(chk)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_object_collectives(world_size):
    run_checks(_objects, world_size, min_checks=4)


def _barrier(rank, world):
    chk = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    for round_ in range(5):
        # One rank arrives late each round (kept away on purpose); after the barrier every rank
        # must see every other rank's pre-barrier store write.
        if rank == round_ % world:
            time.sleep(0.3)
        store.set(f"barrier/{round_}/{rank}", "1")
        store.get(f"barrier/{round_}/{rank}")  # a round trip: the store has applied the set
        dist.barrier()
        keys = [f"barrier/{round_}/{r}" for r in range(world)]
        chk.true(f"barrier round {round_}", store.check(keys), "a rank passed the barrier early")
    work = dist.barrier(async_op=True)
    chk.true("async barrier completes", work.wait() and work.is_completed())
    return result(chk)


@pytest.mark.parametrize("world_size,transport", transport_cases(tcp_worlds=(3,)))
def test_barrier(world_size, transport):
    run_checks(_barrier, world_size, min_checks=6, transport=transport)


def _new_group(rank, world):
    chk = Checker(rank)
    groups = {
        "all": list(range(world)),
        "without rank 0": list(range(1, world)),
        "odd ranks": list(range(1, world, 2)),
        "first and last": sorted({0, world - 1}),
        "self": [rank],
    }
    made = {}
    for label, ranks in groups.items():
        if label == "self":  # every rank creates every singleton group, in the same order
            for r in range(world):
                g = dist.new_group([r], backend="xccl")
                if r == rank:
                    made[label] = (g, [r])
            continue
        if not ranks:
            continue
        made[label] = (dist.new_group(ranks, backend="xccl"), ranks)
    for label, (g, ranks) in made.items():
        what = f"new_group {label} {ranks}"
        if rank not in ranks:
            chk.true(what + ": non-member gets NON_GROUP_MEMBER",
                     g is dist.GroupMember.NON_GROUP_MEMBER, repr(g))
            t = torch.full((3,), 5.0)
            chk.true(what + ": collective on a non-member is a no-op",
                     dist.all_reduce(t, group=g) is None and torch.equal(t, torch.full((3,), 5.0)))
            continue
        chk.equal(what + " backend", dist.get_backend(g), "xccl")
        # Subgroups get their own segment wherever the default group has one.
        chk.equal(what + " transport", group_transport(g),
                  group_transport() if len(ranks) > 1 else "tcp")
        chk.equal(what + " size", dist.get_world_size(g), len(ranks))
        chk.equal(what + " group rank", dist.get_rank(g), ranks.index(rank))
        x = rank_input(torch.int64, 1001, rank)
        dist.all_reduce(x, group=g)
        chk.equal(what + " all_reduce", x,
                  Op("SUM").reference([rank_input(torch.int64, 1001, r) for r in ranks],
                                      torch.int64))
        src = ranks[-1]
        b = rank_input(torch.float32, 7, src) if rank == src else torch.zeros(7)
        dist.broadcast(b, src=src, group=g)
        chk.equal(what + f" broadcast from global rank {src}", b, rank_input(torch.float32, 7, src))
        out = torch.empty(5 * len(ranks), dtype=torch.int32)
        dist.all_gather_into_tensor(out, rank_input(torch.int32, 5, rank), group=g)
        chk.equal(what + " all_gather_into_tensor", out,
                  torch.cat([rank_input(torch.int32, 5, r) for r in ranks]))
    # The default group still works after (and between) subgroup traffic.
    x = rank_input(torch.float32, 7, rank)
    dist.all_reduce(x)
    chk.equal("default group after subgroups", x, expected_reduction(Op("SUM"), torch.float32, 7,
                                                                     world))
    # new_subgroups: contiguous groups of 2 (or 1), each reducing independently.
    size = 2 if world % 2 == 0 else 1
    mine, _ = dist.new_subgroups(group_size=size, backend="xccl")
    members = list(range(rank - rank % size, rank - rank % size + size))
    x = rank_input(torch.int64, 7, rank)
    dist.all_reduce(x, group=mine)
    chk.equal(f"new_subgroups size {size}", x,
              Op("SUM").reference([rank_input(torch.int64, 7, r) for r in members], torch.int64))
    return result(chk)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_new_group(world_size):
    run_checks(_new_group, world_size, min_checks=8)


def _split(rank, world):
    """ProcessGroup.split_group (C++ binding) -> ProcessGroupXccl::split.

    torch.distributed.split_group itself refuses on CPU in torch 2.14 (it requires an
    accelerator or torchcomms), so the split is driven through the bound C++ ProcessGroup.
    """
    import xccl

    chk = Checker(rank)
    cpu = torch.device("cpu")
    parent = dist.distributed_c10d._get_default_group()
    parent_backend = parent._get_backend(cpu)
    chk.true("default backend is ProcessGroupXccl",
             isinstance(parent_backend, xccl.ProcessGroupXccl), repr(parent_backend))
    chk.true("supports_splitting", parent_backend.supports_splitting)
    # Two splits: the upper half (excludes rank 0 when world > 1), then everyone reversed.
    upper = list(range(world // 2, world))
    child = parent.split_group(upper, timeout=timedelta(seconds=60))
    if rank not in upper:
        chk.true("split: a non-member gets None", child is None, repr(child))
    else:
        chk.equal("split size", child.size(), len(upper))
        chk.equal("split rank", child.rank(), upper.index(rank))
        backend = child._get_backend(cpu)
        chk.true("split backend is ProcessGroupXccl", isinstance(backend, xccl.ProcessGroupXccl),
                 repr(backend))
        chk.equal("split transport", group_transport(child),
                  group_transport() if len(upper) > 1 else "tcp")
        x = rank_input(torch.float32, 1001, rank)
        child.allreduce([x]).wait()
        chk.equal("split allreduce", x,
                  Op("SUM").reference([rank_input(torch.float32, 1001, r) for r in upper],
                                      torch.float32))
    reversed_ranks = list(reversed(range(world)))
    options = xccl.Options()
    options.algorithm = "ring"
    child = parent.split_group(reversed_ranks, timeout=timedelta(seconds=45), opts=options)
    # torch 2.14 keeps the order given; earlier versions sort the ranks before the backend's
    # split sees them. Either way the child's ranks follow the list the backend was given.
    torch_version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    order = reversed_ranks if torch_version >= (2, 14) else sorted(reversed_ranks)
    chk.equal("reversed split rank", child.rank(), order.index(rank))
    backend = child._get_backend(cpu)
    chk.equal("split carries the given options (algorithm)", backend.options.algorithm, "ring")
    chk.equal("split carries the timeout", backend.options.timeout, timedelta(seconds=45))
    out = torch.empty(3 * world, dtype=torch.int64)
    child._allgather_base(out, rank_input(torch.int64, 3, rank)).wait()
    chk.equal("reversed split all_gather (child rank order)", out,
              torch.cat([rank_input(torch.int64, 3, r) for r in order]))
    x = rank_input(torch.int32, 7, rank)
    dist.all_reduce(x)
    chk.equal("parent group after split", x, expected_reduction(Op("SUM"), torch.int32, 7, world))
    return result(chk)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_split_group_via_cpp_binding(world_size):
    run_checks(_split, world_size, min_checks=6)
