"""`python -m xccl.bench.hooks`: what xccl.hooks' one-call compressed all_reduce saves, per fp32
bucket size, on local CPU ranks (docs/training.md, results in benchmarks/RESULTS.md).

    python -m xccl.bench.hooks --nranks 4 --sizes 1M,4M,16M,64M

Per bucket size (bytes of fp32) it times, on every rank, with a barrier before each call and
the methods taken in turn within each iteration:
  xccl bf16 / xccl fp16   the backend call of xccl.hooks.bf16/fp16_compress_hook (in place);
  torch fp16 steps        what torch's fp16_compress_hook does on an xccl group: cast to fp16
                          and divide, all_reduce the copy, copy back into the bucket;
  fp32 xccl / fp32 gloo   a plain fp32 all_reduce (DDP without a hook) on xccl and on gloo.
Each cell is the median over iterations of the slowest rank's time. The ratios are torch's fp16
steps and plain fp32 (xccl) over xccl's bf16 call: above 1 means the xccl hook is faster.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import launch, method
from .options import format_size, parse_sizes

COLUMNS = ("xccl bf16", "xccl fp16", "torch fp16 steps", "fp32 xccl", "fp32 gloo")


def _methods(dist, torch, hooks, gloo, world):
    def torch_fp16_steps(x):
        compressed = x.to(torch.float16).div_(world)
        dist.all_reduce(compressed)
        x.copy_(compressed)

    return {
        "xccl bf16": lambda x: hooks.compressed_all_reduce(x, torch.bfloat16),
        "xccl fp16": lambda x: hooks.compressed_all_reduce(x, torch.float16),
        "torch fp16 steps": torch_fp16_steps,
        "fp32 xccl": lambda x: dist.all_reduce(x),
        "fp32 gloo": lambda x: dist.all_reduce(x, group=gloo),
    }


def _rank(args, rank: int, world: int, init_method: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    import xccl  # noqa: F401  (registers the backend)
    from xccl import hooks

    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("xccl", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    methods = _methods(dist, torch, hooks, gloo, world)
    rows = []
    for nbytes in args.sizes:
        bucket = torch.randn(nbytes // 4, generator=torch.Generator().manual_seed(rank))
        times = {name: [] for name in methods}
        # Round-robin over the methods, so a busy moment of the machine costs each alike.
        for i in range(args.warmup + args.iters):
            for name, call in methods.items():
                dist.barrier(group=gloo)
                start = time.perf_counter()
                call(bucket)
                if i >= args.warmup:
                    times[name].append(time.perf_counter() - start)
        row = {}
        for name, values in times.items():
            slowest = torch.tensor(values, dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
            row[name] = method.percentile(slowest.tolist(), 50)
        rows.append((nbytes, row))
    if rank == 0:
        print(_table(rows, world), flush=True)
    dist.destroy_process_group()


def _table(rows, world: int) -> str:
    head = ["fp32 bucket", *(f"{c} (ms)" for c in COLUMNS), "torch fp16 / xccl bf16"]
    head.append("fp32 xccl / xccl bf16")
    lines = [f"{world} ranks", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for nbytes, row in rows:
        cells = [format_size(nbytes), *(f"{row[c] * 1e3:.2f}" for c in COLUMNS)]
        cells.append(f"{row['torch fp16 steps'] / row['xccl bf16']:.2f}x")
        cells.append(f"{row['fp32 xccl'] / row['xccl bf16']:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xccl.bench.hooks", description=__doc__)
    parser.add_argument("--nranks", type=int, default=2, help="local CPU ranks (default 2)")
    parser.add_argument(
        "--sizes", type=parse_sizes, default=parse_sizes("1M,4M,16M,64M"), help="fp32 bucket bytes"
    )
    parser.add_argument("--iters", type=int, default=10, help="timed iterations per cell")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations per cell")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds for the run")
    args = parser.parse_args(argv)
    if args.nranks < 2 or args.iters < 1 or args.warmup < 0:
        parser.error("need --nranks >= 2, --iters >= 1 and --warmup >= 0")
    with launch.local_ranks(_rank, args.nranks, (args,), prefix="xccl-bench-hooks") as procs:
        return launch._wait(procs, args.time_limit)


if __name__ == "__main__":
    sys.exit(main())
