"""xccl against NCCL on one GPU at world size 1: what each backend costs per call.

    python benchmarks/gpu_overhead.py [--iters N] [--csv FILE] [--time-limit S]

This is not a comparison of collectives and its speedup column says nothing about one: at one
rank no byte crosses a link, so these numbers are each backend's own fixed costs: host
dispatch, the stream and event hand-offs around its kernel, the launch, and at large sizes the
copy through HBM. Two measurements, both backends in this one process (each its own group):

1. eager all_reduce of float32 at 8 B, 1 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB;
2. launch overhead: K = 20 all_reduce calls of 1 KiB, eager and replayed from a CUDA graph.

Method: per row, warm-up calls, then REPS repetitions of a block of calls timed with CUDA events
on the caller's stream (block time / calls: the per-call time, host issue included when the host
is the bottleneck); the table shows the median over repetitions. The backends alternate per
repetition (A, B, then B, A) so drifts of clock or load hit both alike. speedup = nccl time /
xccl time: above 1 xccl is faster. algbw = size / time (10^9 bytes/s).

xccl's plan (docs/algorithms.md, "Selection on GPUs", rule 6) runs its own kernel at one rank
("one rank: a local copy") unless XCCL_GPU_ALGO=nccl routes it to its inner ProcessGroupNCCL;
the header says which applies.

Exit status: 0 every row measured; 1 a row failed (its cell reads FAIL, the errors follow the
tables) or the time limit passed; 3 no CUDA GPU.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import threading
import traceback
from datetime import timedelta

SIZES = (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
REPS = 7
WARMUP = 5
# A block of eager calls aims at this much time, so 256 MiB needs tens of calls, not --iters.
BLOCK_SECONDS = 0.02
MIN_CALLS = 5
GRAPH_CALLS = 20  # K: all_reduce calls captured in one graph
GRAPH_BYTES = 1 << 10
GRAPH_REPLAYS = 50  # replays per timed block
BACKENDS = ("xccl", "nccl")
TABLE_MARK = "== gpu_overhead"  # where the tables start in the output

_current = {"row": "start-up"}


def human(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def watchdog(seconds: float) -> None:
    """A hung collective blocks inside CUDA where no exception reaches it: leave the process."""

    def expire() -> None:
        print(
            f"\ngpu_overhead: FAIL: time limit of {seconds:g} s passed during "
            f"{_current['row']}; stopping",
            flush=True,
        )
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


class Failures:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, what: str, error: BaseException) -> None:
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        self.lines.append(f"{what}: {last}")
        print(f"  FAIL {what}: {last}", file=sys.stderr, flush=True)


def init_groups(dist, xccl_error: str | None, failures: Failures) -> dict:
    """The default group is xccl's (nccl's when xccl cannot start); nccl gets a second group."""
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=60))
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), RANK="0", WORLD_SIZE="1"
    )
    groups: dict = {}
    kwargs = {"store": store, "rank": 0, "world_size": 1, "timeout": timedelta(seconds=60)}
    if xccl_error is None:
        try:
            dist.init_process_group("xccl", **kwargs)
            groups["xccl"] = dist.group.WORLD
        except Exception as e:  # noqa: BLE001  (reported; nccl is still measured)
            failures.add("xccl group", e)
    else:
        failures.add("xccl group", ImportError(xccl_error))
    try:
        if dist.is_initialized():
            groups["nccl"] = dist.new_group(backend="nccl")
        else:
            dist.init_process_group("nccl", **kwargs)
            groups["nccl"] = dist.group.WORLD
    except Exception as e:  # noqa: BLE001
        failures.add("nccl group", e)
    return groups


def block_calls(per_call: float, lo: int, hi: int) -> int:
    """Calls in one timed block: about BLOCK_SECONDS' worth, within [lo, hi]."""
    return max(lo, min(hi, int(BLOCK_SECONDS / max(per_call, 1e-9))))


