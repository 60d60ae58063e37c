"""xccl against NCCL on the GPUs of one machine, or xccl's kernels on one GPU: a markdown table
per mode, one row per op and size, for benchmarks/RESULTS.md.

    python benchmarks/gpu_bench.py --out DIR [--nranks N] [--one-gpu] [--time-limit S] [--dry-run]

Runs `python -m xccl.bench` (which measures xccl and NCCL in the same processes, interleaved per
size; benchmarks/README.md) once per mode, most valuable first, each writing DIR/<mode>.json and
its log DIR/<mode>.log. Several GPUs (one rank per GPU):

  kernel  all_reduce, all_gather_into_tensor, reduce_scatter_tensor, float32, 8 B .. 256 MiB
          (x4, plus 256 KiB and 256 MiB), every size checked, XCCL_GPU_ALGO=kernel: xccl's
          kernels wherever one can run (a machine whose kernels were never verified plans the
          vendor route unless told otherwise, docs/gpu.md "Verified kernels")
  graph   all_reduce 8 B .. 1 MiB on the kernel route, each timed call a replay of a CUDA graph
          of GRAPH_CALLS calls
  auto    as kernel with xccl's own plan (XCCL_GPU_ALGO unset): what users get; on an
          unverified machine that is NCCL through xccl
  vendor  as kernel with XCCL_GPU_ALGO=nccl: every call through xccl to its inner NCCL group

One GPU (--one-gpu, the default when torch sees one): NCCL cannot run several ranks on one GPU,
so xccl's kernel route is measured alone, against the GPU's copy roofline (a device-to-device
copy measured in this run, before the modes):

  share2  2 ranks on cuda:0, XCCL_GPU_ALGO=kernel, the three ops 8 B .. 256 MiB (x8), checked
  share4  the same with 4 ranks
  world1  1 rank, xccl vs NCCL: no byte crosses a link, so per-call fixed costs only, not a
          comparison of collectives (the table says so)

then prints the tables (python -m xccl.bench.markdown) and writes them to DIR/gpu_bench.md.
Times use --timing batch (one device synchronize per 10 calls, as nccl-tests times a loop).
When --time-limit cannot give every mode its MIN_RUN_S, the least valuable modes are left out
(the table says so); each mode run gets what is left less the minimum of each later mode.

A mode that forces the kernels (XCCL_GPU_ALGO=kernel) has its rows marked kernel only where the
bench's route counters show xccl's kernels ran them (python/xccl/bench/markdown.py); any other row
is a failure, whatever its result: a kernel that cannot run falls back with exact results.

Exit status: 0 every run finished and every check passed; 1 a run or a check failed, or a row of
a kernel mode did not run on the kernels (the tables say which); 2 bad usage; 3 no CUDA GPU; 4
nothing failed but a mode was not run for lack of time.
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
DEFAULT_TIME_LIMIT_S = 200
# One GPU: x8 steps keep the sweep short (the ranks are time-sliced without MPS).
SHARED_SIZES = "8,64,512,4K,32K,256K,2M,16M,128M,256M"
SHARED_TARGET_TIME_S = 0.02
COPY_BYTES = 1 << 30

_SHARED = ["--ops", OPS, "--sizes", SHARED_SIZES, "--check", "--share-gpu", "--reference", "none"]
_SHARED += ["--target-time", str(SHARED_TARGET_TIME_S)]
# mode -> (XCCL_GPU_ALGO or None for xccl's plan, ranks or None for --nranks, extra options), in
# the order of value in which they run.
MODES = {
    "kernel": ("kernel", None, ["--ops", OPS, "--sizes", SIZES, "--check"]),
    "graph": (
        "kernel",
        None,
        ["--ops", "all_reduce", "--sizes", GRAPH_SIZES, "--graph", str(GRAPH_CALLS)],
    ),
    "auto": (None, None, ["--ops", OPS, "--sizes", SIZES, "--check"]),
    "vendor": ("nccl", None, ["--ops", OPS, "--sizes", SIZES, "--check"]),
    "share2": ("kernel", 2, _SHARED),
    "share4": ("kernel", 4, _SHARED),
    "world1": (None, 1, ["--ops", "all_reduce", "--sizes", SHARED_SIZES, "--check"]),
}
MULTI_GPU_MODES = ("kernel", "graph", "auto", "vendor")
ONE_GPU_MODES = ("share2", "share4", "world1")
# Seconds a mode needs to give any table: rank start-up, the groups and NCCL's communicator take
# ~10-20 s on several GPUs; the one-GPU sweeps are shorter.
MIN_RUN_S = {"share2": 20, "share4": 20, "world1": 15}
DEFAULT_MIN_RUN_S = 30
LABELS = {
    "auto": "eager, xccl's own plan (XCCL_GPU_ALGO unset)",
    "graph": f"CUDA graph replay, {GRAPH_CALLS} all_reduce calls per replay, kernel route",
    "kernel": "eager, kernel route forced (XCCL_GPU_ALGO=kernel)",
    "vendor": "eager, vendor route forced (XCCL_GPU_ALGO=nccl)",
    "share2": "2 ranks sharing one GPU, kernel route (XCCL_GPU_ALGO=kernel)",
    "share4": "4 ranks sharing one GPU, kernel route (XCCL_GPU_ALGO=kernel)",
    "world1": "world size 1, xccl vs NCCL: no comparison of collectives",
}


def min_run_s(mode: str) -> float:
    return MIN_RUN_S.get(mode, DEFAULT_MIN_RUN_S)


def bench_command(mode: str, nranks: int, out: str, time_limit: float) -> list:
    _, ranks, extra = MODES[mode]
    nranks = ranks or nranks
    target = [] if "--target-time" in extra else ["--target-time", str(TARGET_TIME_S)]
    reference = [] if "--reference" in extra else ["--reference", "nccl"]
    return [
        sys.executable,
        "-m",
        "xccl.bench",
        "--device",
        "cuda",
        "--nranks",
        str(nranks),
        *reference,
        "--timing",
        "batch",
        *target,
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
    algo = MODES[mode][0]
    env = {
        k: v
        for k, v in base.items()
        if k not in ("XCCL_GPU_ALGO", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    if algo:
        env["XCCL_GPU_ALGO"] = algo
    return env


def keep_modes(modes: list, time_limit: float) -> tuple[list, list]:
    """(kept, dropped): the modes (in order of value) whose minimums fit time_limit, leaving out
    the least valuable first, so a short budget still runs the most valuable mode."""
    kept = list(modes)
    dropped = []
    while kept and sum(min_run_s(m) for m in kept) > time_limit:
        dropped.insert(0, kept.pop())
    return kept, dropped


def run_limit(left: float, later: list) -> float:
    """Seconds one run may take: what is left, less the minimum of each later (kept) run."""
    return left - sum(min_run_s(m) for m in later)


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
        "--one-gpu",
        action="store_true",
        help=f"the one-GPU modes ({','.join(ONE_GPU_MODES)}; the default when torch sees one GPU)",
    )
    parser.add_argument(
        "--modes",
        default=None,
        help="comma list, most valuable first (default "
        f"{','.join(MULTI_GPU_MODES)}; one GPU: {','.join(ONE_GPU_MODES)})",
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
    if args.modes is not None:
        args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        unknown = [m for m in args.modes if m not in MODES]
        if unknown or not args.modes:
            parser.error(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    if args.nranks is not None and args.nranks < 1:
        parser.error("--nranks must be at least 1")
    if args.dry_run and args.nranks is None:
        parser.error("--dry-run needs --nranks")
    return args


def copy_roofline_gbps(torch) -> float:
    """10^9 bytes copied per second by one device-to-device copy of COPY_BYTES (the median of
    five after a warm-up; HBM moves twice that, read and write)."""
    a = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").fill_(1)
    b = torch.empty_like(a)
    times = []
    for i in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        if i:
            times.append(start.elapsed_time(end) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return COPY_BYTES / sorted(times)[len(times) // 2] / 1e9


def markdown_module():
    from xccl.bench import markdown  # the installed package, as the runs used

    return markdown


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    gpus = args.nranks
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
        if gpus == 0:
            print("gpu_bench: NO CUDA GPU: torch sees none; nothing was measured.", file=sys.stderr)
            return 3
        args.nranks = gpus
    if args.modes is None:
        args.modes = list(ONE_GPU_MODES if args.one_gpu or gpus == 1 else MULTI_GPU_MODES)
    kept, dropped = keep_modes(args.modes, args.time_limit)
    missing = [
        (
            LABELS[m],
            f"left out: {args.time_limit:g} s cannot give it and the modes above it "
            "their minimum time",
        )
        for m in dropped
    ]
    copy_gbps = None
    started = time.monotonic()
    if not args.dry_run and any(MODES[m][2] is _SHARED for m in kept):
        import torch

        try:
            copy_gbps = copy_roofline_gbps(torch)
            print(f"gpu_bench: copy roofline {copy_gbps:.0f} GB/s", flush=True)
        except Exception as e:  # noqa: BLE001  (the tables still come, without the ratio)
            print(f"gpu_bench: copy roofline not measured: {e}", flush=True)
    finished, status = [], 0
    for index, mode in enumerate(kept):
        left = args.time_limit - (time.monotonic() - started)
        limit = run_limit(left, kept[index + 1 :])
        command = bench_command(mode, args.nranks, args.out, max(limit, 1))
        if args.dry_run:
            algo = MODES[mode][0]
            print(("XCCL_GPU_ALGO=" + algo + " " if algo else "") + shlex.join(command))
            continue
        if limit < min_run_s(mode):
            missing.append((LABELS[mode], f"the {args.time_limit:g} s budget is spent"))
            print(f"gpu_bench: {mode}: not run ({left:.0f} s left)", flush=True)
            continue
        log = os.path.join(args.out, f"{mode}.log")
        print(f"gpu_bench: {mode}: up to {limit:.0f} s; log {log}", flush=True)
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
                    timeout=limit + 10,
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
    markdown = markdown_module()

    runs = []
    for mode, path in finished:
        with open(path, encoding="utf-8") as f:
            runs.append((LABELS[mode], json.load(f)))
        # A mode that forces the kernels passes only where the route counters show they ran.
        doc = runs[-1][1]
        if markdown.claims_kernel(doc.get("meta", {})):
            verdict = markdown.route_verdict(doc.get("results", []))
            print(f"gpu_bench: {mode}: {verdict}", flush=True)
            status = status or int(verdict.startswith("route: NOT"))
    text = markdown.document(runs, missing, copy_gbps=copy_gbps)
    with open(table, "w", encoding="utf-8") as f:
        f.write(text)
    print("\n== gpu_bench\n" + text + f"\ntable: {table}", flush=True)
    # 4: nothing failed, but a mode was left out or not started for lack of time.
    return 1 if status else (4 if missing else 0)


if __name__ == "__main__":
    sys.exit(main())
