"""`python -m xccl doctor --gpu`: runs every xccl GPU kernel for every collective, dtype and
reduction on this machine's GPUs, checks each result exactly against a host reference, and when
every case on every rank agrees leaves the stamp that lets the kernels run by default here
(python/xccl/verify.py; docs/gpu.md, "Verified kernels").

Ranks start through xccl.bench's launcher like the self-test; with one GPU, 2 ranks share it (CUDA
IPC within one device, as the GPU tests do), with several, one rank per GPU (at most 8). Inputs
are small integers, so every sum is exact in float16 and bfloat16 in any order, and a host
reference can ask for equality. Two passes: XCCL_GPU_ALGO=kernel (every collective; all_reduce
picks one- or two-shot by size) and XCCL_GPU_ALGO=two_shot (all_reduce's other kernel).

An exact result does not show that a kernel produced it: a forced kernel that cannot run here,
or CUDA IPC refused, sends the call to host memory or NCCL, whose results are exact too. So each
rank reads its group's route counters (xccl.gpu_routes) around every case, and the stamp is
written only when every case on every rank ran on xccl's kernels alone; otherwise doctor says
which case went where, and writes nothing.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from .. import gpu_routes, verify
from ..bench import launch
from .checks import FAIL, PASS, WARN, Check

DTYPES = ("float32", "float16", "bfloat16")
OPS = ("sum", "avg", "premul_sum", "min", "max")
COUNTS = (1, 1001, 70_001, 1_000_003)  # one element, odd sizes, past a 32 MiB/world chunk
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
PASSES = (("kernel", COLLECTIVES), ("two_shot", ("all_reduce",)))
GPU_CHECK_TIMEOUT_S = 300.0
MAX_RANKS = 8


def _input(torch, dtype, n, rank):
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + rank * 5 + 3) % 11 - 5).to(dtype)


def _reduce(torch, op, inputs, world):
    stacked = torch.stack([x.to(torch.float64) for x in inputs])
    if op == "min":
        return stacked.min(0).values
    if op == "max":
        return stacked.max(0).values
    total = stacked.sum(0)
    return total / world if op == "avg" else total * (0.5 if op == "premul_sum" else 1.0)


def _reduce_op(dist, op):
    if op == "premul_sum":
        return dist._make_nccl_premul_sum(0.5)
    return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "min": dist.ReduceOp.MIN}.get(
        op, dist.ReduceOp.MAX
    )


def _cases(collectives, counts=COUNTS):
    for collective in collectives:
        reduces = collective in ("all_reduce", "reduce_scatter")
        for dtype in DTYPES:
            for op in OPS if reduces else ("copy",):
                for n in counts:
                    yield collective, dtype, op, n


def _run_case(torch, dist, case, rank, world, device):
    """(kernel result on the host, expected) for one case; every rank runs the same cases."""
    collective, dtype_name, op, n = case
    dtype = getattr(torch, dtype_name)
    inputs = [
        _input(
            torch, dtype, n * (world if collective in ("reduce_scatter", "all_to_all") else 1), r
        )
        for r in range(world)
    ]
    mine = inputs[rank].to(device, copy=True)  # the reference keeps the inputs
    if collective == "all_reduce":
        dist.all_reduce(mine, op=_reduce_op(dist, op))
        return mine.cpu(), _reduce(torch, op, inputs, world).to(dtype)
    if collective == "reduce_scatter":
        out = torch.empty(n, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, mine, op=_reduce_op(dist, op))
        want = _reduce(torch, op, inputs, world).to(dtype)[rank * n : (rank + 1) * n]
        return out.cpu(), want
    if collective == "all_gather":
        out = torch.empty(n * world, dtype=dtype, device=device)
        dist.all_gather_into_tensor(out, mine)
        return out.cpu(), torch.cat(inputs)
    if collective == "broadcast":
        root = world - 1
        dist.broadcast(mine, src=root)
        return mine.cpu(), inputs[root]
    out = torch.empty(n * world, dtype=dtype, device=device)
    dist.all_to_all_single(out, mine)
    return out.cpu(), torch.cat([x[rank * n : (rank + 1) * n] for x in inputs])


def _alike(torch, got, want, op, world) -> bool:
    """Bit for bit (integer inputs make every sum exact in any order), except avg over a world
    size that is no power of two, whose division rounds (twice where the kernel multiplies by a
    rounded 1/world): within two units in the last place."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if op == "avg" and world & (world - 1):
        eps = torch.finfo(got.dtype).eps
        return torch.allclose(got.to(torch.float64), want.to(torch.float64), rtol=2 * eps, atol=0)
    return torch.equal(got, want)