def timed_block(torch, fn, calls: int) -> float:
    """Seconds per call of `calls` calls of fn, by CUDA events on the current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def measure(torch, what: str, fns: dict, calls_for, failures: Failures) -> dict:
    """Median seconds per call for each backend's fn; None where it failed.

    calls_for(seconds_per_call) gives the block length once warm-up has estimated the time."""
    calls, samples = {}, {}
    for name, fn in fns.items():
        if fn is None:
            continue
        try:
            timed_block(torch, fn, WARMUP)  # the first calls may include set-up: not an estimate
            calls[name] = calls_for(timed_block(torch, fn, WARMUP))
            samples[name] = []
        except Exception as e:  # noqa: BLE001
            failures.add(f"{name} {what}", e)
    for rep in range(REPS):
        order = list(samples) if rep % 2 == 0 else list(reversed(samples))
        for name in order:
            if samples.get(name) is None:
                continue
            try:
                samples[name].append(timed_block(torch, fns[name], calls[name]))
            except Exception as e:  # noqa: BLE001
                failures.add(f"{name} {what}", e)
                samples[name] = None
    return {
        name: (statistics.median(samples[name]) if samples.get(name) else None, calls.get(name))
        for name in BACKENDS
    }


class CsvTable:
    """Counts the measurements and, with --csv, writes each row as it is measured (a run stopped
    by the time limit keeps what it had)."""

    def __init__(self, path: str | None, failures: Failures) -> None:
        self.done = self.failed = 0
        self.path, self.failures, self.file = path, failures, None
        if path:
            try:
                self.file = open(path, "w", newline="")  # noqa: SIM115  (closed by close())
                self.writer = csv.writer(self.file)
                self.writer.writerow(
                    [
                        "measurement",
                        "bytes",
                        "backend",
                        "us_per_call",
                        "algbw_gbps",
                        "timed_calls_per_block",
                        "status",
                    ]
                )
            except OSError as e:
                failures.add(f"csv {path}", e)

    def add(self, what: str, nbytes: int, result: dict) -> None:
        for name, (t, calls) in result.items():
            self.done += 1
            self.failed += t is None
            if self.file:
                self.writer.writerow(
                    [
                        what,
                        nbytes,
                        name,
                        f"{t * 1e6:.3f}" if t else "",
                        f"{nbytes / t / 1e9:.3f}" if t else "",
                        calls or "",
                        "ok" if t else "FAIL",
                    ]
                )
                self.file.flush()

    def close(self) -> None:
        if self.file:
            self.file.close()


def cell(seconds, width: int) -> str:
    return f"{seconds * 1e6:{width}.2f}" if seconds is not None else f"{'FAIL':>{width}}"


def speedup(result: dict) -> str:
    x, n = result["xccl"][0], result["nccl"][0]
    return f"{n / x:7.2f}x" if x and n else f"{'-':>8}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--iters",
        type=int,
        default=200,
        help="eager calls per timed block for small sizes (large sizes use fewer: "
        f"about {BLOCK_SECONDS * 1e3:.0f} ms per block, at least {MIN_CALLS})",
    )
    parser.add_argument("--csv", help="write one row per measurement and backend")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=100.0,
        help="seconds: stop with status 1 when a measurement hangs (default 100)",
    )
    args = parser.parse_args()
    if args.iters < 1:
        parser.error("--iters must be at least 1")

    xccl_error = None
    try:
        import xccl  # before torch: its environment defaults go in first
    except Exception as e:  # noqa: BLE001  (nccl is still measured)
        xccl = None
        xccl_error = (
            f"xccl is not importable ({e}); install it with "
            "`pip install --no-build-isolation .` against this torch"
        )
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print(
            "gpu_overhead: NO CUDA GPU: torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}); nothing was measured.",
            file=sys.stderr,
        )
        return 3
    watchdog(args.time_limit)
    torch.cuda.set_device(0)
    failures = Failures()
    groups = init_groups(dist, xccl_error, failures)

    algo = os.environ.get("XCCL_GPU_ALGO", "")
    if algo.lower() in ("nccl", "rccl", "vendor"):
        route = f"XCCL_GPU_ALGO={algo}: xccl hands every call to its inner ProcessGroupNCCL"
    elif algo and algo.lower() != "auto":
        route = f"XCCL_GPU_ALGO={algo}: at one rank xccl still runs its kernel (a local copy)"
    else:
        route = (
            "XCCL_GPU_ALGO unset: xccl's plan at one rank runs its kernel "
            '("one rank: a local copy")'
        )
    try:
        nccl_version = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001  (a torch without NCCL: its rows fail with the reason)
        nccl_version = "-"
    print(
        f"{TABLE_MARK}: xccl and nccl, all_reduce float32, world size 1 on "
        f"{torch.cuda.get_device_name(0)}"
    )
    print(
        "# NOT a comparison of collectives: at world size 1 no byte crosses a link (xccl makes "
        "at most a local copy, NCCL runs its one-rank path); these are each backend's fixed "
        "costs per call. Collective performance on one GPU: benchmarks/gpu_bench.py --one-gpu"
    )
    print(
        f"# torch {torch.__version__}, xccl {getattr(xccl, '__version__', '-')}, "
        f"NCCL {nccl_version}"
    )
    print(f"# {route}")
    print(
        f"# per-call times: median of {REPS} blocks timed with CUDA events; "
        "speedup = nccl time / xccl time (> 1: xccl faster)"
    )

    table = CsvTable(args.csv, failures)
    print("\neager all_reduce")
    print(
        f"{'size':>9} {'calls':>11} {'xccl us':>10} {'GB/s':>8} {'nccl us':>10} {'GB/s':>8}"
        f" {'speedup':>8}",
        flush=True,
    )
    for nbytes in SIZES:
        _current["row"] = f"eager {human(nbytes)}"
        x, fns = None, {}
        try:
            x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
            for name in BACKENDS:
                group = groups.get(name)
                fns[name] = (
                    None if group is None else (lambda g=group, x=x: dist.all_reduce(x, group=g))
                )
        except Exception as e:  # noqa: BLE001
            failures.add(f"eager {human(nbytes)} input", e)
            fns = {name: None for name in BACKENDS}

        result = measure(
            torch,
            f"eager {human(nbytes)}",
            fns,
            lambda per_call: block_calls(per_call, MIN_CALLS, args.iters),
            failures,
        )
        bw = {n: (f"{nbytes / t / 1e9:8.2f}" if t else f"{'-':>8}") for n, (t, _) in result.items()}
        counts = "/".join(str(result[n][1] or "-") for n in BACKENDS)
        print(
            f"{human(nbytes):>9} {counts:>11} {cell(result['xccl'][0], 10)} {bw['xccl']} "
            f"{cell(result['nccl'][0], 10)} {bw['nccl']} {speedup(result)}",
            flush=True,
        )
        table.add("eager", nbytes, result)
        del x, fns
        torch.cuda.empty_cache()

    print(f"\nlaunch overhead: {GRAPH_CALLS} x all_reduce {human(GRAPH_BYTES)}, per call")
    print(f"{'mode':>9} {'xccl us':>10} {'nccl us':>10} {'speedup':>8}", flush=True)
    n = GRAPH_BYTES // 4
    eager_fns, graph_fns = {}, {}
    for name in BACKENDS:
        group = groups.get(name)
        eager_fns[name] = graph_fns[name] = None
        if group is None:
            continue
        _current["row"] = f"graph capture ({name})"
        try:
            x = torch.ones(n, dtype=torch.float32, device="cuda")

            def k_calls(x=x, group=group) -> None:
                for _ in range(GRAPH_CALLS):
                    dist.all_reduce(x, group=group)

            eager_fns[name] = k_calls
            # xccl needs one eager call first: its first GPU collective sets up the workspace,
            # which cannot happen during capture (docs/gpu.md); NCCL creates its communicator.
            dist.all_reduce(x, group=group)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                k_calls()
            torch.cuda.synchronize()

            def replays(graph=graph) -> None:
                for _ in range(GRAPH_REPLAYS):
                    graph.replay()

            graph_fns[name] = replays
        except Exception as e:  # noqa: BLE001
            failures.add(f"{name} graph capture", e)
    per_mode = {}
    for mode, fns, per_fn in (
        ("eager", eager_fns, GRAPH_CALLS),
        ("graph", graph_fns, GRAPH_CALLS * GRAPH_REPLAYS),
    ):
        _current["row"] = f"{mode} {GRAPH_CALLS} x {human(GRAPH_BYTES)}"
        # Each fn call is per_fn all_reduce calls; the table and the CSV count all_reduce calls.
        result = measure(
            torch,
            f"{mode} {GRAPH_CALLS} x {human(GRAPH_BYTES)}",
            fns,
            lambda per_call: block_calls(per_call, 2, 100),
            failures,
        )
        result = {
            k: (t / per_fn if t else None, c * per_fn if c else None)
            for k, (t, c) in result.items()
        }
        print(
            f"{mode:>9} {cell(result['xccl'][0], 10)} {cell(result['nccl'][0], 10)} "
            f"{speedup(result)}",
            flush=True,
        )
        table.add(f"{mode}_x{GRAPH_CALLS}", GRAPH_BYTES, result)
        per_mode[mode] = result
    gain = {
        k: (
            f"{per_mode['eager'][k][0] / per_mode['graph'][k][0]:.2f}x"
            if per_mode["eager"][k][0] and per_mode["graph"][k][0]
            else "-"
        )
        for k in BACKENDS
    }
    print(f"graph gain (eager / graph time): xccl {gain['xccl']}, nccl {gain['nccl']}")

    table.close()
    if failures.lines:
        print("\nfailures:")
        for line in failures.lines:
            print(f"  {line}")
    print(
        f"\ngpu_overhead: {'FAIL' if failures.lines or table.failed else 'ok'}: "
        f"{table.done - table.failed} of {table.done} measurements done",
        flush=True,
    )
    _current["row"] = "shutdown"
    try:
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001  (the results are out; this does not change them)
        print(f"gpu_overhead: note: destroy_process_group: {e}", file=sys.stderr)
    return 1 if failures.lines or table.failed else 0


if __name__ == "__main__":
    sys.exit(main())
