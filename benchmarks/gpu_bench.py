"""xccl against NCCL on the GPUs of one machine: a markdown table per route, one row per op and
size, for benchmarks/RESULTS.md.

    python benchmarks/gpu_bench.py --out DIR [--nranks N] [--time-limit S] [--dry-run]

Runs `python -m xccl.bench` (which measures xccl and NCCL in the same processes, interleaved per
size; benchmarks/README.md) once per mode, most valuable first, each writing DIR/<mode>.json and
its log DIR/<mode>.log:

  auto    all_reduce, all_gather_into_tensor, reduce_scatter_tensor, float32, 8 B .. 256 MiB
          (x4, plus 256 KiB and 256 MiB), every size checked: xccl's own plan, what users get
  graph   all_reduce 8 B .. 1 MiB, each timed call a replay of a CUDA graph of GRAPH_CALLS calls
  kernel  as auto with XCCL_GPU_ALGO=kernel: xccl's kernels wherever one can run
  vendor  as auto with XCCL_GPU_ALGO=nccl: every call through xccl to its inner NCCL group

then prints the tables (python -m xccl.bench.markdown) and writes them to DIR/gpu_bench.md.
Times use --timing batch (one device synchronize per 10 calls, as nccl-tests times a loop).
Each run gets what is left of --time-limit, less MIN_RUN_S for each run after it; a run that
would get less than MIN_RUN_S is not started, and the table says so.

Exit status: 0 every run finished and every check passed; 1 otherwise (the tables say which);
2 bad usage; 3 no CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

OPS = "all_reduce,all_gather,reduce_scatter"
# nccl-tests' x4 ladder from 8 B, plus 256 KiB (the edge of issue 9's small-message target) and
# 256 MiB (the top of the range, which the ladder steps over).
SIZES = "8,32,128,512,2K,8K,32K,128K,256K,512K,2M,8M,32M,128M,256M"
GRAPH_SIZES = "8,32,128,512,2K,8K,32K,128K,256K,1M"
GRAPH_CALLS = 20
TARGET_TIME_S = 0.05  # timed seconds per size and backend: 1000 calls at 50 us, 10 at 256 MiB
COLLECTIVE_TIMEOUT_S = 60
MIN_RUN_S = 30  # rank start-up, three groups and NCCL's communicator take ~10-20 s of this
DEFAULT_TIME_LIMIT_S = 200

# mode -> (XCCL_GPU_ALGO or None for xccl's plan, extra options)
MODES = {
    "auto": (None, ["--ops", OPS, "--sizes", SIZES, "--check"]),
    "graph": (None, ["--ops", "all_reduce", "--sizes", GRAPH_SIZES, "--graph", str(GRAPH_CALLS)]),
    "kernel": ("kernel", ["--ops", OPS, "--sizes", SIZES, "--check"]),
    "vendor": ("nccl", ["--ops", OPS, "--sizes", SIZES, "--check"]),
}
LABELS = {
    "auto": "eager, xccl's own plan (XCCL_GPU_ALGO unset)",
    "graph": f"CUDA graph replay, {GRAPH_CALLS} all_reduce calls per replay, xccl's own plan",
    "kernel": "eager, kernel route forced (XCCL_GPU_ALGO=kernel)",
    "vendor": "eager, vendor route forced (XCCL_GPU_ALGO=nccl)",
}


def bench_command(mode: str, nranks: int, out: str, time_limit: float) -> list:
    _, extra = MODES[mode]
    return [
        sys.executable,
        "-m",
        "xccl.bench",
        "--device",
        "cuda",
        "--nranks",
        str(nranks),
        "--reference",
        "nccl",
        "--timing",
        "batch",
        "--target-time",
        str(TARGET_TIME_S),
        "--timeout",
        str(COLLECTIVE_TIMEOUT_S),
        "--time-limit",
        str(int(time_limit)),
        "--no-progress",
        "--json",
        os.path.join(out, f"{mode}.json"),
        *extra,
    ]


def bench_env(mode: str, base: dict) -> dict:
    algo, _ = MODES[mode]
    env = {
        k: v
        for k, v in base.items()
        if k not in ("XCCL_GPU_ALGO", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    if algo:
        env["XCCL_GPU_ALGO"] = algo
    return env


def run_limit(left: float, runs_after: int) -> float:
    """Seconds one run may take: what is left, less MIN_RUN_S for each later run."""
    return left - MIN_RUN_S * runs_after


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="benchmarks/gpu_bench.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", required=True, help="folder for the JSON, logs and table")
    parser.add_argument(
        "--nranks",
        type=int,
        default=None,
        help="ranks, one per GPU (default: every GPU torch sees)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"comma list, in the order to run (default {','.join(MODES)})",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help=f"seconds for all runs together (default {DEFAULT_TIME_LIMIT_S})",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands; run nothing (needs --nranks)"
    )
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or not args.modes:
        parser.error(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    if args.nranks is not None and args.nranks < 1:
        parser.error("--nranks must be at least 1")
    if args.dry_run and args.nranks is None:
        parser.error("--dry-run needs --nranks")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    if args.nranks is None:
        import torch

        args.nranks = torch.cuda.device_count()
        if args.nranks == 0:
            print("gpu_bench: NO CUDA GPU: torch sees none; nothing was measured.", file=sys.stderr)
            return 3
    started = time.monotonic()
    finished, missing, status = [], [], 0
    for index, mode in enumerate(args.modes):
        left = args.time_limit - (time.monotonic() - started)
        limit = run_limit(left, len(args.modes) - index - 1)
        command = bench_command(mode, args.nranks, args.out, max(limit, 1))
        if args.dry_run:
            algo = MODES[mode][0]
            print(("XCCL_GPU_ALGO=" + algo + " " if algo else "") + shlex.join(command))
            continue
        if limit < MIN_RUN_S:
            missing.append((LABELS[mode], f"the {args.time_limit:g} s budget is spent"))
            status = 1
            print(f"gpu_bench: {mode}: not run ({left:.0f} s left)", flush=True)
            continue
        log = os.path.join(args.out, f"{mode}.log")
        print(f"gpu_bench: {mode}: {args.nranks} ranks, up to {limit:.0f} s; log {log}", flush=True)
        run_started = time.monotonic()
        with open(log, "w", encoding="utf-8") as f:
            f.write("$ " + shlex.join(command) + "\n")
            f.flush()
            # The bench bounds its own ranks by --time-limit; this bounds the bench itself.
            try:
                rc = subprocess.run(
                    command,
                    env=bench_env(mode, os.environ),
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    timeout=limit + 30,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        took = time.monotonic() - run_started
        print(f"gpu_bench: {mode}: exit status {rc} after {took:.0f} s", flush=True)
        json_path = os.path.join(args.out, f"{mode}.json")
        # Exit status 1 is a failed check: the JSON has the numbers and the FAIL cells.
        if rc in (0, 1) and os.path.exists(json_path):
            finished.append((mode, json_path))
        else:
            with open(log, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-1500:]
            print(tail, flush=True)
            missing.append((LABELS[mode], f"exit status {rc} after {took:.0f} s (log {log})"))
        status = status or int(rc != 0)
    if args.dry_run:
        return 0
    table = os.path.join(args.out, "gpu_bench.md")
    from xccl.bench import markdown  # the installed package, as the runs used

    runs = []
    for mode, path in finished:
        with open(path, encoding="utf-8") as f:
            runs.append((LABELS[mode], json.load(f)))
    text = markdown.document(runs, missing)
    with open(table, "w", encoding="utf-8") as f:
        f.write(text)
    print("\n== gpu_bench\n" + text + f"\ntable: {table}", flush=True)
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
