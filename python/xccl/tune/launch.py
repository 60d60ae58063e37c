"""`python -m xccl tune`: the command line, and where its ranks come from (torchrun's, local
ones started like xccl.bench's, or ranks inside hosts made of network namespaces).

Exit status: 0 done; 2 bad usage; 3 a rank failed, crashed or timed out; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import traceback

from ..bench import launch as bench_launch
from ..bench.rank import EXIT_RANK_FAILED, EXIT_USAGE
from . import candidates as cands
from .rank import rank_main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m xccl tune",
        description="measure every plan xccl can choose per collective and size on this "
        "machine, verify each result exactly, and write the table every rank then plans from",
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("-n", "--nranks", type=int, default=2, help="local ranks (default 2)")
    parser.add_argument(
        "--netns-hosts",
        type=int,
        default=0,
        metavar="H",
        help="spread --nranks ranks over H hosts made of network namespaces (root)",
    )
    parser.add_argument(
        "--ops",
        default=",".join(cands.DEFAULT_OPS),
        help="comma list (default %(default)s; reduce too)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="5 sizes from 1 KiB to 16 MiB, one ring chunk"
    )
    parser.add_argument("--sizes", help="comma list of sizes instead (4096, 64K, 1MiB)")
    parser.add_argument("--out", metavar="FILE", help="table path (default: the cache folder)")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument("--timeout", type=float, default=120.0, help="per collective, seconds")
    parser.add_argument(
        "--time-limit", type=float, default=1800.0, help="bound on the whole run, seconds"
    )
    return parser


def parse_args(argv: list) -> argparse.Namespace:
    from ..plan import parse_size

    parser = build_parser()
    args = parser.parse_args(argv)
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    allowed = cands.GPU_OPS if args.device == "cuda" else cands.CPU_OPS
    unknown = [op for op in args.ops if op not in allowed]
    if unknown or not args.ops:
        parser.error(f"--ops: choose from {', '.join(allowed)}")
    try:
        args.sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else None
    except ValueError as error:
        parser.error(f"--sizes: {error}")
    if args.sizes and not all(1 <= s <= 1 << 30 for s in args.sizes):
        parser.error("--sizes: each size must be 1 B to 1 GiB")
    if not 1 <= args.nranks <= 256:
        parser.error("--nranks must be 1 to 256")
    if args.netns_hosts and not 2 <= args.netns_hosts <= args.nranks:
        parser.error("--netns-hosts needs 2 to --nranks hosts")
    if args.netns_hosts and args.device == "cuda":
        parser.error("--netns-hosts tunes CPU ranks")
    args.command = "python -m xccl tune " + shlex.join(argv)
    return args


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        if args.netns_hosts:
            from . import netns

            return netns.main(args)
        if bench_launch.launched_by(os.environ):
            env = os.environ
            return rank_main(args, int(env["RANK"]), int(env["WORLD_SIZE"]), "env://")
        return _local(args)
    except KeyboardInterrupt:
        return 130


def _local(args) -> int:
    reports, error = bench_launch.gather_reports(
        _child, args.nranks, (args,), "xccl-tune", args.time_limit
    )
    failed = [r for r in reports if r["status"] != 0]
    if error or failed or len(reports) != args.nranks:
        for message in dict.fromkeys(r["error"] for r in failed):  # once, not once per rank
            sys.stderr.write(message)
        if error:
            sys.stderr.write(f"xccl tune: {error}\n")
        return EXIT_RANK_FAILED if not any(r["status"] == 2 for r in failed) else EXIT_USAGE
    return 0


def _child(args, queue, rank: int, world: int, init_method: str) -> None:
    if "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    if "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/lo"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    status, error = 0, ""
    try:
        status = rank_main(args, rank, world, init_method, quiet_errors=True)
    except Exception as failure:  # noqa: BLE001 - reported through the queue
        status, error = EXIT_RANK_FAILED, _describe(rank, failure)
    if status == EXIT_USAGE:
        error = getattr(args, "usage_error", "")
    queue.put({"rank": rank, "status": status, "error": error})


def _describe(rank: int, failure: BaseException) -> str:
    if isinstance(failure, (RuntimeError, ValueError, TimeoutError)):
        return f"xccl tune rank {rank}: {failure}\n"
    return f"xccl tune rank {rank}: unexpected error\n{traceback.format_exc()}"


__all__ = ["main"]
