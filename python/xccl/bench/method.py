"""The measurement method, as pure functions (nccl-tests conventions; benchmarks/README.md).

Nothing here imports torch, so the rules are unit-tested without the extension or a process
group: which buffer a size names, the bus-bandwidth factors, the statistics, and how many
iterations a size gets.
"""

from __future__ import annotations

import math
import random

# Timed iterations when --iters is not given: at least enough for a p10/p90 to mean something,
# at most enough that tiny messages do not spend seconds per size.
MIN_ITERS = 10
MAX_ITERS = 1000
# Timed iterations per interleaving round: fewer rounds than this would make each backend's
# block too short to amortise the barrier before it.
ITERS_PER_ROUND = 10
MAX_ROUNDS = 4
# Calls timed to estimate a short call's time before sizing its loop.
PROBE_CALLS = 5
# Share of --target-time that warm-up may use: long calls get fewer warm-up iterations.
WARMUP_SHARE = 0.25


def busbw_factor(op: str, nranks: int) -> float:
    """nccl-tests' busbw/algbw ratio: what each rank's busiest link carries relative to the
    message, so numbers compare across world sizes and with hardware peak."""
    n = nranks
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "put", "put_pages"):
        return 1.0  # rooted and one-sided ops: the bytes cross one link once
    raise ValueError(f"unknown op {op!r}")


def layout(op: str, nbytes: int, itemsize: int, nranks: int) -> dict | None:
    """The element counts one size means for `op`, or None when it is too small to run.

    "bytes" follows nccl-tests: all_reduce, broadcast and reduce the buffer, all_gather the output,
    reduce_scatter and all_to_all the input. Ops that split the buffer into one chunk per rank
    round the count down to a multiple of the world size, so the bytes reported are the bytes
    actually moved."""
    count = nbytes // itemsize
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        count -= count % nranks
    if count == 0:
        return None
    chunk = count // nranks
    inputs = {
        "all_reduce": count,
        "broadcast": count,
        "reduce": count,
        "all_gather": chunk,
        "reduce_scatter": count,
        "all_to_all": count,
    }
    outputs = {
        "all_reduce": count,
        "broadcast": count,
        "reduce": count,
        "all_gather": count,
        "reduce_scatter": chunk,
        "all_to_all": count,
    }
    if op not in inputs:
        raise ValueError(f"unknown op {op!r}")
    return {"count": count, "bytes": count * itemsize, "input": inputs[op], "output": outputs[op]}


def size_plan(ops, sizes, itemsize: int, nranks: int) -> list:
    """(op, layout) pairs to run, in order: sizes too small for an op are dropped, and so are
    sizes that rounding to whole chunks made equal to the previous one."""
    plan = []
    for op in ops:
        seen = set()
        for size in sizes:
            shape = layout(op, size, itemsize, nranks)
            if shape is not None and shape["bytes"] not in seen:
                seen.add(shape["bytes"])
                plan.append((op, shape))
    return plan


