"""Markdown tables of GPU benchmark runs: xccl against NCCL, one section per run (a route or a
mode), one row per op and size. Pure functions on the JSON that `python -m xccl.bench --json`
writes (report.py's records), so they are tested without torch or a GPU.

    python -m xccl.bench.markdown kernel.json=LABEL vendor.json=LABEL ... [--out FILE]

Each section compares the two backends measured in that run (interleaved in the same
processes): xccl/NCCL is xccl's median time over NCCL's, so below 1 xccl is faster. The targets
of issue 9 are checked per section: all_reduce up to 256 KiB at most 0.5x NCCL's time, and no
size slower than NCCL.

A run that forces a kernel (XCCL_GPU_ALGO=kernel, one_shot, ...) claims a row for xccl's kernels
only where the route counters the bench recorded (xccl.gpu_routes) show the kernels alone ran it:
a kernel that cannot run falls back to NCCL or host memory with exact results, so its check
cell then says where the calls went, and a line under the table lists those rows.
"""

from __future__ import annotations

import argparse
import json
import sys

from .options import format_size

# Issue 9's performance targets, for the verdict lines under each section.
SMALL_ALL_REDUCE_BYTES = 256 << 10
SMALL_ALL_REDUCE_TARGET = 0.5
ANY_SIZE_TARGET = 1.0

# How backend names print in headings: the vendor libraries in capitals, as they spell them.
DISPLAY = {"nccl": "NCCL", "rccl": "RCCL"}


def display(name) -> str:
    return DISPLAY.get(str(name).lower(), str(name))


def names(records: list) -> tuple:
    """(tested, reference) display names: those of the first record, "xccl"/"NCCL" if none."""
    first = records[0] if records else {}
    return (
        display((first.get("backend") or {}).get("name", "xccl")),
        display((first.get("reference") or {}).get("name", "nccl")),
    )


def columns(records: list) -> tuple:
    mine, ref = names(records)
    return (
        "op",
        "size",
        f"{ref} us",
        f"{mine} us",
        f"{mine}/{ref}",
        f"{ref} algbw",
        f"{mine} algbw",
        f"{ref} busbw",
        f"{mine} busbw",
        "check",
    )


def ratio(record: dict) -> float | None:
    """xccl median / NCCL median for one record, or None when either is missing or zero."""
    mine, theirs = record.get("backend"), record.get("reference")
    if not mine or not theirs or not mine.get("median_us") or not theirs.get("median_us"):
        return None
    return mine["median_us"] / theirs["median_us"]


