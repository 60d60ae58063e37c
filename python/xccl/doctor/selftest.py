"""The self-test of `python -m xccl doctor`: 2 ranks on this host time all_reduce latency and
bandwidth on the backend and on the baseline (gloo, or NCCL on GPUs) in the same run.

Ranks start through xccl.bench's launcher (a forkserver, a file-store rendezvous in a private
folder, bounded teardown) and their times reduce with xccl.bench's statistics and bus-bandwidth
rule, so the doctor and the benchmark measure alike.
"""

from __future__ import annotations

import importlib
import time
from datetime import timedelta

from ..bench import launch, method
from .checks import FAIL, PASS, WARN, Check

SMALL_BYTES = 32  # latency probe: 8 float32
LARGE_BYTES = 16 << 20  # bandwidth probe
SELFTEST_TIMEOUT_S = 45.0
# The self-test's bar, relative to gloo measured in the same run on the same host (timings on a
# shared machine mean little in absolute terms).
MAX_LATENCY_RATIO = 2.0
MIN_BANDWIDTH_RATIO = 0.5
# Absolute floors for when there is no baseline (the backend under test is gloo itself).
MAX_LATENCY_S = 0.005  # gloo on a 2-vCPU VM: ~0.4 ms (measured on loopback TCP, 2 ranks)
MIN_BUSBW_GBPS = 0.05


def _time_allreduce(dist, torch, tensor, group, iters: int, warmup: int, device: str) -> list:
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    sync()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        sync()
        times.append(time.perf_counter() - start)
    return times


def _selftest_worker(
    backend: str,
    device: str,
    timeout_s: float,
    iters: int,
    results,
    rank: int,
    world: int,
    init_method: str,
) -> None:
    """One rank (started by launch.local_ranks). Never raises: every outcome, errors included,
    goes to `results`."""
    out = {"rank": rank}
    try:
        import torch
        import torch.distributed as dist

        if backend == "xccl":
            importlib.import_module("xccl")  # registers the backend
        if device == "cuda":
            torch.cuda.set_device(rank)
            out["device_count"] = torch.cuda.device_count()
        baseline_name = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(
            baseline_name,
            init_method=init_method,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s),
        )
        groups = {"baseline": None}
        if backend != baseline_name:
            try:
                groups["backend"] = dist.new_group(
                    backend=backend, timeout=timedelta(seconds=timeout_s)
                )
            except Exception as error:  # noqa: BLE001 - reported; the baseline still runs
                out["create_error"] = f"{type(error).__name__}: {error}"
        else:
            groups["backend"] = None
        expected = world * (world + 1) / 2
        for label, group in groups.items():
            if label == "baseline" and "backend" in groups and backend == baseline_name:
                continue  # the same thing twice
            small = torch.full((SMALL_BYTES // 4,), float(rank + 1), device=device)
            large = torch.full((LARGE_BYTES // 4,), float(rank + 1), device=device)
            dist.all_reduce(small, group=group)
            dist.all_reduce(large, group=group)
            ok = bool((small == expected).all()) and bool((large == expected).all())
            small_times = _time_allreduce(dist, torch, small, group, iters * 10, 20, device)
            large_times = _time_allreduce(dist, torch, large, group, iters, 2, device)
            out[label] = {"correct": ok, "small": small_times, "large": large_times}
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - a rank reports every failure, never raises
        out["error"] = f"{type(error).__name__}: {error}"
    results.put(out)


def run_selftest(
    backend: str = "xccl",
    device: str = "cpu",
    world: int = 2,
    timeout_s: float = SELFTEST_TIMEOUT_S,
    iters: int = 5,
) -> dict:
    """Runs `world` ranks on this host; returns {"ranks": [...], "error": str|None}.

    Ranks are started by xccl.bench's launcher (never forked from this process)."""
    import torch
    import torch.distributed  # noqa: F401

    ranks, error = launch.gather_reports(
        _selftest_worker, world, (backend, device, timeout_s * 0.8, iters), "xccl-doctor", timeout_s
    )
    ranks.sort(key=lambda r: r["rank"])
    return {"ranks": ranks, "error": error, "backend": backend, "device": device, "world": world}


def _median_max(ranks: list, label: str, key: str) -> float | None:
    """The slowest rank's median: a collective finishes when its last rank does (the bench's
    rule, method.max_across_ranks)."""
    stats = [method.summarize(r[label][key]) for r in ranks if label in r and r[label][key]]
    return method.max_across_ranks(stats)["median"] if stats else None


def check_selftest(result: dict) -> list:
    backend, device, world = result["backend"], result["device"], result["world"]
    name = "selftest"
    if result["error"]:
        return [Check(FAIL, name, f"{backend} on {device}: {result['error']}")]
    errors = [r["error"] for r in result["ranks"] if "error" in r]
    if errors:
        return [Check(FAIL, name, f"{backend} on {device}: {errors[0]}")]
    created = [r["create_error"] for r in result["ranks"] if "create_error" in r]
    if created:
        return [Check(FAIL, name, f"backend {backend!r} could not be created: {created[0]}")]
    label = "backend" if all("backend" in r for r in result["ranks"]) else "baseline"
    checks = []
    if not all(r[label]["correct"] for r in result["ranks"]):
        checks.append(Check(FAIL, name, f"{backend} all_reduce gave a wrong sum"))
    small = _median_max(result["ranks"], label, "small")
    large = _median_max(result["ranks"], label, "large")
    base_small = _median_max(result["ranks"], "baseline", "small")
    base_large = _median_max(result["ranks"], "baseline", "large")
    busbw = method.bandwidths("all_reduce", LARGE_BYTES, large, world)[1]  # GB/s
    where = f"{world} ranks, {device}"
    if base_small is not None:
        status = PASS if small <= MAX_LATENCY_RATIO * base_small else WARN
        checks.append(
            Check(
                status,
                name + ".latency",
                f"{backend} all_reduce {SMALL_BYTES} B: {small * 1e6:.0f} us median "
                f"vs {base_small * 1e6:.0f} us for the baseline ({where})",
            )
        )
        base_busbw = method.bandwidths("all_reduce", LARGE_BYTES, base_large, world)[1]
        status = PASS if busbw >= MIN_BANDWIDTH_RATIO * base_busbw else WARN
        checks.append(
            Check(
                status,
                name + ".bandwidth",
                f"{backend} all_reduce 16 MiB: {busbw:.2f} GB/s bus bandwidth "
                f"vs {base_busbw:.2f} GB/s for the baseline ({where})",
            )
        )
    else:
        status = PASS if small <= MAX_LATENCY_S else WARN
        checks.append(
            Check(
                status,
                name + ".latency",
                f"{backend} all_reduce {SMALL_BYTES} B: {small * 1e6:.0f} us median "
                f"(expected under {MAX_LATENCY_S * 1e6:.0f} us; {where})",
            )
        )
        status = PASS if busbw >= MIN_BUSBW_GBPS else WARN
        checks.append(
            Check(
                status,
                name + ".bandwidth",
                f"{backend} all_reduce 16 MiB: {busbw:.2f} GB/s bus bandwidth "
                f"(expected over {MIN_BUSBW_GBPS:.2f} GB/s; {where})",
            )
        )
    counts = {r.get("device_count") for r in result["ranks"] if "device_count" in r}
    if counts:
        checks.append(Check(PASS, "gpus", f"torch sees {counts.pop()} GPU(s)"))
    return checks
