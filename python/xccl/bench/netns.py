"""`python -m xccl.bench --netns-hosts N --nets tcp,ofi`: the benchmark across hosts made of
network namespaces on this machine (hosts.py), in one command.

It builds the hosts, then for each network engine in --nets starts the ranks in them (spread
host by host, as a launcher would) with XCCL_NET set to that engine, each run measuring xccl
against gloo interleaved as usual; then it removes the hosts and prints one table per op with
every engine's busbw beside gloo's. XCCL_NET is read when a group is created, so each engine is
a run of its own; gloo is measured in every run and the table shows its best (the lowest median
time), so an engine's speedup is never flattered by a slow gloo sample.

Ranks are plain processes started with torchrun's variables; the options reach them as a JSON
file (the same options, output written by this process instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from . import hosts as hosts_module
from . import onesided_report, tuned
from .load import Load
from .options import ONE_SIDED, format_size
from .rank import EXIT_CHECK_FAILED, EXIT_RANK_FAILED, EXIT_USAGE, FAILURE_GRACE_S, run_rank

NETS = ("tcp", "ofi")


def layout(nranks: int, count: int) -> list:
    """Ranks per host: as even as possible, the first hosts taking the remainder."""
    return [nranks // count + (1 if host < nranks % count else 0) for host in range(count)]


def main(args) -> int:
    reason = hosts_module.unavailable_reason()
    if reason:
        sys.stderr.write(f"xccl bench: --netns-hosts: {reason}\n")
        return EXIT_USAGE
    unread = [net for net in args.nets if net != "tcp" and not _reads("XCCL_NET")]
    if unread:
        sys.stderr.write(
            f"xccl bench: --nets {','.join(unread)}: this build of xccl does not read XCCL_NET, "
            "so it cannot be told which engine to use (only its TCP transport)\n"
        )
        return EXIT_USAGE
    runs, status = {}, 0
    with (
        tempfile.TemporaryDirectory(prefix="xccl-bench-netns-") as folder,
        Load.start(args.load) as load,  # one load for the machine all hosts share
    ):
        args.load_pids = load.pids
        with hosts_module.Hosts(args.netns_hosts) as made:
            for net in args.nets:
                sys.stderr.write(
                    f"xccl bench: xccl over {net} vs {_reference(args)}, {args.nranks} ranks on "
                    f"{args.netns_hosts} namespace hosts {layout(args.nranks, made.count)}\n"
                )
                code = _run(made, args, net, folder)
                if code not in (0, EXIT_CHECK_FAILED):
                    return code
                status = max(status, code)
                with open(os.path.join(folder, f"{net}.json"), encoding="utf-8") as f:
                    runs[net] = json.load(f)
    records = merge(runs)
    for op in args.ops:
        table = onesided_report.netns_table if op in ONE_SIDED else format_table
        print(
            table([r for r in records if r["op"] == op], title(op, args, _reference(args))) + "\n"
        )
    lines = onesided_report.netns_summary([r for r in records if r["op"] in ONE_SIDED])
    if lines:
        print("\n".join(["One-sided across hosts:"] + ["  " + line for line in lines]))
    if args.json:
        meta = {**next(iter(runs.values()))["meta"], "netns_hosts": args.netns_hosts}
        meta.update(nets=list(args.nets), argv=args.argv)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": records}, f, indent=2)
        print(f"wrote {args.json}")
    return status


def _reads(name: str) -> bool:
    from .. import _native

    return any(entry[0] == name for entry in _native.env_variables())


def _run(made, args, net: str, folder: str) -> int:
    """One run of the benchmark with every rank in its host; rank 0 writes FOLDER/NET.json."""
    child = argparse.Namespace(**vars(args))
    child.json = os.path.join(folder, f"{net}.json")
    child.csv = child.plot = None
    child.no_progress, child.device, child.netns_hosts = True, "cpu", 0
    options_file = os.path.join(folder, f"{net}.options.json")
    with open(options_file, "w", encoding="utf-8") as f:
        json.dump(vars(child), f)
    procs, rank = [], 0
    for host, count in enumerate(layout(args.nranks, made.count)):
        for local in range(count):
            env = _rank_env(rank, args.nranks, local, count, net)
            log = open(os.path.join(folder, f"{net}.rank{rank}.log"), "w")  # noqa: SIM115
            argv = [sys.executable, "-m", "xccl.bench.netns", options_file]
            procs.append((made.popen(host, argv, env=env, stdout=log, stderr=log), log))
            rank += 1
    try:
        code = _wait([proc for proc, _ in procs], args.time_limit)
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.close()
    if code not in (0, EXIT_CHECK_FAILED):
        for rank in range(len(procs)):
            with open(os.path.join(folder, f"{net}.rank{rank}.log"), encoding="utf-8") as f:
                tail = f.read()[-2000:].strip()
            if tail:
                sys.stderr.write(f"--- rank {rank} over {net}:\n{tail}\n")
    return code


def _rank_env(rank: int, world: int, local: int, local_world: int, net: str) -> dict:
    env = hosts_module.rank_env(dict(os.environ), rank, world, local, local_world)
    env["XCCL_NET"] = net  # both links carry it: by default every usable interface does
    # All hosts share this machine's cores, as local ranks do (launch.py's rule).
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world)))
    return env


def _wait(procs: list, time_limit: float) -> int:
    deadline, first_failure = time.monotonic() + time_limit, None
    while any(proc.poll() is None for proc in procs):
        now = time.monotonic()
        if first_failure is None and any(
            proc.returncode not in (None, 0, EXIT_CHECK_FAILED) for proc in procs
        ):
            first_failure = now
        if first_failure is not None and now - first_failure > FAILURE_GRACE_S:
            sys.stderr.write("xccl bench: a rank failed; stopping the others\n")
            return EXIT_RANK_FAILED
        if now > deadline:
            sys.stderr.write(f"xccl bench: not finished within --time-limit {time_limit:.0f} s\n")
            return EXIT_RANK_FAILED
        time.sleep(0.1)
    codes = [proc.returncode for proc in procs]
    if all(code in (0, EXIT_CHECK_FAILED) for code in codes):
        return max(codes)
    return EXIT_RANK_FAILED


def merge(runs: dict) -> list:
    """One record per op and size from each engine's run: {"op", "bytes", "nranks", "dtype",
    "nets": {net: backend side}, "gloo": the reference side with the lowest median,
    "speedup": {net: gloo median / engine median}}; one-sided records (onesided_report.py) also
    keep "pages", "page_bytes", and their "baselines" and "ratios" by net."""
    merged = _merge_level(runs, lambda record: record)
    loaded = _merge_level(runs, lambda record: record.get("loaded"))
    for key, row in merged.items():
        if key in loaded:
            row["loaded"] = loaded[key]
    return list(merged.values())


def _merge_level(runs: dict, pick) -> dict:
    """merge() for the records pick(record) selects (the quiet ones, or the loaded ones)."""
    merged = {}
    for net, run in runs.items():
        for record in filter(None, map(pick, run["results"])):
            key = (record["op"], record["bytes"], record.get("page_bytes"))
            row = merged.setdefault(
                key,
                {k: record[k] for k in ("op", "bytes", "count", "dtype", "nranks")}
                | {"nets": {}, "gloo": None},
            )
            row["nets"][net] = record["backend"]
            if "load" in record:
                row["load"] = record["load"]
            if "ratios" in record:
                row.update(pages=record["pages"], page_bytes=record["page_bytes"])
                row.setdefault("baselines", {})[net] = record["baselines"]
                row.setdefault("ratios", {})[net] = record["ratios"]
            reference = record.get("reference")
            if reference and (
                row["gloo"] is None or reference["median_us"] < row["gloo"]["median_us"]
            ):
                row["gloo"] = reference
    for row in merged.values():
        gloo = row["gloo"]
        row["speedup"] = {
            net: (gloo["median_us"] / side["median_us"] if gloo and side["median_us"] else None)
            for net, side in row["nets"].items()
        }
    return merged


def _reference(args) -> str:
    """The reference's name as the tables print it (the JSON keeps it under "gloo" whatever it
    is: the records' shape predates other references)."""
    name = "gloo" if args.reference == "auto" else args.reference
    return tuned.side_name(getattr(args, "tuning_text", None), "reference", name)


