"""Inputs, exact references and comparisons shared by the collective tests of backend "xccl"
(test_collectives_*.py, test_p2p.py, test_errors.py, test_registration.py).

Each of those tests is one spawn per world size; the ranks sweep their matrix and return
failure descriptions (dist_harness.Checker), so one run reports every mismatch. Inputs are small
integers, so sums, products and averages have exact references that every rank computes for all
ranks locally (rank_input is a pure function of dtype, count, rank and pattern).
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.distributed as dist
from dist_harness import Checker

R = dist.ReduceOp
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
DTYPES = FLOATS + INTS + (torch.bool, torch.complex64)
COUNTS = (0, 1, 7, 1001)
LARGE = 1_000_003
# What gloo implements on CPU (probed on torch 2.14): no int16, no AVG, no PREMUL_SUM.
GLOO_DTYPES = tuple(d for d in DTYPES if d != torch.int16)
GLOO_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


def dtype_name(dtype: torch.dtype) -> str:
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
            v = (v - 127) * {
                torch.int8: 1,
                torch.int16: 257,
                torch.int32: 16777217,
                torch.int64: 1099512676353,
            }[dtype]
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
        wide = (
            torch.complex128
            if dtype.is_complex
            else (torch.float64 if dtype.is_floating_point else torch.int64)
        )
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
            combine = {
                "PRODUCT": torch.mul,
                "MIN": torch.minimum,
                "MAX": torch.maximum,
                "BAND": torch.bitwise_and,
                "BOR": torch.bitwise_or,
                "BXOR": torch.bitwise_xor,
            }[self.name]
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
    return tile(
        op.reference([rank_input(dtype, period, r, op.pattern) for r in range(world)], dtype), n
    )


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


def check_all_reduce(chk: Checker, gloo, op: Op, dtype: torch.dtype, n: int, rank: int, world: int):
    """all_reduce of rank_input(dtype, n) with `op`: against the exact reduction, and against
    gloo (group `gloo`) where gloo supports the dtype and op."""
    what = f"all_reduce {op.label} {dtype_name(dtype)} n={n}"
    x = rank_input(dtype, n, rank, op.pattern)
    out = x.clone()
    dist.all_reduce(out, op=op.make(dtype))
    compare(chk, what, op, out, expected_reduction(op, dtype, n, world))
    if gloo_supports(dtype, op):
        reference = x.clone()
        dist.all_reduce(reference, op=op.make(dtype), group=gloo)
        chk.equal(what + " vs gloo", out, reference)


def check_reduce_scatter_tensor(
    chk: Checker, gloo, op: Op, dtype: torch.dtype, n: int, rank: int, world: int
) -> torch.Tensor:
    """reduce_scatter_tensor of rank_input(dtype, n * world) with `op`, n elements per rank:
    against this rank's slice of the exact reduction (the input left untouched), and against
    gloo (group `gloo`) where gloo supports the dtype and op. Returns the input."""
    x = rank_input(dtype, n * world, rank, op.pattern)
    expected = expected_reduction(op, dtype, n * world, world)[rank * n : (rank + 1) * n]
    what = f"reduce_scatter_tensor {op.label} {dtype_name(dtype)} n={n}"
    out = different_from(expected)
    dist.reduce_scatter_tensor(out, x, op=op.make(dtype))
    compare(chk, what, op, out, expected)
    chk.equal(what + " (input untouched)", x, rank_input(dtype, n * world, rank, op.pattern))
    if gloo_supports(dtype, op):
        reference = torch.empty_like(out)
        dist.reduce_scatter_tensor(reference, x.clone(), op=op.make(dtype), group=gloo)
        chk.equal(what + " vs gloo", out, reference)
    return x


def check_sum(chk: Checker, what: str, dtype: torch.dtype, n: int, rank: int, world: int, seed=0):
    """all_reduce SUM of rank_input(dtype, n, rank + seed) against its exact reference: after a
    refused or interleaved call, shows that the group still works and the ranks are in step."""
    x = rank_input(dtype, n, rank + seed)
    dist.all_reduce(x)
    reference = [rank_input(dtype, n, r + seed) for r in range(world)]
    chk.equal(what, x, Op("SUM").reference(reference, dtype))


def ring_batch(numel: int, rank: int, world: int, device: str = "cpu") -> torch.Tensor:
    """One batch_isend_irecv around the ring: sends `numel` copies of this rank's number to the
    next rank; returns what came from the previous one (its number, where the batch worked)."""
    got = torch.zeros(numel, device=device)
    mine = torch.full((numel,), float(rank), device=device)
    ops = [
        dist.P2POp(dist.isend, mine, (rank + 1) % world),
        dist.P2POp(dist.irecv, got, (rank - 1) % world),
    ]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return got
