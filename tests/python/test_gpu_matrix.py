"""Every collective xccl's kernels run, x every dtype, x every reduce op, through the kernel route
(XCCL_GPU_ALGO=kernel) with 2 and 4 ranks sharing cuda:0 over CUDA IPC, checked bit for bit
against a reference the host computes from every rank's input. Each case is then captured in a
CUDA graph and replayed on new inputs, and checked again.

The capture is also the route check: ranks that share a GPU have no vendor route (NCCL refuses
them) and the host route cannot be captured (docs/gpu.md), so a case whose capture succeeds ran
xccl's kernel. Inputs are small integers and the factors and divisors powers of two (or 3/8), so
every result is exact in float16 and bfloat16 too, whatever order a kernel adds in. Skipped
without a CUDA GPU; benchmarks/device_check.sh runs it first among the Python GPU tests.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, result, run_checks

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

R = dist.ReduceOp
REDUCE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # what the reduction kernels run
# The copy kernels move bytes: any dtype, odd element sizes included.
COPY_DTYPES = REDUCE_DTYPES + (torch.int64, torch.int32, torch.uint8)
FACTOR = 0.375  # PREMUL_SUM: exact in every dtype, as are its products with the inputs
COUNTS = (1001, 70_001)  # an odd tail; many blocks (well inside the 32 MiB workspace)
OPS = ("SUM", "AVG", "PREMUL_SUM", "PREMUL_SUM tensor", "MIN", "MAX")


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _values(n: int, seed: int) -> torch.Tensor:
    """Small integers in [-5, 5] (float64, on the host): sums of 4 stay exact in bfloat16."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + seed * 5 + 3) % 11 - 5).double()


def _input(dtype, n: int, seed: int) -> torch.Tensor:
    v = _values(n, seed)
    return (v + 5 if dtype == torch.uint8 else v).to(dtype)


def _op(name: str, dtype):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(FACTOR)
    if name == "PREMUL_SUM tensor":
        return dist._make_nccl_premul_sum(torch.tensor(FACTOR, dtype=dtype, device="cuda"))
    return getattr(R, name)


def _reduce(name: str, parts: list, world: int) -> torch.Tensor:
    """The reduction of float64 parts, as exact values (every op's result is representable)."""
    stacked = torch.stack(parts)
    if name == "MIN":
        return stacked.min(0).values
    if name == "MAX":
        return stacked.max(0).values
    total = stacked.sum(0)
    if name == "AVG":
        return total / world
    if name.startswith("PREMUL_SUM"):
        return total * FACTOR
    return total


class Case:
    """One collective call on static tensors: fill(seed) writes this rank's input, call() runs
    the collective, expected(seed) is this rank's exact output."""

    def __init__(self, what, fill, call, output, expected):
        self.what, self.fill, self.call = what, fill, call
        self.output, self.expected = output, expected


def _cases(rank: int, world: int, n: int) -> list:
    cases = []
    for dtype in REDUCE_DTYPES:
        for name in OPS:
            op = _op(name, dtype)
            x = torch.empty(n, dtype=dtype, device="cuda")
            cases.append(
                Case(
                    f"all_reduce {name} {_name(dtype)} n={n}",
                    lambda seed, x=x, dtype=dtype: x.copy_(_input(dtype, n, seed * 8 + rank)),
                    lambda x=x, op=op: dist.all_reduce(x, op=op),
                    x,
                    lambda seed, name=name, dtype=dtype: _reduce(
                        name, [_values(n, seed * 8 + r) for r in range(world)], world
                    ).to(dtype),
                )
            )
            big = torch.empty(n * world, dtype=dtype, device="cuda")
            out = torch.empty(n, dtype=dtype, device="cuda")
            cases.append(
                Case(
                    f"reduce_scatter_tensor {name} {_name(dtype)} n={n}",
                    lambda seed, big=big, dtype=dtype: big.copy_(
                        _input(dtype, n * world, seed * 8 + rank)
                    ),
                    lambda big=big, out=out, op=op: dist.reduce_scatter_tensor(out, big, op=op),
                    out,
                    lambda seed, name=name, dtype=dtype: _reduce(
                        name,
                        [
                            _values(n * world, seed * 8 + r)[rank * n : (rank + 1) * n]
                            for r in range(world)
                        ],
                        world,
                    ).to(dtype),
                )
            )
    for dtype in COPY_DTYPES:
        x = torch.empty(n, dtype=dtype, device="cuda")
        gathered = torch.empty(n * world, dtype=dtype, device="cuda")
        cases.append(
            Case(
                f"all_gather_into_tensor {_name(dtype)} n={n}",
                lambda seed, x=x, dtype=dtype: x.copy_(_input(dtype, n, seed * 8 + rank)),
                lambda x=x, gathered=gathered: dist.all_gather_into_tensor(gathered, x),
                gathered,
                lambda seed, dtype=dtype: torch.cat(
                    [_input(dtype, n, seed * 8 + r) for r in range(world)]
                ),
            )
        )
        for root in range(world):
            b = torch.empty(n, dtype=dtype, device="cuda")
            cases.append(
                Case(
                    f"broadcast root={root} {_name(dtype)} n={n}",
                    lambda seed, b=b, dtype=dtype: b.copy_(_input(dtype, n, seed * 8 + rank)),
                    lambda b=b, root=root: dist.broadcast(b, src=root),
                    b,
                    lambda seed, dtype=dtype, root=root: _input(dtype, n, seed * 8 + root),
                )
            )
        send = torch.empty(n * world, dtype=dtype, device="cuda")
        recv = torch.empty(n * world, dtype=dtype, device="cuda")
        cases.append(
            Case(
                f"all_to_all_single {_name(dtype)} n={n}",
                lambda seed, send=send, dtype=dtype: send.copy_(
                    _input(dtype, n * world, seed * 8 + rank)
                ),
                lambda send=send, recv=recv: dist.all_to_all_single(recv, send),
                recv,
                lambda seed, dtype=dtype: torch.cat(
                    [
                        _input(dtype, n * world, seed * 8 + r)[rank * n : (rank + 1) * n]
                        for r in range(world)
                    ]
                ),
            )
        )
    return cases


def _matrix(rank, world):
    chk = Checker(rank)
    for n in COUNTS:
        for case in _cases(rank, world, n):
            case.fill(1)
            case.call()
            chk.equal(f"{case.what} eager", case.output.cpu(), case.expected(1))
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    case.call()
            except Exception as e:  # noqa: BLE001  (reported: only a kernel route captures)
                chk.true(f"{case.what}: captured", False, f"{type(e).__name__}: {e}"[:300])
                continue  # the replay would only repeat it
            chk.true(f"{case.what}: captured", True)
            for seed in (2, 3):
                case.fill(seed)
                graph.replay()
                torch.cuda.synchronize()
                chk.equal(f"{case.what} replay {seed}", case.output.cpu(), case.expected(seed))
            del graph
    torch.cuda.synchronize()
    return result(chk)


@pytest.mark.parametrize("world_size", (2, 4))
def test_every_collective_dtype_and_op_on_the_kernel_route_eager_and_replayed(world_size):
    run_checks(
        _matrix,
        world_size,
        min_checks=100,
        timeout=240,
        placement="shared",
        env={"XCCL_GPU_ALGO": "kernel"},
    )