def _worker(algo, collectives, counts, device_kind, timeout_s, results, rank, world, init_method):
    """One rank; never raises: its failures (or error) go to `results`. device_kind "cpu" runs
    the same cases on the CPU side (the reference's own test)."""
    out = {"rank": rank, "failures": [], "cases": 0, "kernel_cases": 0, "off_kernel": []}
    try:
        os.environ["XCCL_GPU_ALGO"] = algo  # before xccl reads it (once per process)
        import torch
        import torch.distributed as dist

        import xccl  # noqa: F401 - registers the backend

        if device_kind == "cuda":
            device = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        dist.init_process_group(
            "xccl",
            init_method=init_method,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s),
        )
        for case in _cases(collectives, counts):
            before = gpu_routes.counts(dist.group.WORLD) if device_kind == "cuda" else {}
            got, want = _run_case(torch, dist, case, rank, world, device)
            out["cases"] += 1
            if device_kind == "cuda":
                _note_route(out, case, algo, before, gpu_routes.counts(dist.group.WORLD))
            if not _alike(torch, got, want, case[2], world):
                bad = (got.to(torch.float64) != want.to(torch.float64)).nonzero()
                first = int(bad[0]) if bad.numel() else -1
                out["failures"].append(
                    f"{_case_name(case, algo)}, rank {rank}: element {first} is "
                    f"{got.reshape(-1)[first].item()} instead of {want.reshape(-1)[first].item()}"
                )
        if device_kind == "cuda":
            torch.cuda.synchronize()
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - a rank reports every failure, never raises
        out["error"] = f"{type(error).__name__}: {error}"
    results.put(out)


def _case_name(case, algo) -> str:
    return f"{case[0]} {case[1]} {case[2]} {case[3]} elements (XCCL_GPU_ALGO={algo})"


def _note_route(out: dict, case, algo, before: dict, after: dict) -> None:
    """Counts the case in the rank's report as run on xccl's kernels, or lists where it ran
    instead, from the group's route counters before and after it."""
    went = gpu_routes.off_kernel(gpu_routes.taken(before, after))
    if went:
        out["off_kernel"].append(f"{_case_name(case, algo)}, rank {out['rank']}: {went}")
    else:
        out["kernel_cases"] += 1


def _pass_problem(algo, world, ranks, error) -> str:
    """Why one pass cannot count towards the stamp, or "": every rank ran every case, exactly,
    and its route counters show xccl's kernels (alone) ran each one."""
    errors = [r["error"] for r in ranks if "error" in r]
    failures = [f for r in ranks for f in r["failures"]]
    if error or errors or failures:
        found = error or (errors[0] if errors else f"{len(failures)} wrong: {failures[0]}")
        return f"XCCL_GPU_ALGO={algo}, {world} ranks: {found}"
    if len(ranks) != world:
        return f"XCCL_GPU_ALGO={algo}, {world} ranks: {len(ranks)} reported"
    off = [f for r in ranks for f in r.get("off_kernel", ())]
    unproven = [r["rank"] for r in ranks if r.get("kernel_cases", 0) != r["cases"]]
    if off or unproven:
        first = off[0] if off else f"rank {unproven[0]} did not count each case on a route"
        return (
            f"XCCL_GPU_ALGO={algo}, {world} ranks: {len(off)} case runs did not run on xccl's "
            f"kernels (route counters): {first}"
        )
    return ""


def _launch(
    algo, collectives, world, timeout_s, counts=COUNTS, device_kind="cuda"
) -> tuple[list, str | None]:
    args = (algo, collectives, counts, device_kind, timeout_s * 0.8)
    return launch.gather_reports(_worker, world, args, "xccl-gpu-check", timeout_s)


def run_gpu_check(topology: dict | None, timeout_s: float = GPU_CHECK_TIMEOUT_S) -> list:
    """Checks; writes the stamp only when every case on every rank of every pass was exact."""
    import torch

    name = "gpu.verify"
    if not torch.cuda.is_available():
        return [Check(WARN, name, "no CUDA/HIP GPU visible to torch: nothing to verify")]
    if not topology or not topology.get("gpus"):
        return [Check(FAIL, name, "the topology lists no GPU, so no stamp could name it")]
    gpus = torch.cuda.device_count()
    world = 2 if gpus == 1 else min(gpus, MAX_RANKS)
    cases, started = [], time.monotonic()
    for algo, collectives in PASSES:
        remaining = timeout_s - (time.monotonic() - started)
        ranks, error = _launch(algo, collectives, world, max(30.0, remaining))
        problem = _pass_problem(algo, world, ranks, error)
        if problem:
            return [Check(FAIL, name, f"{problem}; no stamp")]
        cases += [f"{algo}:{c}" for c in _cases(collectives)]
    path = verify.stamp_path()
    verify.write_stamp(path, verify.machine_key(topology), cases)
    where = f"{world} ranks on {gpus} GPU{'s' if gpus > 1 else ''}"
    return [
        Check(
            PASS,
            name,
            f"{len(cases)} kernel cases exact, each counted on the kernel route, on {where} in "
            f"{time.monotonic() - started:.0f} s; "
            f"stamp written to {path}: xccl's kernels now run by default on this machine",
        )
    ]