def _us(value) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def _gbps(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _check(record: dict) -> str:
    verdicts = [
        (side["name"], side.get("check"))
        for side in (record.get("backend"), record.get("reference"))
        if side
    ]
    if all(v is None for _, v in verdicts):
        return "-"
    failed = [name for name, v in verdicts if v not in (None, "PASS")]
    return "FAIL " + ",".join(failed) if failed else "PASS"


VENDOR_SPELLINGS = ("nccl", "rccl", "vendor")


def claims_kernel(meta: dict) -> bool:
    """Whether the run forced one of xccl's kernels (XCCL_GPU_ALGO other than auto or a vendor)."""
    algo = (meta.get("xccl_gpu_algo") or "auto").lower()
    return algo != "auto" and algo not in VENDOR_SPELLINGS


def off_kernel(record: dict) -> str:
    """ "" when the record's counted calls ran on xccl's kernels alone, else where they went
    ("host 40", "route not counted" for a record without counters)."""
    routes = (record.get("backend") or {}).get("routes")
    if routes is None:
        return "route not counted"
    if routes.get("kernel", 0) > 0 and not any(n for r, n in routes.items() if r != "kernel"):
        return ""
    return ", ".join(f"{r} {n}" for r, n in sorted(routes.items()) if n) or "no GPU call"


def _check_cell(record: dict, kernel: bool) -> str:
    went = off_kernel(record) if kernel else ""
    return _check(record) + (f"; not kernel: {went}" if went else "")


def route_verdict(records: list) -> str:
    """The line under a kernel run's table: every row counted on the kernel route, or which
    were not."""
    off = [(r, off_kernel(r)) for r in records]
    off = [f"{r['op']} {format_size(r['bytes'])} ({went})" for r, went in off if went]
    if not off:
        return f"route: all {len(records)} rows counted on xccl's kernels"
    return f"route: NOT xccl's kernels at {len(off)} of {len(records)} rows: {', '.join(off)}"


def row(record: dict, kernel: bool = False) -> list:
    mine, theirs = record["backend"], record.get("reference") or {}
    r = ratio(record)
    return [
        record["op"],
        format_size(record["bytes"]),
        _us(theirs.get("median_us")),
        _us(mine.get("median_us")),
        "-" if r is None else f"{r:.2f}",
        _gbps(theirs.get("algbw_gbps")),
        _gbps(mine.get("algbw_gbps")),
        _gbps(theirs.get("busbw_gbps")),
        _gbps(mine.get("busbw_gbps")),
        _check_cell(record, kernel),
    ]


def table(records: list, kernel: bool = False) -> str:
    """One markdown table, rows in the records' order (op, then size)."""
    heads = columns(records)
    lines = [
        "| " + " | ".join(heads) + " |",
        "|" + "|".join("---" if c in ("op", "check") else "---:" for c in heads) + "|",
    ]
    lines += ["| " + " | ".join(row(record, kernel)) + " |" for record in records]
    return "\n".join(lines)


def verdicts(records: list) -> list:
    """Lines saying how the run fares against issue 9's targets (only what it measured; the
    small-message target only against NCCL/RCCL, which it is stated for)."""
    lines = []
    mine, ref = names(records)
    small = [
        (ratio(r), r["bytes"])
        for r in records
        if r["op"] == "all_reduce" and r["bytes"] <= SMALL_ALL_REDUCE_BYTES and ratio(r)
    ]
    if small and ref in DISPLAY.values():
        worst = max(small)
        met = "met" if worst[0] <= SMALL_ALL_REDUCE_TARGET else "NOT met"
        lines.append(
            f"all_reduce <= {format_size(SMALL_ALL_REDUCE_BYTES)}: worst {mine}/{ref} "
            f"{worst[0]:.2f} at {format_size(worst[1])} (target <= "
            f"{SMALL_ALL_REDUCE_TARGET:g}: {met})"
        )
    measured = [(ratio(r), r["op"], r["bytes"]) for r in records if ratio(r)]
    slower = [m for m in measured if m[0] > ANY_SIZE_TARGET]
    if measured:
        detail = ", ".join(f"{op} {format_size(n)} ({x:.2f})" for x, op, n in slower[:8])
        more = f" and {len(slower) - 8} more" if len(slower) > 8 else ""
        lines.append(
            f"{mine} slower than {ref} at {len(slower)} of {len(measured)} sizes"
            + (f": {detail}{more}" if slower else "")
        )
    failed = [
        f"{r['op']} {format_size(r['bytes'])}" for r in records if _check(r).startswith("FAIL")
    ]
    if failed:
        lines.append(f"check FAILED at {len(failed)} sizes: {', '.join(failed)}")
    return lines


def describe_run(meta: dict) -> str:
    """The run's conditions in one line: ranks, device, dtype, route, timing."""
    method = meta.get("method", {})
    route = meta.get("xccl_gpu_algo") or "auto (xccl's own plan)"
    timing = method.get("timing", "call")
    if timing == "batch":
        timing = f"batch of {method.get('batch_calls')} calls per synchronize"
    graph = method.get("graph_calls")
    mode = f"CUDA graph of {graph} calls per replay" if graph else "eager"
    where = "sharing one" if meta.get("share_gpu") else "on"
    return (
        f"{meta.get('nranks')} ranks {where} {meta.get('device')}, {meta.get('dtype')}, "
        f"XCCL_GPU_ALGO={route}, {mode}, timing: {timing}"
    )


def has_reference(records: list) -> bool:
    return any(r.get("reference") for r in records)


def shared_table(records: list, copy_gbps: float | None, kernel: bool = False) -> str:
    """Ranks sharing one GPU: xccl alone (NCCL cannot run there), busbw against the GPU's copy
    rate, since every byte a rank reads from a peer is a read of the same HBM."""
    heads = ("op", "size", "xccl us", "xccl algbw", "xccl busbw", "busbw/copy", "NCCL", "check")
    lines = [
        "| " + " | ".join(heads) + " |",
        "|" + "|".join("---" if c in ("op", "NCCL", "check") else "---:" for c in heads) + "|",
    ]
    for record in records:
        mine = record["backend"]
        busbw = mine.get("busbw_gbps")
        share = f"{busbw / copy_gbps:.2f}" if busbw is not None and copy_gbps else "-"
        cells = [
            record["op"],
            format_size(record["bytes"]),
            _us(mine.get("median_us")),
            _gbps(mine.get("algbw_gbps")),
            _gbps(busbw),
            share,
            "n/a",
            _check_cell(record, kernel),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


NO_NCCL_ON_SHARED_GPU = (
    "NCCL: not measured: NCCL cannot run several ranks on one GPU (it refuses two ranks on one "
    "device), so there is no vendor number to compare with here"
)
WORLD_ONE = (
    "world size 1: no byte crosses a link (xccl makes at most a local copy, NCCL runs its "
    "one-rank path): per-call fixed costs, not a comparison of collectives; issue 9's targets "
    "do not apply"
)


def section(label: str, document: dict, copy_gbps: float | None = None) -> str:
    records, meta = document.get("results", []), document.get("meta", {})
    parts = [f"### {label}", "", describe_run(meta), ""]
    kernel = claims_kernel(meta)
    if records and not has_reference(records):
        parts.append(shared_table(records, copy_gbps, kernel))
        lines = [NO_NCCL_ON_SHARED_GPU] + [v for v in verdicts(records) if v.startswith("check")]
    elif meta.get("nranks") == 1:
        parts.append(table(records, kernel) if records else "(no results)")
        lines = [WORLD_ONE] + [v for v in verdicts(records) if v.startswith("check")]
    else:
        parts.append(table(records, kernel) if records else "(no results)")
        lines = verdicts(records)
    if kernel and records:
        lines.append(route_verdict(records))
    if lines:
        parts += [""] + [f"- {line}" for line in lines]
    return "\n".join(parts)


def header(document: dict) -> str:
    meta = document.get("meta", {})
    mine, ref = names(document.get("results", []))
    versus = f"{mine} vs {ref}" if has_reference(document.get("results", [])) else mine
    return (
        f"xccl {meta.get('xccl_version')}: {versus}, torch {meta.get('torch_version')}, "
        f"{meta.get('nranks')} x {meta.get('device')}, host {meta.get('host')}, "
        f"{meta.get('created')}. Times: median per-call us of the slowest rank; algbw = "
        "size / time and busbw in GB/s, busbw with nccl-tests' factors (all_reduce 2(n-1)/n, "
        "all_gather and reduce_scatter "
        f"(n-1)/n); {mine}/{ref} < 1: {mine} faster."
    )


def document(runs: list, missing: list = (), copy_gbps: float | None = None) -> str:
    """The whole report: runs is [(label, json document)], missing [(label, why)]; copy_gbps,
    when measured, the GPU's device-to-device copy rate (10^9 bytes copied per second)."""
    if not runs:
        parts = ["No GPU benchmark run produced results."]
    else:
        parts = [header(runs[0][1])]
        if copy_gbps:
            parts.append(
                f"Copy roofline of this GPU, measured in the same run: {copy_gbps:.0f} GB/s "
                "(one device-to-device copy of 1 GiB, bytes copied / time; HBM moves twice "
                "that). busbw/copy: the kernels' busbw over it."
            )
        parts += [section(label, doc, copy_gbps) for label, doc in runs]
    parts += [f"### {label}\n\nnot run: {why}" for label, why in missing]
    return "\n\n".join(parts) + "\n"


def _argument(text: str) -> tuple:
    path, _, label = text.partition("=")
    return path, label or path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m xccl.bench.markdown", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "runs",
        nargs="+",
        type=_argument,
        metavar="RUN.json[=LABEL]",
        help="JSON written by python -m xccl.bench --json",
    )
    parser.add_argument("--out", metavar="FILE", help="also write the markdown here")
    args = parser.parse_args(argv)
    runs, missing = [], []
    for path, label in args.runs:
        try:
            with open(path, encoding="utf-8") as f:
                runs.append((label, json.load(f)))
        except (OSError, ValueError) as error:  # a run that failed or was cut short
            missing.append((label, f"{path}: {error}"))
    text = document(runs, missing)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0 if runs and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