def one_sided_plan(ops, put_sizes, page_sizes, pages, itemsize: int, total: int) -> list:
    """(op, shape) pairs of the one-sided ops, in the order of `ops`. put: one contiguous write
    per size. put_pages: per page size, `pages` pages (default: as many as fill `total` bytes);
    shape["count"] is every page's elements together, so "bytes" is what one call moves."""
    plan = []
    if "put" in ops:
        counts = dict.fromkeys(size // itemsize for size in put_sizes if size >= itemsize)
        plan += [
            ("put", {"count": n, "bytes": n * itemsize, "input": n, "output": n}) for n in counts
        ]
    if "put_pages" in ops:
        for page_bytes in dict.fromkeys(size - size % itemsize for size in page_sizes):
            if page_bytes == 0:
                continue
            n = pages or max(1, total // page_bytes)
            count = n * (page_bytes // itemsize)
            shape = {"count": count, "bytes": count * itemsize, "input": count, "output": count}
            plan.append(("put_pages", {**shape, "pages": n, "page_elems": page_bytes // itemsize}))
    return sorted(plan, key=lambda entry: list(ops).index(entry[0]))


def scattered_pages(pages: int, seed: int) -> tuple:
    """(source pages, destination pages): two independent shuffles of range(pages), so page i
    goes from source page src[i] to destination page dst[i] and neither side is contiguous, as
    when a prefill worker's KV pages land in the pages a decode worker has free."""
    generator = random.Random(seed)
    return generator.sample(range(pages), pages), generator.sample(range(pages), pages)


def percentile(values, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100].

    Not statistics.quantiles(method="inclusive"), which computes the same for two or more
    values: before Python 3.13 it refuses a single value, and `--iters 1` gives one."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


STAT_KEYS = ("median", "p10", "p90", "mean", "min", "max")


def summarize(times) -> dict:
    """One rank's per-iteration times (seconds) reduced to the statistics we report."""
    times = list(times)
    return {
        "median": percentile(times, 50),
        "p10": percentile(times, 10),
        "p90": percentile(times, 90),
        "mean": sum(times) / len(times),
        "min": min(times),
        "max": max(times),
    }


def max_across_ranks(per_rank: list) -> dict:
    """Each statistic's maximum over ranks: a collective is done only when its slowest rank is
    (nccl-tests reports the slowest rank's time the same way)."""
    return {key: max(stats[key] for stats in per_rank) for key in STAT_KEYS}


def bandwidths(op: str, nbytes: int, seconds: float, nranks: int) -> tuple:
    """(algbw, busbw) in GB/s (1e9 bytes/s, as nccl-tests)."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * busbw_factor(op, nranks)


def plan_iterations(estimate_s: float, target_s: float, forced: int | None = None) -> int:
    """Timed iterations for one size and backend: about target_s worth, within bounds."""
    if forced is not None:
        return forced
    if estimate_s <= 0:
        return MAX_ITERS
    return max(MIN_ITERS, min(MAX_ITERS, int(target_s / estimate_s)))


def plan_warmup(estimate_s: float, target_s: float, wanted: int) -> int:
    """Warm-up iterations: `wanted`, but no more than WARMUP_SHARE of the target time allows
    (the calls that produced the estimate have warmed the path already)."""
    if estimate_s <= 0:
        return wanted
    return max(0, min(wanted, int(WARMUP_SHARE * target_s / estimate_s)))


def round_count(iters_per_backend) -> int:
    """Interleaving rounds for one size: every backend gets the same number of blocks."""
    fewest = min(iters_per_backend)
    return max(1, min(MAX_ROUNDS, fewest // ITERS_PER_ROUND))


def split_rounds(iters: int, rounds: int) -> list:
    """`iters` as `rounds` near-equal blocks. The backends alternate block by block, so slow
    drifts in machine load hit both alike."""
    rounds = max(1, min(rounds, iters))
    base, extra = divmod(iters, rounds)
    return [base + (1 if i < extra else 0) for i in range(rounds)]


def side_record(op: str, shape: dict, name: str, mine: list) -> dict:
    """One side of a record from every rank's results for it (measure's values, by rank)."""
    stats = max_across_ranks([m["stats"] for m in mine])
    algbw, busbw = bandwidths(op, shape["bytes"], stats["median"], len(mine))
    checks = [m["check"] for m in mine]
    return {
        "name": name,
        "iters": mine[0]["iters"],
        "warmup": mine[0]["warmup"],
        **{f"{key}_us": round6(stats[key] * 1e6) for key in STAT_KEYS},
        "algbw_gbps": round6(algbw),
        "busbw_gbps": round6(busbw),
        "check": None if checks[0] is None else ("PASS" if all(checks) else "FAIL"),
        "rank_median_us": [round6(m["stats"]["median"] * 1e6) for m in mine],
    }


def absent_record(name: str, why: str) -> dict:
    """A side that has no such op or dtype (bench/peers.py): its name and why, no numbers."""
    return {
        "name": name,
        "absent": why,
        "iters": 0,
        "warmup": 0,
        **{f"{key}_us": None for key in STAT_KEYS},
        "algbw_gbps": None,
        "busbw_gbps": None,
        "check": None,
        "rank_median_us": [],
    }


def round6(value: float | None) -> float | None:
    """Six significant digits: more than any timer here resolves, and readable CSV/JSON."""
    return None if value is None else float(f"{value:.6g}")


def speedup(reference_s: float | None, backend_s: float | None) -> float | None:
    """Reference time over tested-backend time: above 1 means the tested backend is faster."""
    if not reference_s or not backend_s:
        return None
    return reference_s / backend_s


def geomean(values) -> float | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