def title(op: str, args, reference: str = "gloo") -> str:
    where = (
        f"{args.dtype}, {args.nranks} ranks on {args.netns_hosts} namespace hosts "
        f"{layout(args.nranks, args.netns_hosts)}"
    )
    if op in ONE_SIDED:
        return (
            f"# {op}  {where}, rank 0 -> rank {args.nranks - 1}: GB/s; ratio = {op} GB/s / theirs"
        )
    return f"# {op}  {where}: busbw GB/s; x {reference} = {reference} time / xccl time"


def format_table(records: list, heading: str = "") -> str:
    """Size, then each engine's busbw and speedup over gloo, then gloo's busbw."""
    if not records:
        return ""
    nets = list(records[0]["nets"])
    ref = next((r["gloo"]["name"] for r in records if r.get("gloo")), "gloo")
    checked = any(side.get("check") for r in records for side in r["nets"].values())
    header = ["size"]
    for net in nets:
        header += [f"xccl/{net}", f"x {ref}"]
    header.append(ref)
    load = next((r["loaded"]["load"] for r in records if r.get("loaded")), None)
    if load is not None:  # the same sizes with --load N busy processes (load.py)
        for net in nets:
            header += [f"load {load}: xccl/{net}", f"x {ref}"]
        header.append(ref)
    if checked:
        header.append("check")
    rows = [header]
    for record in records:
        cells = [format_size(record["bytes"])]
        for net in nets:
            side, speedup = record["nets"].get(net), record["speedup"].get(net)
            cells.append(_gbps(side))
            cells.append(f"{speedup:.2f}x" if speedup else "-")
        cells.append(_gbps(record["gloo"]))
        if load is not None:
            loaded = record.get("loaded") or {"nets": {}, "speedup": {}, "gloo": None}
            for net in nets:
                speedup = loaded["speedup"].get(net)
                cells += [_gbps(loaded["nets"].get(net)), f"{speedup:.2f}x" if speedup else "-"]
            cells.append(_gbps(loaded["gloo"]))
        if checked:
            levels = [record] + ([record["loaded"]] if record.get("loaded") else [])
            sides = [s for level in levels for s in (*level["nets"].values(), level["gloo"]) if s]
            cells.append("PASS" if all(s.get("check") == "PASS" for s in sides) else "FAIL")
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(header))]
    lines = [heading] if heading else []
    lines += ["".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def _gbps(side: dict | None) -> str:
    """Three decimals below 1 GB/s: small messages' busbw would all read 0.00."""
    if not side or side["busbw_gbps"] is None:
        return "-"
    value = side["busbw_gbps"]
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def _rank_main(options_file: str) -> int:
    """A rank inside a namespace host: the usual benchmark rank under torchrun's variables."""
    with open(options_file, encoding="utf-8") as f:
        args = argparse.Namespace(**json.load(f))
    environ = os.environ
    return run_rank(
        args,
        int(environ["RANK"]),
        int(environ["WORLD_SIZE"]),
        int(environ["LOCAL_RANK"]),
        "env://",
        launched=True,
    )


if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))
