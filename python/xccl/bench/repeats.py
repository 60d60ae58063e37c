"""Several runs of one comparison, folded: per op and size the speedup of every run and their
median. On oversubscribed cores one run's median can land in either mode of a bimodal
distribution (benchmarks/RESULTS.md), so a claim rests on the median over runs, next to an A/A
run (the same plan on both sides) that shows how far apart identical plans land.

    python -m xccl.bench.repeats RUN.json ... [--tuning FILE]

--tuning FILE marks the sizes FILE's table plans differently from the rules ("tuned") and the
rest ("same plan"). Pure functions on `python -m xccl.bench --json` documents; no torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from .options import format_size


def speedups(documents: list) -> dict:
    """(op, bytes) -> [speedup per run, in the runs' order] (reference time / tested time)."""
    found: dict = {}
    for document in documents:
        for record in document["results"]:
            if "nets" in record:  # --netns-hosts: one side per engine, the reference as "gloo"
                record = dict(record, backend=next(iter(record["nets"].values()), None))
                record["reference"] = record["gloo"]
            tested, reference = record.get("backend") or {}, record.get("reference") or {}
            mine, theirs = tested.get("median_us"), reference.get("median_us")
            if mine and theirs:
                found.setdefault((record["op"], record["bytes"]), []).append(theirs / mine)
    return found


def tuned_ranges(table: dict) -> set:
    """(collective, min_bytes, max_bytes or None) of each entry in the table's cpu section, in
    the bytes bench counts (both use nccl-tests' convention, docs/tuning.md)."""
    entries = (table.get("cpu") or {}).get("entries", [])
    return {(e["collective"], e["min_bytes"], e["max_bytes"]) for e in entries}


def covered(ranges: set, op: str, nbytes: int) -> bool:
    return any(
        c == op and low <= nbytes and (high is None or nbytes < high) for c, low, high in ranges
    )


def rows(found: dict, ranges: set | None) -> list:
    out = []
    for (op, nbytes), values in found.items():
        mark = "" if ranges is None else ("tuned" if covered(ranges, op, nbytes) else "same plan")
        out.append(
            {
                "op": op,
                "bytes": nbytes,
                "runs": values,
                "median": statistics.median(values),
                "mark": mark,
            }
        )
    return out


def format_rows(table: list) -> str:
    lines = ["op              size      median   runs"]
    for r in table:
        runs = " ".join(f"{v:.2f}" for v in r["runs"])
        mark = f"  {r['mark']}" if r["mark"] else ""
        lines.append(
            f"{r['op']:<15} {format_size(r['bytes']):>8}  {r['median']:6.2f}x  {runs}{mark}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xccl.bench.repeats", description=__doc__)
    parser.add_argument("runs", nargs="+", help="JSON files of python -m xccl.bench --json")
    parser.add_argument("--tuning", help="the tuning table the tested side planned from")
    args = parser.parse_args(argv)
    documents = []
    for path in args.runs:
        with open(path, encoding="utf-8") as f:
            documents.append(json.load(f))
    ranges = None
    if args.tuning:
        with open(args.tuning, encoding="utf-8") as f:
            ranges = tuned_ranges(json.load(f))
    folded = rows(speedups(documents), ranges)
    print(format_rows(folded))
    for mark in ("same plan", "tuned"):
        medians = [r["median"] for r in folded if r["mark"] == mark]
        if medians:
            print(
                f"{mark}: {len(medians)} sizes, medians {min(medians):.2f}x to {max(medians):.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
